package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the Go collector's target for the kpsim process (simulator
// only: no count, digest or decision depends on it). A run allocates
// short-lived simulator objects at every probe; at the default target of
// 100 the collector took ~9 % of a 20k ablation's CPU profile; at 400 the
// `run many --ablation` process used ~7 % less CPU time (user 15.3-15.8 s
// against 14.2-14.8 s, measured interleaved). A GOGC set by the user wins.
//
// Memory figures do not depend on it: a run's memory is the bytes of the
// simulator structures it retains (scenarios/retained.go), not the heap.
const gcPercent = 400

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
