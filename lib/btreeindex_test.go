package lib

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

// TestKeyTreeLowerBound: the B-tree over a sorted array (repeats allowed)
// answers every lower-bound query as the halving search does.
func TestKeyTreeLowerBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		keys := rapid.SliceOf(rapid.Uint64Range(0, 500)).Draw(rt, "keys")
		slices.Sort(keys)
		kt := NewKeyTree(len(keys), func(i int) uint64 { return keys[i] }, nil)
		for range 50 {
			v := rapid.Uint64Range(0, 520).Draw(rt, "v")
			want := LowerBound(len(keys), func(i int) uint64 { return keys[i] }, v, func() {})
			if got := kt.LowerBound(v, nil); got != want {
				rt.Fatalf("LowerBound(%d) = %d, halving search %d (keys %v)", v, got, want, keys)
			}
		}
	})
}

func ExampleKeyTree() {
	codes := []uint64{0x1000, 0x1010, 0x1020, 0x1030}
	kt := NewKeyTree(len(codes), func(i int) uint64 { return codes[i] }, nil)
	fmt.Println(kt.LowerBound(0x1011, nil), kt.LowerBound(0x2000, nil), kt.Bytes())
	// Output: 2 4 256
}

// BenchmarkReservationLookup: one lower-bound query of a late-init index
// of N entries, sorted array vs B-tree (the probes/op and nodes/op metrics
// are the counted kernel work; est-cycles/op prices them).
var benchProbe = sim.NewOp("image.bench.probe", 14, "benchmark only: one halving-search step", "one halving-search step (BenchmarkReservationLookup)")

func BenchmarkReservationLookup(b *testing.B) {
	probe := benchProbe
	for _, n := range []int{20000, 50000} {
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = 0xffffffff81000000 + uint64(i)*37
		}
		key := func(i int) uint64 { return keys[i] }
		b.Run(fmt.Sprintf("sorted/n=%d", n), func(b *testing.B) {
			c := sim.NewCounters(false)
			for i := 0; i < b.N; i++ {
				LowerBound(n, key, keys[(i*7919)%n], func() { c.Inc(probe) })
			}
			b.ReportMetric(float64(c.Total(probe))/float64(b.N), "probes/op")
			b.ReportMetric(float64(n*8), "index-bytes")
		})
		b.Run(fmt.Sprintf("btree/n=%d", n), func(b *testing.B) {
			kt := NewKeyTree(n, key, nil)
			c := sim.NewCounters(false)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				kt.LowerBound(keys[(i*7919)%n], c)
			}
			node, _ := sim.LookupOp("maple.node")
			b.ReportMetric(float64(c.Total(node))/float64(b.N), "nodes/op")
			b.ReportMetric(sim.DefaultCosts().Cycles(c)/float64(b.N), "est-cycles/op")
			b.ReportMetric(float64(kt.Bytes()), "index-bytes")
		})
	}
}
