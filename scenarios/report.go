package scenarios

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as one JSON object.
func (r *ManyReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one row per run and counter: run, counter, count,
// est_cycles (summed over phases).
func (r *ManyReport) WriteCSV(w io.Writer, costs interface{ WeightByName(string) float64 }) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"run", "counter", "count", "est_cycles"}); err != nil {
		return err
	}
	for _, run := range r.Runs {
		names := make([]string, 0, len(run.Ops))
		for n := range run.Ops {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			cyc := float64(run.Ops[n]) * costs.WeightByName(n)
			if err := cw.Write([]string{run.Name, n, strconv.FormatUint(run.Ops[n], 10), strconv.FormatFloat(cyc, 'f', 0, 64)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable writes the perf-stat-like report: parameters, then per phase
// each run's operation count and estimated cycles side by side, the ratio
// of the first run to each other run, totals, wall time and memory.
func (r *ManyReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, " Simulated register_kprobes / unregister_kprobes of %d probes (scenario %s)\n", r.N, r.Scenario)
	fmt.Fprintf(w, " kernel: %s (boot CPU: %s)\n", r.Kernel, r.CPU)
	if r.Weights != "" {
		fmt.Fprintf(w, " weights: %s\n", r.Weights)
	}
	keys := make([]string, 0, len(r.Params))
	for k := range r.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ps []string
	for _, k := range keys {
		ps = append(ps, fmt.Sprintf("%s=%v", k, r.Params[k]))
	}
	fmt.Fprintf(w, " params: %s\n\n", strings.Join(ps, " "))
	if len(r.Runs) == 0 {
		return nil
	}
	base := r.Runs[0]
	if len(r.Runs) <= 4 {
		r.phaseTable(w)
	}
	// Summary: one row per run.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\tops\test. cycles\t%s/run\twall\t%s/run\tregistered\toptimized\trejected\tkernel bytes +\tpeak heap\tdecisions\t\n", base.Name, base.Name)
	for _, run := range r.Runs {
		same := "= " + base.Name
		if run.Digest != base.Digest {
			same = "DIFFERENT"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s %s\t\n", run.Name, group(run.TotalOps), group(uint64(run.EstCycles)),
			ratio(base.EstCycles, run.EstCycles), time.Duration(run.WallNS).Round(time.Millisecond),
			ratio(float64(base.WallNS), float64(run.WallNS)), run.Registered, run.Optimized, rejected(run.Rejected),
			signed(memSum(run)-memSum(base)), mib(run.PeakBytes), run.Digest[:12], same)
	}
	tw.Flush()
	r.decisionsTable(w)
	r.growthTable(w)
	if len(r.Runs) > 4 {
		fmt.Fprintln(w, "\n (kernel bytes +: modelled kernel memory beyond the first run's; per-table figures with --format json, or with at most 4 runs)")
		fmt.Fprintln(w, "\n Counts are exact and repeatable; cycles are counts x weights (kpsim list); wall time is this machine's, compare it only as a ratio within one run.")
		return nil
	}
	// Modelled kernel memory the runs add.
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	memKeys := map[string]bool{}
	for _, run := range r.Runs {
		for k := range run.KernelMem {
			memKeys[k] = true
		}
	}
	var mk []string
	for k := range memKeys {
		mk = append(mk, k)
	}
	sort.Strings(mk)
	fmt.Fprintf(tw, "kernel memory (bytes)\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t", run.Name)
	}
	fmt.Fprintln(tw)
	for _, k := range mk {
		fmt.Fprintf(tw, "%s\t", k)
		for _, run := range r.Runs {
			if v, ok := run.KernelMem[k]; ok {
				fmt.Fprintf(tw, "%s\t", group(uint64(v)))
			} else {
				fmt.Fprintf(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n Counts are exact and repeatable; cycles are counts x weights (kpsim list); wall time is this machine's, compare it only as a ratio within one run.")
	return nil
}

func (r *ManyReport) phaseTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s ops\t%s cycles\t", run.Name, run.Name)
	}
	for _, run := range r.Runs[1:] {
		fmt.Fprintf(tw, "%s/%s\t", r.Runs[0].Name, run.Name)
	}
	fmt.Fprintln(tw)
	var order []string
	seen := map[string]bool{}
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			if !seen[p.Name] {
				seen[p.Name] = true
				order = append(order, p.Name)
			}
		}
	}
	find := func(run *RunResult, name string) PhaseResult {
		for _, p := range run.Phases {
			if p.Name == name {
				return p
			}
		}
		return PhaseResult{}
	}
	for _, name := range order {
		fmt.Fprintf(tw, "%s\t", name)
		for _, run := range r.Runs {
			p := find(run, name)
			fmt.Fprintf(tw, "%s\t%s\t", group(p.Ops), group(uint64(p.EstCycles)))
		}
		b := find(r.Runs[0], name)
		for _, run := range r.Runs[1:] {
			fmt.Fprintf(tw, "%s\t", ratio(b.EstCycles, find(run, name).EstCycles))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "total\t")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t", group(run.TotalOps), group(uint64(run.EstCycles)))
	}
	for _, run := range r.Runs[1:] {
		fmt.Fprintf(tw, "%s\t", ratio(r.Runs[0].EstCycles, run.EstCycles))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintln(w)
}

// memSum adds up a run's modelled kernel memory (bytes_per_entry, peak and height figures excluded).
func memSum(r *RunResult) int64 {
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
func (r *ManyReport) decisionsTable(w io.Writer) {
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
		fmt.Fprintf(w, " decisions (%s, via %s): %d registered, %d optimized, %d on ftrace, %d refused (%s), %d not attempted; reasons digest %s\n",
			label, r.Via, run.Registered, run.Optimized, run.OnFtrace, refusedCount(run), rejected(run.Rejected), run.NotTried, run.WhyDigest[:12])
		type kv struct {
			k string
			v int
		}
		var cls []kv
		for k, v := range run.Reasons {
			cls = append(cls, kv{k, v})
		}
		sort.Slice(cls, func(i, j int) bool {
			if cls[i].v != cls[j].v {
				return cls[i].v > cls[j].v
			}
			return cls[i].k < cls[j].k
		})
		for i, c := range cls {
			if i == 12 {
				fmt.Fprintf(w, "   ... %d more classes (--probes FILE lists every probe's reason)\n", len(cls)-i)
				break
			}
			fmt.Fprintf(w, "   %8s  %s\n", group(uint64(c.v)), c.k)
		}
	}
	if !same {
		fmt.Fprintln(w, " REASONS DIFFER between runs: a switch changed a decision (--probes FILE per run shows which)")
	}
}

func refusedCount(run *RunResult) int {
	n := 0
	for _, v := range run.Rejected {
		n += v
	}
	return n
}

// growthTable prints each run's per-batch growth fits (--batch-report).
func (r *ManyReport) growthTable(w io.Writer) {
	for _, run := range r.Runs {
		for _, g := range run.Growth {
			f := g.Fit
			fmt.Fprintf(w, "\n growth (%s, %s pass, batches of %d): cycles/probe c(N) = %.0f + %.4f·N, R² %.3f; b·N is %.1f%% of c at N = %d; first→last batch %.2fx\n",
				run.Name, g.Pass, g.K, f.A, f.B, f.R2, 100*f.Share, f.NMax, f.Growth)
			type kv struct {
				k string
				f Fit
			}
			var ps []kv
			for k, pf := range g.Phases {
				ps = append(ps, kv{k, pf})
			}
			sort.Slice(ps, func(i, j int) bool {
				bi, bj := ps[i].f.B*float64(ps[i].f.NMax), ps[j].f.B*float64(ps[j].f.NMax)
				if bi != bj {
					return bi > bj
				}
				return ps[i].k < ps[j].k
			})
			for i, p := range ps {
				if i == 5 || p.f.B*float64(p.f.NMax) < 1 {
					break
				}
				fmt.Fprintf(w, "   %-22s c(N) = %.0f + %.4f·N (R² %.3f, b·N %.1f%% of the phase at N_max)\n", p.k, p.f.A, p.f.B, p.f.R2, 100*p.f.Share)
			}
		}
	}
}
