package ktab

import "github.com/kpsim/kpsim/sim"

// Derived returns the store of the simulator's data derived from these
// tables (the fast scan's record offsets), built once and shared
// read-only by every resolver over them; it goes when the tables go. It
// is not part of the tables: no lookup model reads it. A copy of the
// Tables struct starts with an empty store.
func (t *Tables) Derived() *sim.Derived { return t.derived.For(t) }
