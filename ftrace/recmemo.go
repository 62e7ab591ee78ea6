package ftrace

// recMemo remembers recent lookup_rec answers for a single address
// (ftrace_location's first question, asked for every instruction a
// registration walks, and again by the next walk over the same function).
// The answer and its counts (groups visited, bsearch comparisons) depend
// only on the records' addresses, which change only through reindex (the
// version): an entry of another version is stale. Simulator work only:
// a hit adds exactly the counts the walk would (TestRecMemoMatchesWalk).
type recMemo struct {
	valid          bool
	ver, ip        uint64
	rec            *Record
	groups, probes uint64
}

const recMemoSize = 512 // a power of two

// memoSlot returns ip's memo entry (nil without a memo).
func (ft *Ftrace) memoSlot(ip uint64) *recMemo {
	if ft.memo == nil {
		return nil
	}
	return &ft.memo[(ip^ip>>9)&(recMemoSize-1)]
}
