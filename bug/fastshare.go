package bug

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// The fast scan is a pure function of the bug addresses of the image and
// its modules, so it is built once per image (the image's derived store)
// and shared, read-only, by every table whose addresses are the same (a table over changed entries,
// e.g. after a test edits the image or loads a module, builds its own).
// Simulator work only: no count depends on it.
type fastScanKey struct{}

// fastShare is never mutated after it is stored: safe for concurrent runs.
type fastShare struct {
	addrs [][]uint64 // core, then each module's bug addresses, in order
	fast  *fastScan
}

func bugAddrs(k *image.Kernel) [][]uint64 {
	out := make([][]uint64, 0, 1+len(k.Modules))
	one := func(es []image.BugEntry) {
		a := make([]uint64, len(es))
		for i := range es {
			a[i] = es[i].Addr
		}
		out = append(out, a)
	}
	one(k.BugEntries)
	for _, m := range k.Modules {
		one(m.BugEntries)
	}
	return out
}

// sameAddrs reports whether k's bug addresses are exactly a.
func sameAddrs(k *image.Kernel, a [][]uint64) bool {
	if len(a) != 1+len(k.Modules) {
		return false
	}
	same := func(es []image.BugEntry, a []uint64) bool {
		if len(es) != len(a) {
			return false
		}
		for i := range es {
			if es[i].Addr != a[i] {
				return false
			}
		}
		return true
	}
	if !same(k.BugEntries, a[0]) {
		return false
	}
	for i, m := range k.Modules {
		if !same(m.BugEntries, a[1+i]) {
			return false
		}
	}
	return true
}

// sharedFastScan returns k's fast scan if it was built from exactly k's
// current bug addresses, else a new one.
func sharedFastScan(k *image.Kernel) *fastScan {
	sh := sim.DerivedValue(k.Derived(), fastScanKey{}, func() *fastShare {
		return &fastShare{addrs: bugAddrs(k), fast: newFastScan(k)}
	})
	if !sameAddrs(k, sh.addrs) {
		return newFastScan(k)
	}
	return sh.fast
}
