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
	l.scan = &fastScanner{f: newFastScan(l.entries), walk: listWalk{l}}
}

// fastScanner is the listScanner EnableFastScan chooses: a walk that
// finds nothing is counted, not walked.
type fastScanner struct {
	f    *fastScan
	walk listWalk
}

func (s *fastScanner) walkList(c *sim.Counters, addr uint64) bool {
	if s.f.miss(c, addr) {
		return false
	}
	return s.walk.walkList(c, addr)
}

// newFastScan merges the list's entries into sorted, disjoint ranges.
func newFastScan(entries []Entry) *fastScan {
	rs := append([]Entry(nil), entries...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	f := &fastScan{n: uint64(len(entries))}
	for _, e := range mergeRanges(rs) {
		f.start = append(f.start, e.Start)
		f.end = append(f.end, e.End)
	}
	return f
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
