package scenarios

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/kpsim/kpsim/sim"
)

// Clock converts estimated cycles to estimated kernel time: the clock the
// weights were measured or converted at (or the user's --ghz), and where
// that figure comes from. Every report that prints a kernel time gets it
// from here, so every command converts the same way.
type Clock struct {
	GHz    float64 `json:"ghz"`
	Source string  `json:"source"`
}

// ReferenceGHz is the clock the registered (documented) weights were
// converted at: Go micro-benchmarks on the reference machine, an AMD EPYC
// whose /proc/cpuinfo gives 2.6 GHz, as ns x 2.6 = cycles (jumplabel/ops.go,
// staticcall/ops.go, ftrace/weights.go, docs/cost-model.md).
const ReferenceGHz = 2.6

// referenceSource says where ReferenceGHz comes from.
const referenceSource = "the registered weights' reference machine (AMD EPYC, 2.6 GHz nominal per /proc/cpuinfo; its Go micro-benchmarks are converted as ns x 2.6 = cycles: docs/cost-model.md)"

// clockMHz finds the MHz a cost file's "clock" header says its times were
// converted at ("... ns x 2600 MHz (cpu MHz in /proc/cpuinfo; ..."), with
// the parenthesised source of that figure when there is one.
var clockMHz = regexp.MustCompile(`x ([0-9]+(?:\.[0-9]+)?) MHz(?: \(([^;)]+))?`)

// ClockFor is the clock of a cost table: ghz when it is above zero (the
// user's --ghz), else the MHz the table's calibration header says its
// measured times were converted at (kpsim calibrate writes it: the
// nominal "@ X GHz" of the CPU's model name, else "cpu MHz" in
// /proc/cpuinfo, else the TSC rate), else the registered weights'
// reference clock. A table with no header (the documented regime, a
// hand-written file) gets the reference clock.
func ClockFor(costs *sim.CostTable, ghz float64) Clock {
	if ghz > 0 {
		return Clock{GHz: ghz, Source: "--ghz"}
	}
	if costs != nil && costs.Meta.Clock != "" {
		if m := clockMHz.FindStringSubmatch(costs.Meta.Clock); m != nil {
			if mhz, err := strconv.ParseFloat(m[1], 64); err == nil && mhz > 0 && !math.IsInf(mhz, 0) {
				how := ""
				if m[2] != "" {
					how = ", " + m[2]
				}
				cpu := costs.Meta.CPU
				if cpu == "" {
					cpu = "an unnamed CPU"
				}
				return Clock{GHz: mhz / 1000, Source: fmt.Sprintf("the clock %s's measured times were converted at (its clock header: ns x %s MHz%s), on %s", costs.Name, m[1], how, cpu)}
			}
		}
	}
	return Clock{GHz: ReferenceGHz, Source: referenceSource}
}

// Valid says whether c can convert (a zero Clock, as a report decoded
// from an older JSON has, cannot).
func (c Clock) Valid() bool { return c.GHz > 0 && !math.IsInf(c.GHz, 0) }

// Or is c, or the reference clock when c is not valid.
func (c Clock) Or() Clock {
	if c.Valid() {
		return c
	}
	return Clock{GHz: ReferenceGHz, Source: referenceSource}
}

// NS is the estimated kernel time of cycles, in nanoseconds.
func (c Clock) NS(cycles float64) float64 { return cycles / c.Or().GHz }

// MS is the estimated kernel time of cycles, in milliseconds.
func (c Clock) MS(cycles float64) float64 { return c.NS(cycles) / 1e6 }

// Line is the one-line statement of the clock for report headers.
func (c Clock) Line() string {
	c = c.Or()
	return fmt.Sprintf("est. kernel time = estimated cycles / %s GHz: %s", strconv.FormatFloat(c.GHz, 'g', -1, 64), c.Source)
}
