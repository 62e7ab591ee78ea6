package bug

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/internal/resvtest"
)

// The cost weights in ops.go come from these micro-benchmarks of the
// modelled access patterns. Run: go test -run '^$' -bench Cost ./bug

// rawBug has the layout of struct bug_entry with DEBUG_BUGVERBOSE: 12 bytes.
type rawBug struct {
	addr int32
	_    int32  // file_disp
	_    uint16 // line
	_    uint16 // flags
}

func rawBugs(n int) []rawBug {
	r := rand.New(rand.NewPCG(1, 2))
	t := make([]rawBug, n)
	for i := range t {
		t[i] = rawBug{addr: int32(r.IntN(1 << 30))}
	}
	return t
}

// BenchmarkCostScanEntry: one find_bug step over an 18k-entry (216 KB)
// table: bug_addr() (relative) and the compare with addr (no hit).
func BenchmarkCostScanEntry(b *testing.B) {
	t := rawBugs(18000)
	want := int64(-1)
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range t {
			if int64(t[j].addr)+int64(j*12) == want {
				n++
			}
		}
	}
	resvtest.ReportPerEntry(b, n, len(t), "ns/entry")
}

// BenchmarkCostIndexProbe: one binary-search step over 18k pointers into
// the bug table, random keys.
func BenchmarkCostIndexProbe(b *testing.B) {
	resvtest.BenchIndexProbe(b, rawBugs(18000), func(e *rawBug) *int32 { return &e.addr })
}
