package staticcall

import (
	"slices"
	"sync"

	"github.com/kpsim/kpsim/image"
)

// The fast scan is a pure function of the core sites, so it is built once
// per image and shared, read-only, by every table whose sites are the same
// (a table whose sites differ, e.g. after a test edits the image, builds
// its own). Simulator work only: no count depends on it.
var sharedFast sync.Map // *image.Kernel -> *fastShare

// fastShare is never mutated after it is stored: safe for concurrent runs.
type fastShare struct {
	sites []site // a copy of the core sites the scan was built from
	fast  *fastScan
}

func (t *Table) sharedFastScan(k *image.Kernel) *fastScan {
	if v, ok := sharedFast.Load(k); ok && slices.Equal(v.(*fastShare).sites, t.core) {
		return v.(*fastShare).fast
	}
	return nil
}

func (t *Table) shareFastScan(k *image.Kernel, f *fastScan) {
	sharedFast.Store(k, &fastShare{sites: slices.Clone(t.core), fast: f})
}
