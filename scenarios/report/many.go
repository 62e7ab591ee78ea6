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

// Table writes the perf-stat-like report, at most TableWidth columns
// wide: how it was made, parameters, per phase each run's operation count
// and estimated cycles with the ratio of the first run (and of series) to
// it, a summary per run, the decisions, growth fits and modelled kernel
// memory. Runs that do not fit side by side are split into groups.
func Table(w io.Writer, r *scenarios.ManyReport) error {
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
	var ps []string
	for _, k := range sortedKeys(r.Params) {
		ps = append(ps, fmt.Sprintf("%s=%v", k, r.Params[k]))
	}
	writeWrapped(w, " params:  "+strings.Join(ps, " "), "          ")
	if r.Meta != nil {
		for _, n := range scenarios.SwitchNotes(r.Meta.Kernel.Generation, r.Runs) {
			writeWrapped(w, " switches: "+n, "          ")
		}
	}
	fmt.Fprintln(w)
	if len(r.Runs) == 0 {
		return nil
	}
	phaseTable(w, r)
	summaryTable(w, r)
	remainderTable(w, r)
	sensitivityTable(w, r)
	decisionsTable(w, r)
	growthTable(w, r)
	memoryTable(w, r)
	fmt.Fprintln(w)
	writeWrapped(w, " Counts are exact and repeatable; cycles are counts x weights (kpsim list, docs/cost-model.md); wall time is this machine's, compare it only as a ratio within one run. "+retainedNote, " ")
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

func ratio(a, b float64) string {
	if b == 0 {
		if a == 0 {
			return "-"
		}
		return "inf"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

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
// digests agree, so they print once.
func decisionsTable(w io.Writer, r *scenarios.ManyReport) {
	base := r.Runs[0]
	same := true
	for _, run := range r.Runs[1:] {
		same = same && run.WhyDigest == base.WhyDigest && run.Digest == base.Digest
	}
	runs := r.Runs
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
