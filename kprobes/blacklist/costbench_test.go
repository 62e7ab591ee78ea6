package blacklist

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/internal/fixture"
)

// The cost weights in ops.go come from these micro-benchmarks of the
// modelled access patterns. Run: go test -run '^$' -bench Cost ./kprobes/blacklist

// rawEntry has the layout of 6.1.192's struct kprobe_blacklist_entry (48 bytes).
type rawEntry struct {
	next, prev *rawEntry
	start, end uint64
	_          [2]uintptr // struct rcu_head
}

var sink int

// BenchmarkCostWalkEntry: one node of the kprobe_blacklist walk over
// 1100 nodes allocated one after another (as kmalloc-64 hands them out at
// boot), chased through next, two compares (no hit). Reported per node.
func BenchmarkCostWalkEntry(b *testing.B) {
	const n = 1100
	head := &rawEntry{}
	p := head
	for i := 0; i < n; i++ {
		e := &rawEntry{start: uint64(i) * 256, end: uint64(i)*256 + 100}
		p.next, e.prev = e, p
		p = e
	}
	addr := uint64(1 << 40)
	hits := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for e := head.next; e != nil; e = e.next {
			if addr >= e.start && addr < e.end {
				hits++
			}
		}
	}
	sink = hits
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
}

// BenchmarkCostKallsymsAddrStep: one get_symbol_pos binary-search step over
// 200k 4-byte kallsyms_offsets, random addresses. Reported per step.
func BenchmarkCostKallsymsAddrStep(b *testing.B) {
	const n = 200000
	offs := make([]uint32, n)
	for i := range offs {
		offs[i] = uint32(i) * 128
	}
	r := rand.New(rand.NewPCG(5, 6))
	qs := make([]uint32, 4096)
	for i := range qs {
		qs[i] = uint32(r.IntN(n * 128))
	}
	steps := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := qs[i&4095]
		low, high := 0, n
		for high-low > 1 {
			steps++
			mid := low + (high-low)/2
			if offs[mid] <= a {
				low = mid
			} else {
				high = mid
			}
		}
		sink += low
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
}

// BenchmarkCostKallsymsNameStep: one kallsyms_lookup_names probe: expand a
// token-compressed name (kallsyms_expand_symbol: ~10 token-table lookups
// into a 256-token table) and strcmp it with the wanted name, over 200k
// compressed names, random order. Reported per probe.
func BenchmarkCostKallsymsNameStep(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 200000
	tokens, blob, offs := fixture.CompressedNames(r, n, 8)
	qs := make([]int, 4096)
	for i := range qs {
		qs[i] = offs[r.IntN(n)]
	}
	want := []byte("do_some_kernel_function")
	buf := make([]byte, 0, 128)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := qs[i&4095]
		c := blob[o+1 : o+1+int(blob[o])]
		buf = buf[:0]
		for _, t := range c {
			buf = append(buf, tokens[t]...)
		}
		sink += bytes.Compare(want, buf)
	}
}
