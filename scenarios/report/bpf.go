package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/scenarios"
)

// BPFTable writes the per-stage table: one column pair (cycles, ms) per
// run, then totals, per-attach cost, results and digests.
func BPFTable(w io.Writer, rep *scenarios.BPFReport) error {
	fmt.Fprintf(w, " kpsim run %s on %s\n", rep.Scenario, label(rep.Kernel, rep.Release, rep.Generation))
	for _, k := range []string{"libbpf", "kernel", "fprobe", "fprobe_y", "kconfig"} {
		fmt.Fprintf(w, " %-9s %s\n", k+":", rep.Model[k])
	}
	fmt.Fprintf(w, " params:   %s\n", kvList(rep.Params, " "))
	WriteWeights(w, rep.Costs, rep.Weights)
	scopeLines(w, rep.Includes, rep.NotModelled, rep.Excluded)
	clk := rep.Costs.Clock.Or()
	writeWrapped(w, " ms: "+clk.Line(), "     ")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "stage\t")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s cycles\tms\tms/attach\t", r.Name)
	}
	fmt.Fprintln(tw)
	var phases []string
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		for _, s := range r.Stages {
			if !seen[s.Phase] {
				seen[s.Phase] = true
				phases = append(phases, s.Phase)
			}
		}
	}
	for _, ph := range phases {
		fmt.Fprintf(tw, "%s\t", ph)
		for _, r := range rep.Runs {
			cyc := 0.0
			for _, s := range r.Stages {
				if s.Phase == ph {
					cyc = s.Cycles
				}
			}
			fmt.Fprintf(tw, "%s\t%.3f\t%.4f\t", group(uint64(cyc)), clk.MS(cyc), clk.MS(cyc)/float64(max(r.Attaches, 1)))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "total\t")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%.3f\t%.4f\t", group(uint64(r.Cycles)), r.MS, r.PerAttach)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, r := range rep.Runs {
		base := rep.Base(r)
		same := "= " + base.Name
		if r.Digest != base.Digest {
			same = "DIFFERENT"
		}
		if r.Group == "pairs" {
			same = "(2 perf events per function: own group)"
		}
		fmt.Fprintf(w, " %-40s attaches %d ok %d errors %s paths %s sim wall %s digest %s %s\n", r.Name, r.Attaches, r.OK,
			orNone(kvList(r.Errors, ",")), orNone(kvList(r.Paths, ",")), simWall(r.WallNS), r.Digest[:12], same)
		for _, ch := range r.Changed {
			fmt.Fprintf(w, "     changed: %s\n", ch)
		}
		if len(r.Failed) > 0 && len(r.Failed) < r.Attaches {
			for i, f := range r.Failed {
				if i == 8 {
					fmt.Fprintf(w, "     failed: … %d more\n", len(r.Failed)-8)
					break
				}
				fmt.Fprintf(w, "     failed: %s\n", f)
			}
		}
	}
	for _, l := range rep.AttachWarnings() {
		writeWrapped(w, " WARNING "+l, "   ")
	}
	return nil
}

// CrossoverTable prints the crossover table and the crossover K per variant.
func CrossoverTable(w io.Writer, rep *scenarios.CrossoverReport) error {
	fmt.Fprintf(w, " kpsim run crossover on %s (%d kallsyms symbols)\n", label(rep.Kernel, rep.Release, rep.Generation), rep.Symbols)
	WriteWeights(w, rep.Costs, rep.Weights)
	clk := rep.Costs.Clock.Or()
	fmt.Fprintf(w, " lookups = K × (kallsyms_lookup_name + ftrace_location); walk = ftrace_lookup_symbols(K sorted names)\n")
	writeWrapped(w, " ms: "+clk.Line(), "     ")
	scopeLines(w, rep.Includes, rep.NotModelled, rep.Excluded)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tK\tlookups cycles\tms\twalk cycles\tms\tvisited\twinner\t")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.3f\t%s\t%.3f\t%d\t%s\t\n", r.Variant, r.K, group(uint64(r.LookupCyc)), clk.MS(r.LookupCyc),
			group(uint64(r.WalkCyc)), clk.MS(r.WalkCyc), r.WalkVisited, r.Winner)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var vs []string
	for v := range rep.Crossover {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		x := rep.Crossover[v]
		s := fmt.Sprintf("K ≈ %.0f", x)
		if x < 0 {
			s = "none in the K range (lookups cheaper throughout)"
		}
		fmt.Fprintf(w, " %-24s crossover %s; %.0f cycles per name looked up, %.1f cycles per symbol walked (≈ %.0f symbols walked per lookup)\n",
			v, s, rep.PerLookup[v], rep.PerVisit[v], rep.PerLookup[v]/rep.PerVisit[v])
	}
	return nil
}

