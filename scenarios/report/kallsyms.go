package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/kpsim/kpsim/scenarios"
	"golang.org/x/perf/benchfmt"
)

// KallsymsBench writes the kallsyms report as Go benchmark results, one per
// variant and measurement (Kallsyms/variant=V/lookup=hit|miss|sprint|
// sprint_no_offset|walk): the measured wall time (sec/op, this machine's)
// and the modelled estimated cycles per call (est-cycles/op, exact: the
// same every run), with the meta as configuration keys.
func KallsymsBench(w io.Writer, r *scenarios.KallsymsReport) error {
	if m := r.Meta; m != nil {
		fmt.Fprintf(w, "# kpsim build: %s\n", m.Kpsim) // not a key: see BenchWriter.Write
	}
	bw := benchfmt.NewWriter(w)
	if err := bw.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "est-cycles/op", Key: "assume"}, OrigUnit: "est-cycles/op", Value: "exact"}); err != nil {
		return err
	}
	if err := bw.Write(&benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: "ops/op", Key: "assume"}, OrigUnit: "ops/op", Value: "exact"}); err != nil {
		return err
	}
	mr := &scenarios.ManyReport{Scenario: "kallsyms", Kernel: r.Kernel, Meta: r.Meta, Params: map[string]any{"symbols": r.Symbols, "iters": r.Iters, "hits": len(r.Hits), "misses": len(r.Misses)}}
	cfg := benchConfig(mr, false)
	for _, run := range r.Runs {
		for _, m := range []struct {
			name   string
			sec    float64
			cycles float64
			ops    map[string]float64
		}{
			{"hit", run.HitNS / 1e9, run.HitCycles, run.HitOps},
			{"miss", run.MissNS / 1e9, run.MissCycles, run.MissOps},
			{"sprint", run.SprintNS / 1e9, run.SprintCycles, run.SprintOps},
			{"sprint_no_offset", run.SprintNoOffNS / 1e9, -1, nil},
			{"walk", run.WalkUS / 1e6, run.WalkCycles, nil},
		} {
			vals := []benchfmt.Value{{Value: m.sec, Unit: "sec/op"}}
			if m.cycles >= 0 {
				vals = append(vals, benchfmt.Value{Value: m.cycles, Unit: "est-cycles/op"})
			}
			if m.ops != nil {
				vals = append(vals, benchfmt.Value{Value: opsTotal(m.ops), Unit: "ops/op"})
			}
			res := &benchfmt.Result{Config: cfg, Name: benchfmt.Name("Kallsyms/variant=" + benchName(run.Name) + "/lookup=" + m.name), Iters: r.Iters, Values: vals}
			if err := bw.Write(res); err != nil {
				return err
			}
		}
	}
	return nil
}

func opsTotal(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// KallsymsJSON writes the report.
func KallsymsJSON(w io.Writer, r *scenarios.KallsymsReport) error {
	return indentJSON(w, r)
}

// KallsymsCSV writes one row per run and metric.
func KallsymsCSV(w io.Writer, r *scenarios.KallsymsReport) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run", "metric", "value"})
	for _, run := range r.Runs {
		row := func(k string, v float64) { cw.Write([]string{run.Name, k, strconv.FormatFloat(v, 'f', -1, 64)}) }
		row("hit_ns", run.HitNS)
		row("miss_ns", run.MissNS)
		row("sprint_ns", run.SprintNS)
		row("sprint_no_offset_ns", run.SprintNoOffNS)
		row("walk_us", run.WalkUS)
		row("extra_bytes", float64(run.ExtraBytes))
		for _, m := range []struct {
			p string
			o map[string]float64
		}{{"hit_ops.", run.HitOps}, {"miss_ops.", run.MissOps}} {
			var ks []string
			for k := range m.o {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				row(m.p+k, m.o[k])
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// KallsymsTable writes the perf-stat-like table: per variant the measured ns
// per call and the modelled ops and cycles per call, with ratios to the
// first variant (the baseline).
func KallsymsTable(w io.Writer, r *scenarios.KallsymsReport) error {
	iters := fmt.Sprintf("%d iterations", r.Iters)
	if r.Budget != "" {
		iters = fmt.Sprintf("%s per measurement", r.Budget)
	}
	fmt.Fprintf(w, " Simulated test_kallsyms_perf over %d symbols (%s), %s\n", r.Symbols, r.Kernel, iters)
	for _, l := range r.Meta.Lines() {
		writeWrapped(w, " "+l, "          ")
	}
	if r.Budget != "" {
		fmt.Fprintf(w, " timing: each measurement timed for %s (at most %d passes; the passes each took are in --format json)\n", r.Budget, r.Iters)
	}
	fmt.Fprintf(w, " weights: %s\n", r.Weights) // one line: a reader greps it
	fmt.Fprintf(w, " hits: %d names, misses: %d names; every variant validated first\n\n", len(r.Hits), len(r.Misses))
	if len(r.Runs) == 0 {
		return nil
	}
	b := r.Runs[0]
	// Two tables of one row per variant, each within TableWidth: the
	// model's counts and cycles per call, and this machine's wall time.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, " modelled, per call (b/v: "+b.Name+" over the variant)")
	fmt.Fprintf(tw, "variant\thit ops\thit cycles\tmiss ops\tmiss cycles\thit b/v\tmiss b/v\textra bytes\t\n")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t\n", run.Name, opsTotal(run.HitOps), run.HitCycles, opsTotal(run.MissOps), run.MissCycles,
			ratio(b.HitCycles, run.HitCycles), ratio(b.MissCycles, run.MissCycles), signed(run.ExtraBytes))
	}
	tw.Flush()
	fmt.Fprintln(w, "\n measured, Go wall time per call on this machine")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "variant\thit ns\tmiss ns\tsprint ns\tno-offset ns\twalk us\thit b/v\tmiss b/v\t\n")
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t\n", run.Name, run.HitNS, run.MissNS, run.SprintNS, run.SprintNoOffNS, run.WalkUS,
			ratio(b.HitNS, run.HitNS), ratio(b.MissNS, run.MissNS))
	}
	tw.Flush()
	fmt.Fprintln(w, "\n ns are this machine's Go wall time per call (compare as ratios within one run); ops and cycles are the model's counts x weights.")
	return nil
}
