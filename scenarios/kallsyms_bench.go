package scenarios

import (
	"fmt"
	"io"

	"golang.org/x/perf/benchfmt"
)

// WriteBench writes the kallsyms report as Go benchmark results, one per
// variant and measurement (Kallsyms/variant=V/lookup=hit|miss|sprint|
// sprint_no_offset|walk): the measured wall time (sec/op, this machine's)
// and the modelled estimated cycles per call (est-cycles/op, exact: the
// same every run), with the meta as configuration keys.
func (r *KallsymsReport) WriteBench(w io.Writer) error {
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
	mr := &ManyReport{Scenario: "kallsyms", Kernel: r.Kernel, Meta: r.Meta, Params: map[string]any{"symbols": r.Symbols, "iters": r.Iters, "hits": len(r.Hits), "misses": len(r.Misses)}}
	cfg := mr.benchConfig(false)
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
