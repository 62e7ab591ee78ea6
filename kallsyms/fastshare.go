package kallsyms

import (
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// EnableFastScan's simulator data is a pure function of the tables (the
// offset of every record in kallsyms_names, and whether kallsyms_offsets
// is sorted), and every run on an image reads the same tables: it is
// built once per tables and shared, read-only, by every Compressed over
// them, in the tables' Derived store. (Tables are never changed once
// built: machine.KallsymsTables keeps them per image.) Simulator work only.
//
// A scanShare is never mutated after it is stored: safe for concurrent runs.
type scanShare struct {
	n      int
	names  int // len(Names): a cheap check that the tables did not change
	offs   []uint32
	sorted bool
}

// scanShareKey is the scan share's key in the tables' Derived store.
type scanShareKey struct{}

func (c *Compressed) scanShare() *scanShare {
	sh := sim.DerivedValue(c.t.Derived(), scanShareKey{}, func() *scanShare { return buildScanShare(c.t) })
	if sh.n != c.n || sh.names != len(c.t.Names) {
		// The tables changed after the share was built: one of their own.
		return buildScanShare(c.t)
	}
	return sh
}

func buildScanShare(t *ktab.Tables) *scanShare {
	sh := &scanShare{n: t.NumSyms, names: len(t.Names), sorted: true}
	if offs, _, err := ktab.BuildOffsets32(t.Names, t.NumSyms, 1); err == nil {
		sh.offs = offs
	}
	for i := 1; i < t.NumSyms; i++ {
		if t.SymAddress(i) < t.SymAddress(i-1) {
			sh.sorted = false
			break
		}
	}
	return sh
}
