package staticcall

import (
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// The fast scan is a pure function of the core sites, so it is built once
// per image (the image's derived store) and shared, read-only, by every
// table whose sites are the same (a table whose sites differ, e.g. after a
// test edits the image, builds its own). Simulator work only: no count
// depends on it.
type fastScanKey struct{}

// fastShare is never mutated after it is stored: safe for concurrent runs.
type fastShare struct {
	sites []site // a copy of the core sites the scan was built from
	fast  *fastScan
}

// sharedFastScan returns the image's fast scan if it was built from
// exactly t's core sites, else one of t's own.
func (t *Table) sharedFastScan() *fastScan {
	sh := sim.DerivedValue(t.k.Derived(), fastScanKey{}, func() *fastShare {
		return &fastShare{sites: slices.Clone(t.core), fast: newFastScan(t.core)}
	})
	if !slices.Equal(sh.sites, t.core) {
		return newFastScan(t.core)
	}
	return sh.fast
}
