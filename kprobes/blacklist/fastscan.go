package blacklist

import (
	"sort"

	"github.com/kpsim/kpsim/sim"
)

// fastScan answers the linear list walk for an address no entry contains
// (every probe address but a refused one) with exactly the walk's count:
// all K nodes. Containment is a search of the entries merged into sorted,
// disjoint ranges; a contained address takes the real walk (which stops at
// the first hit in list order). Simulator work only;
// TestFastScanCountsMatchWalk proves it. AddModule and RemoveModule drop
// the fast path, since they change the list.
type fastScan struct {
	start, end []uint64 // merged ranges, sorted
	n          uint64   // nodes on the list
}

// EnableFastScan turns on the fast path for the current list.
func (l *List) EnableFastScan() {
	rs := append([]Entry(nil), l.entries...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	f := &fastScan{n: uint64(len(l.entries))}
	for _, e := range rs {
		if e.End <= e.Start {
			continue // empty: contains nothing
		}
		if k := len(f.start); k > 0 && e.Start <= f.end[k-1] {
			f.end[k-1] = max(f.end[k-1], e.End)
			continue
		}
		f.start = append(f.start, e.Start)
		f.end = append(f.end, e.End)
	}
	l.fast = f
}

// miss reports (and counts) a whole walk that finds nothing.
func (f *fastScan) miss(c *sim.Counters, addr uint64) bool {
	i := sort.Search(len(f.start), func(i int) bool { return f.start[i] > addr }) - 1
	if i >= 0 && addr < f.end[i] {
		return false
	}
	c.Add(OpWalkEntry, f.n)
	return true
}
