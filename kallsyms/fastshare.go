package kallsyms

import (
	"sync"

	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// EnableFastScan's simulator data is a pure function of the tables (the
// offset of every record in kallsyms_names, and whether kallsyms_offsets
// is sorted), and every run on an image reads the same tables: it is
// built once per tables and shared, read-only, by every Compressed over
// them. (Tables are never changed once built: machine.KallsymsTables
// caches them per image.) Simulator work only.
var sharedScan sync.Map // *ktab.Tables -> *scanShare

// scanShare is never mutated after it is stored: safe for concurrent runs.
type scanShare struct {
	n      int
	names  int // len(Names): a cheap check that the tables did not change
	offs   []uint32
	sorted bool
}

func (c *Compressed) scanShare() *scanShare {
	if v, ok := sharedScan.Load(c.t); ok {
		if sh := v.(*scanShare); sh.n == c.n && sh.names == len(c.t.Names) {
			return sh
		}
	}
	sh := &scanShare{n: c.n, names: len(c.t.Names), sorted: true}
	if offs, _, err := ktab.BuildOffsets32(c.t.Names, c.t.NumSyms, 1); err == nil {
		sh.offs = offs
	}
	for i := 1; i < c.n; i++ {
		if c.t.SymAddress(i) < c.t.SymAddress(i-1) {
			sh.sorted = false
			break
		}
	}
	sharedScan.Store(c.t, sh)
	return sh
}
