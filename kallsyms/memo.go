package kallsyms

import "github.com/kpsim/kpsim/sim"

// The simulator's memos over the compressed tables (EnableFastScan):
// answers whose counts depend only on the question and the immutable
// tables, replayed exactly (sim.Memo). The model functions (symbolSpan,
// compare) stay the kernel's walks; these wrap them.

// newSymPosMemo remembers the last get_symbol_pos search whose symbol has
// a higher neighbour: the registration checks ask it for every
// instruction of a function in turn. With the addresses sorted, every
// address in [start, end) (start the symbol's address, end the next
// higher one) compares the same way with every kallsyms_offsets entry
// (none lies strictly between), so the bisection takes the same path and
// the alias walks the same steps: the same position, start and end, and
// the same counts. TestSymPosMemoMatchesWalk proves it.
func newSymPosMemo() *sim.Memo[uint64, symSpan] {
	return sim.NewSpanMemo(symSpan.covers)
}

// covers reports whether addr lies in [start, end) (none when end is 0:
// the fallback end depends on addr itself).
func (sp symSpan) covers(addr uint64) bool {
	return sp.end != 0 && addr >= sp.start && addr < sp.end
}

// findSymbolSpan is symbolSpan, from the memo when there is one. The hit
// is checked here (Held, covers), so it costs no call.
func (c *Compressed) findSymbolSpan(addr uint64, tl *tally) symSpan {
	if c.posMemo == nil {
		return c.symbolSpan(addr, tl)
	}
	sp, t, ok := c.posMemo.Held(0, 0)
	if !ok || !sp.covers(addr) {
		sp, t = c.posMemo.GetAt(0, 0, addr, func(t *sim.Tally) symSpan {
			var w tally
			sp := c.symbolSpan(addr, &w)
			w.toTally(t)
			return sp
		})
	}
	tl.addTally(t)
	return *sp
}

// nameKey is one node of kallsyms_lookup_names' bisection (root 1,
// children 2h and 2h+1) and the name-order position it compares.
type nameKey struct{ node, j int }

// nameMemoSize: the memo covers the top 11 levels of the bisection.
const nameMemoSize = 1 << 11

// newNameMemo remembers the names at the top levels of the name
// bisection and the counts of fetching them (get_symbol_seq,
// get_symbol_offset, kallsyms_expand_symbol). Every lookup's bisection
// visits the same nodes at the top (the node is a function of the path,
// the path of the comparisons), and fetching the name at a position reads
// only immutable tables, so a node's name and fetch counts never change.
// The comparison itself (strcmp, its chrCmp) always runs. Variants whose
// fetch is not a pure table read (the dynamic offset table, the token
// comparison) are not memoized. TestNameMemoMatchesWalk proves it.
func newNameMemo() *sim.Memo[nameKey, string] {
	return sim.NewMemo[nameKey, string](nameMemoSize, func(k nameKey) uint64 { return uint64(k.node) })
}

// compareAt is compare(j) at bisection node node, the name fetched from
// the memo for the top nodes when there is one (and no Stats, which
// want every comparison's own figures).
func (c *Compressed) compareAt(node, j int, name string, tl *tally) int {
	if c.nameMemo == nil || node >= nameMemoSize || c.Stats != nil {
		return c.compare(j, name, tl, false)
	}
	k := nameKey{node, j}
	s, t, ok := c.nameMemo.Find(uint64(node), 0, k)
	if !ok {
		s, t = c.nameMemo.GetAt(uint64(node), 0, k, func(t *sim.Tally) string {
			var w tally
			s := c.fetchName(j, &w)
			w.toTally(t)
			return s
		})
	}
	tl.addTally(t)
	tl.cmp++
	return strcmpCountString(name, *s, tl)
}
