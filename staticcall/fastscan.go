package staticcall

import (
	"sort"

	"github.com/kpsim/kpsim/sim"
)

// fastScan answers the linear core scan without walking it, with exactly
// the walk's counts: with no conflict the walk visits all S sites, and
// whether there is one is a search of the sites sorted by address. With a
// conflict the real walk runs (it stops at the first in table order).
// Simulator work only; TestFastScanCountsMatchWalk proves it.
type fastScan struct {
	addrs [2][]uint64 // counted sites' addresses, sorted: [0] init skipped, [1] init counted
}

// EnableFastScan turns on the fast path. The caller promises the tables no
// longer change.
func (t *Table) EnableFastScan() {
	if t.k != nil {
		if f := t.sharedFastScan(t.k); f != nil {
			t.fast = f
			return
		}
	}
	f := &fastScan{}
	for _, s := range t.core {
		if !s.init {
			f.addrs[0] = append(f.addrs[0], s.addr)
		}
		f.addrs[1] = append(f.addrs[1], s.addr)
	}
	for i := range f.addrs {
		sort.Slice(f.addrs[i], func(a, b int) bool { return f.addrs[i][a] < f.addrs[i][b] })
	}
	t.fast = f
	if t.k != nil {
		t.shareFastScan(t.k, f)
	}
}

func (f *fastScan) scan(c *sim.Counters, n int, start, end uint64, init bool) bool {
	a := f.addrs[0]
	if init {
		a = f.addrs[1]
	}
	lo := uint64(0)
	if start >= CallInsnSize-1 {
		lo = start - (CallInsnSize - 1)
	}
	i := sort.Search(len(a), func(i int) bool { return a[i] >= lo })
	if i < len(a) && a[i] <= end {
		return false // a conflict: walk
	}
	c.Add(OpScanSite, uint64(n))
	return true
}
