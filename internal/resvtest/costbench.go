package resvtest

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// Sink keeps the benchmarks' results live, so the compiler keeps their loops.
var Sink int

// BenchIndexProbe measures one binary-search step over a late-init index:
// keys are the slots, each pointing at its entry's key (the entry's first
// field, so a slot is the entry's address), sorted here by key. A step
// loads the slot, then the key it points at (a dependent load), and
// compares; random keys. It reports ns/step. The packages' cost weights
// for an index probe come from it (BenchmarkCostIndexProbe).
func BenchIndexProbe(b *testing.B, keys []*int32) {
	sort.Slice(keys, func(i, j int) bool { return *keys[i] < *keys[j] })
	r := rand.New(rand.NewPCG(3, 4))
	qs := make([]int32, 4096)
	for i := range qs {
		qs[i] = int32(r.IntN(1 << 30))
	}
	steps := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := qs[i&4095]
		lo, hi := 0, len(keys)
		for lo < hi {
			steps++
			mid := (lo + hi) >> 1
			if *keys[mid] < v {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		Sink += lo
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}
