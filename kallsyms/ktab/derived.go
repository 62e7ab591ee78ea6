package ktab

import (
	"sync"

	"github.com/kpsim/kpsim/sim"
)

// derivedMu guards every Tables' derived and derivedOf (taken once per
// resolver set-up, never on a lookup path).
var derivedMu sync.Mutex

// Derived returns the store of the simulator's data derived from these
// tables (the fast scan's record offsets), built once and shared
// read-only by every resolver over them; it goes when the tables go. It
// is not part of the tables: no lookup model reads it. A copy of the
// Tables struct starts with an empty store.
func (t *Tables) Derived() *sim.Derived {
	derivedMu.Lock()
	defer derivedMu.Unlock()
	if t.derived == nil || t.derivedOf != t {
		t.derived, t.derivedOf = &sim.Derived{}, t
	}
	return t.derived
}
