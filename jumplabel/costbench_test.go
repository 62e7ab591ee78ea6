package jumplabel

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/internal/resvtest"
)

// The cost weights in ops.go come from these micro-benchmarks of the
// modelled memory access patterns, run on the host named there, converted
// at its clock (ns × GHz = cycles). Run: go test -run '^$' -bench Cost ./jumplabel

// rawEntry has the layout of struct jump_entry (x86-64, relative): 16 bytes.
type rawEntry struct {
	code   int32
	target int32
	key    int64
}

func rawTable(n int) []rawEntry {
	r := rand.New(rand.NewPCG(1, 2))
	t := make([]rawEntry, n)
	for i := range t {
		t[i] = rawEntry{code: int32(r.IntN(1 << 30)), target: 7, key: int64(r.IntN(1<<20)) << 4}
		if r.IntN(20) == 0 {
			t[i].key |= 2
		}
	}
	return t
}

// BenchmarkCostScanEntry: one __jump_label_text_reserved step over a
// 30k-entry (480 KB) table: load the key's init bit and the relative code
// (code + &field), compare with end (end below every code, so no size is
// computed). Reported per entry.
func BenchmarkCostScanEntry(b *testing.B) {
	t := rawTable(30000)
	init := false
	end := int64(-1)
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range t {
			e := &t[j]
			if init || e.key&2 == 0 {
				if int64(e.code)+int64(j*16) <= end {
					n++
				}
			}
		}
	}
	resvtest.ReportPerEntry(b, n, len(t), "ns/entry")
}

// BenchmarkCostIndexProbe: one binary-search step over a 30k-slot array
// of pointers to entries scattered over the 480 KB table: load the slot,
// then the entry it points at (dependent load), compare. Reported per step.
func BenchmarkCostIndexProbe(b *testing.B) {
	resvtest.BenchIndexProbe(b, rawTable(30000), func(e *rawEntry) *int32 { return &e.code })
}
