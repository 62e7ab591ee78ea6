package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchunit"
)

// Bench units: every count is exact (benchstat's assume=exact: no
// confidence interval, any difference is real), and so are the cycles and
// the estimated kernel time derived from them (est-kernel-ns/op, which
// benchstat tidies to est-kernel-sec/op); kpsim's own run time is not,
// and its unit, sim-sec/op, is never the sec/op (ns/op) of a kernel
// figure.
var benchExactUnits = []string{"ops/op", "est-cycles/op", "task-est-cycles/op", "est-kernel-ns/op", "task-est-kernel-ns/op", "registered/op", "optimized/op", "rejected/op", "not-attempted/op", "kernel-B/op"}

// BenchWriter writes reports in the Go benchmark format
// (golang.org/x/perf/benchfmt), so benchstat compares switch sets
// (-col /patches) in one file and two builds across files.
type BenchWriter struct {
	raw  io.Writer
	w    *benchfmt.Writer
	meta bool
}

// NewBenchWriter returns a writer on w.
func NewBenchWriter(w io.Writer) *BenchWriter { return &BenchWriter{raw: w, w: benchfmt.NewWriter(w)} }

// Bench writes the report as benchmark results.
func Bench(w io.Writer, r *scenarios.ManyReport) error {
	return NewBenchWriter(w).Write(r, false)
}

// Write writes one result per run and phase (every phase any run of the
// report counted in, in PhaseNames order, then phase=total with the run's
// outcomes; a phase no run touched would only add zeros benchstat cannot
// take a geomean of), named
// Many/patches=RUN/phase=PHASE (Many/n=N/patches=... when withN, for
// sweeps), with the report's parameters and meta as configuration keys.
func (b *BenchWriter) Write(r *scenarios.ManyReport, withN bool) error {
	if !b.meta {
		b.meta = true
		// What identifies the build goes in lines benchstat ignores (not
		// "key: value" configuration), so that "benchstat old.txt
		// new.txt" pairs two builds' results instead of tabling them
		// apart; the inputs (kernel, costs, faults, n, ...) are keys.
		if m := r.Meta; m != nil {
			fmt.Fprintf(b.raw, "# kpsim build: %s\n# modelled text sha256: %s (the kernel text as this build models it)\n", m.Kpsim, m.Kernel.TextSHA256)
		}
		for _, u := range benchExactUnits {
			_, tidy := benchunit.Tidy(1, u)
			if err := b.w.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: tidy, Key: "assume"}, OrigUnit: u, Value: "exact"}); err != nil {
				return err
			}
		}
	}
	cfg := benchConfig(r, !withN)
	clk := clockOf(r.Meta)
	ns := func(cyc float64) float64 { return math.Round(clk.NS(cyc)) }
	base := strings.ToUpper(r.Scenario[:1]) + r.Scenario[1:]
	for _, run := range r.Runs {
		name := fmt.Sprintf("%s/patches=%s", base, benchName(run.Name))
		if withN {
			name = fmt.Sprintf("%s/n=%d/patches=%s", base, r.N, benchName(run.Name))
		}
		for _, ph := range usedPhases(r) {
			p := run.Phase(ph)
			res := &benchfmt.Result{Config: cfg, Name: benchfmt.Name(name + "/phase=" + ph), Iters: 1, Values: []benchfmt.Value{
				{Value: float64(p.Ops), Unit: "ops/op"},
				{Value: float64(scenarios.Cycles(p.EstCycles)), Unit: "est-cycles/op"},
				{Value: float64(scenarios.Cycles(p.TaskCycles)), Unit: "task-est-cycles/op"},
				{Value: ns(p.EstCycles), Unit: "est-kernel-ns/op"},
				{Value: ns(p.TaskCycles), Unit: "task-est-kernel-ns/op"},
				{Value: float64(p.WallNS) / 1e9, Unit: "sim-sec/op"},
			}}
			if err := b.w.Write(res); err != nil {
				return err
			}
		}
		res := &benchfmt.Result{Config: cfg, Name: benchfmt.Name(name + "/phase=total"), Iters: 1, Values: []benchfmt.Value{
			{Value: float64(run.TotalOps), Unit: "ops/op"},
			{Value: float64(scenarios.Cycles(run.EstCycles)), Unit: "est-cycles/op"},
			{Value: float64(scenarios.Cycles(run.TaskCycles)), Unit: "task-est-cycles/op"},
			{Value: ns(run.EstCycles), Unit: "est-kernel-ns/op"},
			{Value: ns(run.TaskCycles), Unit: "task-est-kernel-ns/op"},
			{Value: float64(run.WallNS) / 1e9, Unit: "sim-sec/op"},
			{Value: float64(run.Registered), Unit: "registered/op"},
			{Value: float64(run.Optimized), Unit: "optimized/op"},
			{Value: float64(refusedCount(run)), Unit: "rejected/op"},
			{Value: float64(run.NotTried), Unit: "not-attempted/op"},
			{Value: float64(memSum(run)), Unit: "kernel-B/op"},
		}}
		if err := b.w.Write(res); err != nil {
			return err
		}
	}
	return nil
}

// benchName makes a run name safe as a sub-benchmark value (no '/' or
// spaces, which would split the name).
func benchName(s string) string {
	return strings.NewReplacer("/", "_", " ", "_", "=", "-").Replace(s)
}

// benchConfig is the file configuration: how the report was made and
// its parameters.
func benchConfig(r *scenarios.ManyReport, withN bool) []benchfmt.Config {
	var cfg []benchfmt.Config
	add := func(k, v string) {
		if v != "" {
			cfg = append(cfg, benchfmt.Config{Key: k, Value: []byte(v), File: true})
		}
	}
	add("scenario", r.Scenario)
	if m := r.Meta; m != nil {
		if m.Kernel.Source == "file" {
			add("kernel", m.Kernel.Path)
			add("kernel-sha256", m.Kernel.SHA256)
		} else {
			add("kernel", strings.SplitN(m.Kernel.String(), ";", 2)[0])
		}
		add("modules", fmt.Sprint(len(m.Kernel.Modules)))
		add("costs", m.Costs.String())
		add("weights", m.Costs.Regime)
		faults := m.Faults
		if faults == "" {
			faults = "none"
		}
		add("faults", faults)
		add("cpu", m.CPU)
		add("clock-ghz", strconv.FormatFloat(clockOf(m).GHz, 'g', -1, 64))
	} else {
		add("kernel", r.Kernel)
	}
	add("boot-cpu", r.CPU)
	if withN {
		add("n", fmt.Sprint(r.N))
	}
	add("via", string(r.Via))
	for _, k := range sortedKeys(r.Params) {
		if k == "via" || k == "probes" && !withN {
			continue
		}
		add(strings.ReplaceAll(k, "_", "-"), fmt.Sprint(r.Params[k]))
	}
	return cfg
}
