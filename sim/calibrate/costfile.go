package calibrate

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kpsim/kpsim/sim"
)

// FormatVersion is the "#: format:" header of the cost files written here.
const FormatVersion = "kpsim-costs 1"

// Kind says how an op's weight is obtained.
type Kind int

// The kinds of op.
const (
	Uncovered  Kind = iota // registered, but neither measured nor documented here
	Measured               // a benchmark times it
	Documented             // user space cannot reach it: the registered value stays
	Metric                 // not an operation: never priced
)

func (k Kind) String() string {
	return [...]string{"uncovered", "measured", "documented", "metric"}[k]
}

// Classify says how op's weight is calibrated, and by which benchmark (or
// why not).
func Classify(o sim.OpInfo) (Kind, string) {
	switch {
	case o.Metric:
		return Metric, ""
	case measured[o.Name].Bench != "":
		return Measured, measured[o.Name].Bench
	case documented[o.Name] != "":
		return Documented, documented[o.Name]
	}
	return Uncovered, ""
}

// UncoveredOps lists the registered ops this package has no rule for.
func UncoveredOps() []string {
	var out []string
	for _, o := range sim.Ops() {
		if k, _ := Classify(o); k == Uncovered {
			out = append(out, o.Name)
		}
	}
	return out
}

func fmtW(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// WriteCostFile writes res's regime as a cost file: the header, then one
// line per registered op (metrics as comments). Measured ops carry the
// benchmark's median; documented and uncovered ops their registered value,
// marked so.
func WriteCostFile(w io.Writer, res *Result, regime string) error {
	ms, ok := res.Measures[regime]
	if !ok {
		return fmt.Errorf("calibrate: no %s measurements", regime)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# kpsim cost file: cycles per counted op, for kpsim run --costs FILE.\n")
	fmt.Fprintf(bw, "# Written by kpsim calibrate. Lines are \"OP CYCLES\"; '#' starts a comment;\n")
	fmt.Fprintf(bw, "# \"#: key: value\" lines are the header. Measured weights are the median over\n")
	fmt.Fprintf(bw, "# repetitions of the named C benchmark (sim/calibrate/csrc); documented ones\n")
	fmt.Fprintf(bw, "# keep the value kpsim registers, because user space cannot time that work.\n")
	if res.Quick {
		fmt.Fprintf(bw, "# QUICK RUN: tiny sizes and 3 repetitions, a smoke test, not weights to use.\n")
	}
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaFormat, FormatVersion)
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaCPU, oneLine(res.CPU))
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaCompiler, oneLine(res.Compiler))
	fmt.Fprintf(bw, "#: cflags: %s\n", res.CFlags)
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaDate, res.Date.Format(time.RFC3339))
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaRegime, regime)
	var clock string
	switch res.Clock {
	case "perf_event_cycles":
		clock = fmt.Sprintf("perf_event_open cycles (user); Go-timed ops: ns x %.0f MHz (%s)", res.MHz, res.MHzSource)
	case "thread_cputime":
		clock = fmt.Sprintf("no perf_event cycle counter: CLOCK_THREAD_CPUTIME_ID ns x %.0f MHz (%s; TSC measured %.1f MHz against CLOCK_MONOTONIC); single calls: rdtsc scaled the same way; Go-timed ops: thread CPU ns x %.0f MHz", res.MHz, res.MHzSource, res.TSCMHz, res.MHz)
	default:
		clock = fmt.Sprintf("%s x %.0f MHz (%s)", res.Clock, res.MHz, res.MHzSource)
	}
	clock += fmt.Sprintf("; repetitions preempted (wall > 1.02 x CPU time) and re-run, at most 3 times each: %d", res.Preempted)
	fmt.Fprintf(bw, "#: %s: %s\n", sim.MetaClock, clock)
	fmt.Fprintf(bw, "#: l2: %d\n", res.L2)
	if res.Kallsyms != "" {
		fmt.Fprintf(bw, "#: kallsyms: %s\n", oneLine(res.Kallsyms))
	}
	fmt.Fprintf(bw, "#: %s: %v\n", MetaQuick, res.Quick)
	if res.Command != "" {
		fmt.Fprintf(bw, "#: command: %s\n", oneLine(res.Command))
	}
	// Every benchmark's median, so ops registered later and mapped to one
	// of these benchmarks get a calibrated weight from this file too.
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		m := ms[name]
		fmt.Fprintf(bw, "#: %s%s: %s cycles/%s (median of %d, %s-%s; %s)\n", BenchKey, name, fmtW(m.Median), m.Unit, m.Samples, fmtW(m.Min), fmtW(m.Max), oneLine(m.Params))
	}
	for _, o := range sim.Ops() {
		kind, what := Classify(o)
		switch kind {
		case Metric:
			fmt.Fprintf(bw, "# %s: metric, never priced\n", o.Name)
		case Measured:
			m, ok := ms[what]
			if !ok {
				return fmt.Errorf("calibrate: op %s: benchmark %s produced no %s result", o.Name, what, regime)
			}
			why := ""
			if b := measured[o.Name].Why; b != "" {
				why = "; " + b
			}
			fmt.Fprintf(bw, "%s %s # measured: %s (%s), median of %d, %s-%s cycles/%s; %s%s\n",
				o.Name, fmtW(m.Median), m.Bench, regime, m.Samples, fmtW(m.Min), fmtW(m.Max), m.Unit, oneLine(m.Params), why)
		case Documented:
			fmt.Fprintf(bw, "%s %s # documented: not measurable from user space (%s); %s\n", o.Name, fmtW(o.Cycles), what, oneLine(o.Rationale))
		default:
			fmt.Fprintf(bw, "%s %s # uncovered: no calibration benchmark names this op, registered value kept; %s\n", o.Name, fmtW(o.Cycles), oneLine(o.Rationale))
		}
	}
	return bw.Flush()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "#", "no.")), " ")
}

