package staticcall

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/internal/resvtest"
)

// The cost weights in ops.go come from these micro-benchmarks of the
// modelled access patterns. Run: go test -run '^$' -bench Cost ./staticcall

// rawSite has the layout of struct static_call_site: 8 bytes.
type rawSite struct {
	addr int32
	key  int32
}

func rawSites(n int) []rawSite {
	r := rand.New(rand.NewPCG(1, 2))
	t := make([]rawSite, n)
	for i := range t {
		t[i] = rawSite{addr: int32(r.IntN(1 << 30)), key: int32(r.IntN(1<<20)) << 4}
		if r.IntN(20) == 0 {
			t[i].key |= 2
		}
	}
	return t
}

// BenchmarkCostScanSite: one __static_call_text_reserved step over a
// 6k-site (48 KB) table: init-bit test, relative address, the two
// addr_conflict compares (no hit). Reported per site.
func BenchmarkCostScanSite(b *testing.B) {
	t := rawSites(6000)
	start, end := int64(-10), int64(-5)
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range t {
			s := &t[j]
			if s.key&2 == 0 {
				a := int64(s.addr) + int64(j*8)
				if a <= end && a+5 > start {
					n++
				}
			}
		}
	}
	resvtest.ReportPerEntry(b, n, len(t), "ns/site")
}

// BenchmarkCostIndexProbe: one binary-search step over 6k pointers into
// the site table, random keys. Reported per step.
func BenchmarkCostIndexProbe(b *testing.B) {
	resvtest.BenchIndexProbe(b, rawSites(6000), func(e *rawSite) *int32 { return &e.addr })
}
