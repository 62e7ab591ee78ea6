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
	t.scan = &fastScanner{f: t.sharedFastScan(), walk: coreWalk{t}, n: len(t.core)}
}

// fastScanner is the coreScanner EnableFastScan chooses: the fast scan's
// answer when it has one, else the walk.
type fastScanner struct {
	f    *fastScan
	walk coreWalk
	n    int
}

func (s *fastScanner) scanCore(c *sim.Counters, start, end uint64, init bool) bool {
	if s.f.scan(c, s.n, start, end, init) {
		return false
	}
	return s.walk.scanCore(c, start, end, init)
}

// newFastScan builds the fast scan of core sites.
func newFastScan(core []site) *fastScan {
	f := &fastScan{}
	for _, s := range core {
		if !s.init {
			f.addrs[0] = append(f.addrs[0], s.addr)
		}
		f.addrs[1] = append(f.addrs[1], s.addr)
	}
	for i := range f.addrs {
		sort.Slice(f.addrs[i], func(a, b int) bool { return f.addrs[i][a] < f.addrs[i][b] })
	}
	return f
}

// scan answers the core linear scan if it can; false means: walk.
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