// BenchKey prefixes the header lines that carry one benchmark's median.
const BenchKey = "bench."

// FillFromBenches gives every measured op that t's file has no line for
// (an op registered after the file was written) the median of its
// benchmark, when the file's header carries it; it returns the ops so
// filled.
func FillFromBenches(t *sim.CostTable) []string {
	var filled []string
	for i, o := range sim.Ops() {
		op := sim.OpAt(i)
		kind, bench := Classify(o)
		if kind != Measured || strings.HasPrefix(t.Source(op), t.Name+":") {
			continue // not measured, or the file has its own line
		}
		v, ok := t.Meta.Extra[BenchKey+bench]
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		w, err := strconv.ParseFloat(f[0], 64)
		if err != nil || w < 0 || w != w || w > 1e12 {
			continue
		}
		t.Set(op, w, t.Name+" header "+BenchKey+bench, "measured: "+bench+" ("+t.Meta.Regime+"), from the file's benchmark line")
		filled = append(filled, o.Name)
	}
	return filled
}

// MetaQuick is the header key WriteCostFile records a --quick calibration
// under ("#: quick: true").
const MetaQuick = "quick"

// FileWeights counts the weights t's file set: its "OP CYCLES" lines and
// the measured ops FillFromBenches filled from its benchmark header. A
// cost file that sets none (empty, or comments only) is no cost file.
func FileWeights(t *sim.CostTable) int {
	n := 0
	for i := range sim.Ops() {
		src := t.Source(sim.OpAt(i))
		if strings.HasPrefix(src, t.Name+":") || strings.HasPrefix(src, t.Name+" header ") {
			n++
		}
	}
	return n
}

// QuickWarning returns a warning naming t's file when it was written by
// a --quick calibration (its header says "#: quick: true"), or "".
func QuickWarning(t *sim.CostTable) string {
	if t.Meta.Extra[MetaQuick] != "true" {
		return ""
	}
	return fmt.Sprintf("warning: cost file %s is a --quick calibration (tiny sizes, 3 repetitions): its weights are noisy, a smoke test's; run kpsim calibrate without --quick for weights to use", t.Name)
}
