package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/scenarios"
)

// JSON writes the report as one JSON object (see jsonReport: schema
// scenarios.SchemaVersion).
func JSON(w io.Writer, r *scenarios.ManyReport) error {
	return indentJSON(w, jsonOf(r))
}

// CSV writes one row per run, phase and counter (see csvRows).
func CSV(w io.Writer, r *scenarios.ManyReport, costs interface{ WeightByName(string) float64 }) error {
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(csvRows(r, costs)); err != nil {
		return err
	}
	return cw.Error()
}

// TableOptions choose what Table prints.
type TableOptions struct {
	// Detail prints an --ablation report's per-phase and per-run tables
	// after its summary (run many --detail); other reports always have
	// them.
	Detail bool
}

// Table writes the perf-stat-like report (TableWith, no options).
func Table(w io.Writer, r *scenarios.ManyReport) error { return TableWith(w, r, TableOptions{}) }

// TableWith writes the perf-stat-like report, at most TableWidth columns
// wide: how it was made, parameters, per phase each run's operation count,
// estimated cycles and kernel time with the ratio of the first run (and of
// series) to it, a summary per run, the decisions, growth fits and
// modelled kernel memory. Runs that do not fit side by side are split into
// groups. An --ablation report starts with its summary, one line per
// switch, and prints the per-phase and per-run tables only with o.Detail.
func TableWith(w io.Writer, r *scenarios.ManyReport, o TableOptions) error {
	fmt.Fprintf(w, " Simulated attach and detach of %d probes via %s (scenario %s)\n", r.N, r.Via, r.Scenario)
	for _, l := range r.Meta.Lines() {
		writeWrapped(w, " "+l, "          ")
	}
	if r.Meta == nil {
		fmt.Fprintf(w, " kernel: %s\n", r.Kernel)
	}
	if r.Weights != "" {
		writeWeightsLine(w, r.Weights)
	}
	if r.CPU != "" {
		fmt.Fprintf(w, " boot CPU: %s (the CPU the kernel text was boot-patched for)\n", r.CPU)
	}
	writeWrapped(w, " params:  "+kvList(r.Params, " "), "          ")
	if r.Meta != nil {
		for _, n := range scenarios.SwitchNotes(r.Meta.Kernel.Generation, r.Runs) {
			writeWrapped(w, " switches: "+n, "          ")
		}
	}
	fmt.Fprintln(w)
	if len(r.Runs) == 0 {
		return nil
	}
	abl := scenarios.Ablation(r)
	if abl != nil {
		ablationTable(w, r, abl)
	}
	if abl == nil || o.Detail {
		phaseTable(w, r)
		summaryTable(w, r)
		remainderTable(w, r)
	}
	sensitivityTable(w, r)
	decisionsTable(w, r, abl != nil && !o.Detail)
	growthTable(w, r)
	if abl == nil || o.Detail {
		memoryTable(w, r)
	} else {
		fmt.Fprintln(w)
		writeWrapped(w, fmt.Sprintf(" per-phase, per-context and per-run tables of the %d runs: --detail (--format json, csv and bench hold them whatever the flag)", len(r.Runs)), " ")
	}
	fmt.Fprintln(w)
	writeWrapped(w, " Counts are exact and repeatable; cycles are counts x weights (kpsim list, docs/cost-model.md); est. time is the cycles at the clock: line's frequency; sim wall is kpsim's own run time on this machine, not the kernel's: compare it only as a ratio within one run. "+retainedNote, " ")
	return nil
}

// retainedNote says what the summary's "sim retained" row counts.
const retainedNote = "sim retained: the most the run's own simulator structures held (everything reachable from its machine, tracing layer and per-probe state; the shared image and kallsyms tables excluded), not the process heap, so it is the same however many runs run at once."

