package ftrace

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// BenchmarkLocation: the simulator's ftrace_location on random text
// addresses of the default image.
func BenchmarkLocation(b *testing.B) {
	k := defaultImage(b)
	ft := newDefault(b)
	rng := rand.New(rand.NewPCG(1, 1))
	locs := k.McountLocs
	c := sim.NewCounters(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ft.Location(c, locs[rng.IntN(len(locs))]-4+uint64(i&7))
	}
}

// BenchmarkArmKprobeFtrace: simulator time to arm 20k kprobes on ftrace
// sites in random order (the kernel's work is O(N + R) per arm; the
// simulator's is not).
func BenchmarkArmKprobeFtrace(b *testing.B) {
	k := defaultImage(b)
	rng := rand.New(rand.NewPCG(2, 2))
	sites := append([]uint64(nil), k.McountLocs[:20000]...)
	rng.Shuffle(len(sites), func(i, j int) { sites[i], sites[j] = sites[j], sites[i] })
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ft := newDefault(b)
		c := sim.NewCounters(false)
		b.StartTimer()
		for _, ip := range sites {
			if err := ft.ArmKprobeFtrace(c, ip, false); err != nil {
				b.Fatal(err)
			}
		}
	}
}
