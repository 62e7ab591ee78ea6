// Package simpath chooses between the simulator's fast paths and the
// straightforward walks they shortcut.
//
// kpsim counts what the kernel does: a get_kprobe miss walks the whole
// hash chain, __get_insn_slot walks the slot pages from the head, and those
// walks are counted node by node. Walking them in the simulator too makes
// kpsim's own time grow like the kernel's counts (superlinearly in the
// number of probes), so the model packages answer such walks from
// simulator-side indexes and add the count the walk would have made. The
// straightforward walk stays in the code: tests turn it on here, run the
// same scenario both ways and require identical counts, decisions and
// reasons. Users cannot reach it (internal), and nothing but tests sets it.
//
// The switch is read when a model object is built (a registry, a slot
// cache, a machine), so objects built before a change keep their mode.
package simpath

import "sync/atomic"

var walk atomic.Bool

// Walk reports whether model objects built now use the straightforward
// walks instead of the fast paths.
func Walk() bool { return walk.Load() }

// SetWalk selects the straightforward walks (on) or the fast paths (off,
// the default) for objects built from now on, and returns a function that
// restores the previous choice (for a test's defer or t.Cleanup). Tests
// that call it must not run in parallel with tests that build models.
func SetWalk(on bool) (restore func()) {
	prev := walk.Swap(on)
	return func() { walk.Store(prev) }
}