// TracingMultiTable prints run tracing-multi's table: per kallsyms
// variant, the cycles per function of each component, the total, and the
// kallsyms share — only when the report's total is complete.
func TracingMultiTable(w io.Writer, rep *scenarios.TracingMultiReport) error {
	fmt.Fprintf(w, " kpsim run tracing-multi on %s: one fentry.multi link over K = %d functions", label(rep.Kernel, rep.Release, rep.Generation), rep.K)
	if rep.KRequested > rep.K {
		fmt.Fprintf(w, " (--n %d: the image has %d uniquely named traceable functions)", rep.KRequested, rep.K)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, " total includes: %s\n", strings.Join(rep.Includes, "; "))
	if rep.Complete() {
		fmt.Fprintf(w, " not modelled: none — the total is the kernel's whole attach\n")
	} else {
		fmt.Fprintf(w, " not modelled: %s — the total is partial, so no kallsyms share is given\n", strings.Join(rep.NotModelled, "; "))
	}
	fmt.Fprintf(w, " excluded by scope: %s\n", strings.Join(rep.Excluded, "; "))
	if len(rep.Assumptions) > 0 {
		fmt.Fprintf(w, " assumptions: %s\n", strings.Join(rep.Assumptions, "; "))
	}
	clk := rep.Costs.Clock.Or()
	fmt.Fprintf(w, " cycles per function by component (link: once per attach, over K)\n")
	writeWrapped(w, " ms: "+clk.Line(), "     ")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "variant\t")
	if len(rep.Rows) > 0 {
		for _, c := range rep.Rows[0].Components {
			fmt.Fprintf(tw, "%s\t", c.Name)
		}
	}
	fmt.Fprintln(tw, "total/function\ttotal ms\tkallsyms share\t")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t", r.Variant)
		for _, c := range r.Components {
			fmt.Fprintf(tw, "%s\t", group(uint64(c.PerFunc+0.5)))
		}
		share := "—"
		if r.Share != nil {
			share = fmt.Sprintf("%.1f%%", 100**r.Share)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t\n", group(uint64(r.PerFunc+0.5)), clk.MS(r.TotalCyc), share)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Rows) > 0 {
		r := rep.Rows[0]
		fmt.Fprintf(w, "\n trampolines %d, JIT insns %d (two passes), image %d bytes, new 2 MiB prog packs %d, text_poke_copy %d, call sites poked %d in %d batches\n",
			r.Trampolines, r.JITInsns, r.ImageBytes, r.Packs, r.TextCopies, r.Sites, r.Batches)
	}
	return nil
}

// scopeLines prints what a report's totals include, what they lack of
// the path (not modelled) and what is outside them by scope.
func scopeLines(w io.Writer, includes, notModelled, excluded []string) {
	fmt.Fprintf(w, " total includes: %s\n", strings.Join(includes, "; "))
	nm := "none"
	if len(notModelled) > 0 {
		nm = strings.Join(notModelled, "; ")
	}
	fmt.Fprintf(w, " not modelled: %s\n", nm)
	fmt.Fprintf(w, " excluded by scope: %s\n", strings.Join(excluded, "; "))
}

// label names the kernel of a report: its name, release and generation.
func label(name, release, gen string) string {
	if gen == "" {
		return name
	}
	return fmt.Sprintf("%s (%s)", name, image.ReleaseLine(release, gen))
}

// orNone is s, or "none" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
