package resvtest

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// Sink keeps the benchmarks' results live, so the compiler keeps their loops.
var Sink int

// ReportPerEntry keeps n live and reports the benchmark's time per entry
// of a table of size entries, scanned b.N times, in unit.
func ReportPerEntry(b *testing.B, n, size int, unit string) {
	Sink = n
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), unit)
}

// BenchIndexProbe measures one binary-search step over a late-init index
// of table t: the slots point at each entry's key (key gives it: the
// entry's first field, so a slot is the entry's address), sorted here by
// key. A step
// loads the slot, then the key it points at (a dependent load), and
// compares; random keys. It reports ns/step. The packages' cost weights
// for an index probe come from it (BenchmarkCostIndexProbe).
func BenchIndexProbe[E any](b *testing.B, t []E, key func(*E) *int32) {
	keys := make([]*int32, len(t))
	for i := range t {
		keys[i] = key(&t[i])
	}
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