// memSum adds up a run's modelled kernel memory (bytes_per_entry, peak and height figures excluded).
func memSum(r *scenarios.RunResult) int64 {
	var t int64
	for k, v := range r.KernelMem {
		if !strings.HasSuffix(k, "_per_entry") && !strings.HasSuffix(k, ".peak_bytes") && !strings.HasSuffix(k, ".height") {
			t += v
		}
	}
	return t
}

func signed(n int64) string {
	if n < 0 {
		return "-" + group(uint64(-n))
	}
	return group(uint64(n))
}

// ratio is a/b for a table that needs no footnote: "-" when a side is
// zero (see ratios), never "inf" or "0.00x".
func ratio(a, b float64) string { return (&ratios{}).of(a, b) }

func rejected(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

// group renders n with thousands separators, as perf stat does.
func group(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// decisionsTable prints what the runs decided beyond the counts: probes on
// ftrace, lines never attempted, and the refusals and non-optimizations by
// deciding check. The reasons are the same in every run when the reasons
// digests agree, so they print once; brief (an --ablation summary) prints
// only the first run and those that differ from it.
func decisionsTable(w io.Writer, r *scenarios.ManyReport, brief bool) {
	base := r.Runs[0]
	same := true
	runs := []*scenarios.RunResult{base} // a new slice: r.Runs stays as it is
	for _, run := range r.Runs[1:] {
		differs := run.WhyDigest != base.WhyDigest || run.Digest != base.Digest
		same = same && !differs
		if differs || !brief {
			runs = append(runs, run)
		}
	}
	if same {
		runs = runs[:1]
	}
	fmt.Fprintln(w)
	for _, run := range runs {
		label := run.Name
		if same {
			label = "every run"
			if len(r.Runs) == 1 {
				label = run.Name
			}
		}
		writeWrapped(w, fmt.Sprintf(" decisions (%s, via %s): %d registered of %d targets, %d optimized, %d on ftrace, %d refused (%s), %d not attempted; reasons digest %s",
			label, r.Via, run.Registered, run.Registered+refusedCount(run)+run.NotTried, run.Optimized, run.OnFtrace, refusedCount(run), rejected(run.Rejected), run.NotTried, run.WhyDigest[:12]), "   ")
		cls := heaviest(run.Reasons, func(n int) float64 { return float64(n) })
		for i, k := range cls {
			if i == 12 {
				fmt.Fprintf(w, "   ... %d more classes (--probes FILE lists every probe's reason)\n", len(cls)-i)
				break
			}
			fmt.Fprintf(w, "   %8s  %s\n", group(uint64(run.Reasons[k])), k)
		}
	}
	if !same {
		fmt.Fprintln(w, " REASONS DIFFER between runs: a switch changed a decision (--probes FILE per run shows which)")
	}
	for _, l := range r.AttachWarnings() {
		writeWrapped(w, " WARNING "+l, "   ")
	}
	if e, _ := r.Params["enable"].(string); r.Via == doors.ViaKprobeEvents && (e == "" || e == string(doors.EnableNone)) {
		// Not a warning: registration alone is a measurement of its own.
		writeWrapped(w, " note: --enable none (the default): the events are registered but never enabled, so no probe is armed or optimized (optimize_kprobe returns at kprobe_disabled); --enable each or group enables them", "   ")
	}
}

func refusedCount(run *scenarios.RunResult) int {
	n := 0
	for _, v := range run.Rejected {
		n += v
	}
	return n
}

// growthTable prints each run's per-batch growth fits (--batch-report).
func growthTable(w io.Writer, r *scenarios.ManyReport) {
	for _, run := range r.Runs {
		for _, g := range run.Growth {
			f := g.Fit
			fmt.Fprintln(w)
			if g.NoFit != "" {
				writeWrapped(w, fmt.Sprintf(" growth (%s, %s pass, batches of %d): no fit: %s", run.Name, g.Pass, g.K, g.NoFit), "   ")
				continue
			}
			writeWrapped(w, fmt.Sprintf(" growth (%s, %s pass, batches of %d): cycles/probe c(N) = %.0f + %.4f·N, R² %.3f; b·N is %.1f%% of c at N = %d; first→last batch %.2fx",
				run.Name, g.Pass, g.K, f.A, f.B, f.R2, 100*f.Share, f.NMax, f.Growth), "   ")
			bn := func(f scenarios.Fit) float64 { return f.B * float64(f.NMax) }
			for i, k := range heaviest(g.Phases, bn) {
				p := g.Phases[k]
				if i == 5 || bn(p) < 1 {
					break
				}
				fmt.Fprintf(w, "   %-22s c(N) = %.0f + %.4f·N (R² %.3f, b·N %.1f%% of the phase at N_max)\n", k, p.A, p.B, p.R2, 100*p.Share)
			}
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// heaviest returns m's keys by weight, heaviest first (equal weights in
// key order).
func heaviest[V any](m map[string]V, weight func(V) float64) []string {
	ks := sortedKeys(m)
	sort.SliceStable(ks, func(i, j int) bool { return weight(m[ks[i]]) > weight(m[ks[j]]) })
	return ks
}

// ablationTable prints --ablation's summary: the none and series totals,
// then one line per switch: its alone run against none and the series
// without it (a design: the series with it) against the series, by the
// task's estimated cycles, and whether each run kept the decisions digest
// of the run it is compared with. A digest that differs is printed loudly:
// a switch must change only what the checks cost.
func ablationTable(w io.Writer, r *scenarios.ManyReport, a *scenarios.AblationSummary) {
	clk := clockOf(r.Meta)
	var rt ratios
	none, series := float64(a.NoneTaskCycles), float64(a.SeriesTaskCycles)
	writeWrapped(w, fmt.Sprintf(" ablation summary, one line per switch (the task's cycles, `perf stat CMD`): none %s (%s est.), series %s (%s est.), none/series %s",
		group(uint64(a.NoneTaskCycles)), estTime(clk.NS(none)), group(uint64(a.SeriesTaskCycles)), estTime(clk.NS(series)), rt.of(none, series)), "   ")
	rows := [][]string{{"switch", "alone vs none", "none/alone", "decisions", "series run", "vs series", "decisions"}}
	var differ []string
	for _, l := range a.Lines {
		alone := float64(l.AloneTaskCycles)
		row := []string{l.Switch, rt.delta(alone, none), rt.of(none, alone), sameMark(l.AloneSameDecisions, "none")}
		if !l.AloneSameDecisions {
			differ = append(differ, l.Alone+" (against none)")
		}
		switch {
		case l.SeriesRun == "":
			row = append(row, "-", "", "")
		default:
			how := "with it"
			if l.Minus {
				how = "without it"
			}
			row = append(row, how, rt.delta(float64(l.SeriesTaskCycles), series), sameMark(l.SeriesSameDecisions, "series"))
			if !l.SeriesSameDecisions {
				differ = append(differ, l.SeriesRun+" (against series)")
			}
		}
		rows = append(rows, row)
	}
	writeColumns(w, " ", rows)
	writeWrapped(w, " vs none, vs series: Δ of the task's estimated cycles against that run (negative: cheaper). alone: the switch with what it needs (an iter-* switch with kprobe-tree, reservation-btree with every index). series run: the series without the switch, or with it for an alternative design; - for a switch outside the series.", " ")
	rt.footnote(w)
	if len(differ) > 0 {
		writeWrapped(w, fmt.Sprintf(" DECISIONS DIFFER in %d runs: %s. A switch must change only what the checks cost, never a decision: a behaviour bug (--probes FILE per run shows which probe).", len(differ), strings.Join(differ, ", ")), " ")
	} else {
		writeWrapped(w, " decisions: every switch's runs keep the digest of the run they are compared with (a switch changes only what the checks cost).", " ")
	}
}

// sameMark is "= base" or the loud "DIFFERENT".
func sameMark(same bool, base string) string {
	if same {
		return "= " + base
	}
	return "DIFFERENT"
}
