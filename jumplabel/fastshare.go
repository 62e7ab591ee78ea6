package jumplabel

import (
	"bytes"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// The fast scan is a pure function of the core sites (code, init flag and
// the bytes at code), and every run on an image builds the same one: its
// two sizings of every site and its sort were a quarter of a machine's
// boot. It is built once per image (the image's derived store) and shared,
// read-only, by every table whose sites are the same; a table whose sites
// differ (a test that edits an image between boots) builds its own.
// Simulator work only: no count depends on where the fast scan came from.
type fastScanKey struct{}

// fastShare is one image's fast scan and the sites it was built from.
// Never mutated after it is stored: safe for concurrent runs.
type fastShare struct {
	sites []siteKey
	fast  *fastScan
}

type siteKey struct {
	code uint64
	init bool
	text []byte // a copy
}

// sharedFastScan returns the image's fast scan if it was built from
// exactly t's core sites, else one of t's own.
func (t *Table) sharedFastScan() *fastScan {
	sh := sim.DerivedValue(t.k.Derived(), fastScanKey{}, func() *fastShare { return newFastShare(t.core, t.insn) })
	if !sh.builtFrom(t.core) {
		return newFastScan(t.core, t.insn)
	}
	return sh.fast
}

func newFastShare(core []site, d *x86.Decoder) *fastShare {
	sh := &fastShare{sites: make([]siteKey, len(core)), fast: newFastScan(core, d)}
	for i := range core {
		s := &core[i]
		sh.sites[i] = siteKey{code: s.code, init: s.init, text: bytes.Clone(s.text)}
	}
	return sh
}

// builtFrom reports whether sh was built from exactly these sites.
func (sh *fastShare) builtFrom(core []site) bool {
	if len(sh.sites) != len(core) {
		return false
	}
	for i := range core {
		s, key := &core[i], &sh.sites[i]
		if s.code != key.code || s.init != key.init || !bytes.Equal(s.text, key.text) {
			return false
		}
	}
	return true
}
