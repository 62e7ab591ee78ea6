package ftrace

import "github.com/kpsim/kpsim/sim"

// newRecMemo remembers recent lookup_rec answers for a single address
// (ftrace_location's first question, asked for every instruction a
// registration walks, and again by the next walk over the same function).
// The answer and its counts (groups visited, bsearch comparisons) depend
// only on the records' addresses, which change only through reindex (the
// version). Simulator work only: a hit adds exactly the counts the walk
// would (TestRecMemoMatchesWalk).
func newRecMemo() *sim.Memo[uint64, *Record] {
	return sim.NewMemo[uint64, *Record](512, func(ip uint64) uint64 { return ip ^ ip>>9 })
}

// findRec is lookupRec, answered from the memo for a single address when
// the Ftrace has one.
func (ft *Ftrace) findRec(c *sim.Counters, start, end uint64) *Record {
	if ft.recMemo == nil || start != end {
		return ft.lookupRec(c, start, end)
	}
	return ft.recMemo.Do(c, ft.ver, start, func(t *sim.Tally) *Record { return ft.lookupRec(t, start, start) })
}
