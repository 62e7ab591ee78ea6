package bug

import "fmt"

// CheckIndex: with the late-init index built, find_bug's core lookup
// answers at every bug address and its neighbours exactly as the linear
// walk of __start___bug_table does (the first entry at that address, or
// none). Uncounted, simulator-side.
func (t *Table) CheckIndex() error {
	ix := t.idx.Built()
	if ix == nil {
		return nil
	}
	es := t.k.BugEntries
	if ix.Len() != len(es) {
		return fmt.Errorf("bug: index holds %d entries, the core table %d", ix.Len(), len(es))
	}
	first := make(map[uint64]int, len(es)) // what the linear walk stops at
	for j := len(es) - 1; j >= 0; j-- {
		first[es[j].Addr] = j
	}
	for i := range es {
		for d := int64(-1); d <= 1; d++ {
			a := uint64(int64(es[i].Addr) + d)
			x := t.findBugIndexed(nil, a)
			j, ok := first[a]
			if (x == nil) == ok || (x != nil && x != &es[j]) {
				return fmt.Errorf("bug: at %#x the index answers %v, the linear walk %v (entry %d)", a, x, ok, j)
			}
		}
	}
	return nil
}
