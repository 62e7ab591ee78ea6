package jumplabel

import (
	"bytes"
	"sync"

	"github.com/kpsim/kpsim/image"
)

// The fast scan is a pure function of the core sites (code, init flag and
// the bytes at code), and every run on an image builds the same one: its
// two sizings of every site and its sort were a quarter of a machine's
// boot. It is built once per image and shared, read-only, by every table
// whose sites are the same; a table whose sites differ (a test that edits
// an image between boots) builds its own. Simulator work only: no count
// depends on where the fast scan came from.
var sharedFast sync.Map // *image.Kernel -> *fastShare

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

// sharedFastScan returns the stored fast scan of k if it was built from
// exactly t's core sites.
func (t *Table) sharedFastScan(k *image.Kernel) *fastScan {
	v, ok := sharedFast.Load(k)
	if !ok {
		return nil
	}
	sh := v.(*fastShare)
	if len(sh.sites) != len(t.core) {
		return nil
	}
	for i := range t.core {
		s, key := &t.core[i], &sh.sites[i]
		if s.code != key.code || s.init != key.init || !bytes.Equal(s.text, key.text) {
			return nil
		}
	}
	return sh.fast
}

// shareFastScan stores f, built from t's core sites, for k.
func (t *Table) shareFastScan(k *image.Kernel, f *fastScan) {
	sh := &fastShare{sites: make([]siteKey, len(t.core)), fast: f}
	for i := range t.core {
		s := &t.core[i]
		sh.sites[i] = siteKey{code: s.code, init: s.init, text: bytes.Clone(s.text)}
	}
	sharedFast.Store(k, sh)
}
