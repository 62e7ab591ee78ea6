package main

import (
	"os"
	"runtime/debug"
)

// gcPercent is the Go collector's target for the kpsim process (simulator
// only: no count, digest or decision depends on it). A run allocates
// short-lived simulator objects at every probe, and at the default target
// of 100 the collector took ~9 % of a 20k ablation's CPU profile. Measured
// on `run many --ablation` (2 cores, runs in parallel): user CPU 7.9 s and
// 306 MB RSS at 100, 7.6 s and 513 MB at 200, 7.3 s and 590-690 MB at 400;
// 200 takes most of the gain for less memory. A GOGC set by the user wins.
//
// Memory figures do not depend on it: a run's memory is the bytes of the
// simulator structures it retains (internal/sizer), not the heap.
const gcPercent = 200

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
