package scenarios

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/kpsim/kpsim/machine"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// KallsymsOptions parameterise the kallsyms scenario.
type KallsymsOptions struct {
	Iters    int
	Hits     []string // default: 16 names the table has
	Misses   []string // default: 8 names it lacks
	Build    ktab.Options
	Variants []kallsyms.Variant // default: kallsyms.AllVariants()
	Seed     uint64
	// Budget, when positive, is the time each measurement's timing loop
	// runs for (its pass count grown as testing.B grows b.N, at most
	// Iters); zero times exactly Iters passes.
	Budget time.Duration
	// Progress, if set, is told about every measurement (a terminal's bar).
	Progress Progress
	// Costs price the counts (default: the registered weights); Why says
	// why this table was chosen, for the report.
	Costs *sim.CostTable
	Why   string
}

// KallsymsRun is one variant's figures. *_ns are Go wall-clock nanoseconds
// per call measured in this run; *_ops the modelled operation counts per call.
type KallsymsRun struct {
	Name            string             `json:"name"`
	HitNS           float64            `json:"hit_ns"`
	MissNS          float64            `json:"miss_ns"`
	SprintNS        float64            `json:"sprint_ns"`
	SprintNoOffNS   float64            `json:"sprint_no_offset_ns"`
	WalkUS          float64            `json:"walk_us"`
	HitOps          map[string]float64 `json:"hit_ops"`
	MissOps         map[string]float64 `json:"miss_ops"`
	SprintOps       map[string]float64 `json:"sprint_ops"`
	HitCycles       float64            `json:"hit_est_cycles"`
	MissCycles      float64            `json:"miss_est_cycles"`
	SprintCycles    float64            `json:"sprint_est_cycles"`
	WalkCycles      float64            `json:"walk_est_cycles"`
	ExtraBytes      int64              `json:"extra_bytes"`
	HeapPeakBytes   int64              `json:"heap_peak_bytes"`
	ValidatedHits   int                `json:"validated_hits"`
	ValidatedMisses int                `json:"validated_misses"`
	// Passes are the timed passes of each measurement (hit, miss, sprint,
	// sprint_no_offset, walk): Iters, or what the time budget reached.
	Passes map[string]int `json:"passes"`
}

// KallsymsReport is the scenario's output.
type KallsymsReport struct {
	Scenario string         `json:"scenario"`
	Kernel   string         `json:"kernel"`
	Symbols  int            `json:"symbols"`
	Iters    int            `json:"iters"`
	Weights  string         `json:"weights"`
	Hits     []string       `json:"hits"`
	Misses   []string       `json:"misses"`
	Runs     []*KallsymsRun `json:"runs"`
	// Budget is the time budget of each timing loop ("" for fixed Iters).
	Budget string `json:"time_budget,omitempty"`
	// Meta says how the report was made (the caller fills it).
	Meta *Meta `json:"meta,omitempty"`
}

// SymbolsOf turns an image's vmlinux symbols into the build's input.
func SymbolsOf(k *image.Kernel) []ktab.Symbol { return machine.SymbolsOf(k) }

// RunKallsyms builds the tables from syms and, for every variant, first
// validates (hits found at their address, misses not found), then measures
// hits, misses, sprint_symbol, sprint_symbol_no_offset and a full walk.
func RunKallsyms(kernel string, syms []ktab.Symbol, modules []*image.Module, o KallsymsOptions) (*KallsymsReport, error) {
	if o.Iters < 1 {
		return nil, fmt.Errorf("--iters: must be at least 1 (got %d)", o.Iters)
	}
	var vm []ktab.Symbol
	for _, s := range syms {
		if s.Module == "" {
			vm = append(vm, s)
		}
	}
	t, err := ktab.Build(vm, o.Build)
	if err != nil {
		return nil, err
	}
	// Where each name first appears in kallsyms order: what a hit must return.
	first := map[string]uint64{}
	for i, s := range t.Syms {
		if _, ok := first[s.Name]; !ok {
			first[s.Name] = t.SymAddress(i)
		}
	}
	hits, misses := o.Hits, o.Misses
	if len(hits) == 0 {
		rng := sim.NewRNG(o.Seed, "scenario.kallsyms.hits")
		for len(hits) < 16 && len(hits) < len(first) {
			s := t.Syms[rng.IntN(len(t.Syms))]
			if s.Name != "" && !contains(hits, s.Name) {
				hits = append(hits, s.Name)
			}
		}
	}
	if len(misses) == 0 {
		for i := 0; len(misses) < 8 && i < len(hits)*4; i++ {
			m := hits[i%len(hits)] + "_kpsim_miss" + strconv.Itoa(i)
			if _, ok := first[m]; !ok {
				misses = append(misses, m)
			}
		}
	}
	var addrs []uint64
	for _, h := range hits {
		a, ok := first[h]
		if !ok {
			return nil, fmt.Errorf("--hits: %q is not in the table", h)
		}
		addrs = append(addrs, a+1)
	}
	for _, m := range misses {
		if _, ok := first[m]; ok {
			return nil, fmt.Errorf("--misses: %q is in the table", m)
		}
	}
	variants := o.Variants
	if len(variants) == 0 {
		variants = kallsyms.AllVariants()
	}
	costs := o.Costs
	if costs == nil {
		costs = sim.DefaultCosts()
	}
	rep := &KallsymsReport{Scenario: "kallsyms", Kernel: kernel, Symbols: t.NumSyms, Iters: o.Iters, Hits: hits, Misses: misses, Weights: costs.Describe()}
	if o.Why != "" {
		rep.Weights += "; " + o.Why
	}
	walkIters := max(1, o.Iters/20000)
	if o.Budget > 0 {
		rep.Budget = o.Budget.String()
	}
	done := 0
	if o.Progress != nil {
		o.Progress.Start("kallsyms", 4*len(variants)) // hit, miss, sprint, walk per variant
		defer o.Progress.Done()
	}
	for _, v := range variants {
		c, err := kallsyms.NewCompressed(t, v, kallsyms.CompressedOptions{Modules: modules})
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v, err)
		}
		run := &KallsymsRun{Name: v.String()}
		// Correctness first, as test_kallsyms_perf does.
		for _, h := range hits {
			a, ok := c.LookupName(nil, h)
			if !ok || a != first[h] {
				return nil, fmt.Errorf("variant %s: %s found at %#x (%v), want %#x", v, h, a, ok, first[h])
			}
			run.ValidatedHits++
		}
		for _, m := range misses {
			if _, ok := c.LookupName(nil, m); ok {
				return nil, fmt.Errorf("variant %s: miss %s was found", v, m)
			}
			run.ValidatedMisses++
		}
		run.Passes = map[string]int{}
		measure := func(what string, kind kallsyms.LookupKind, names []string, as []uint64, maxN int) (kallsyms.Measurement, error) {
			m, n, err := measureFor(o.Budget, maxN, func(n int) (kallsyms.Measurement, error) { return c.MeasureWith(costs, kind, names, as, n) })
			run.Passes[what] = n
			if o.Progress != nil {
				done++
				o.Progress.Update(done)
			}
			return m, err
		}
		hit, err := measure("hit", kallsyms.KindLookupName, hits, nil, o.Iters)
		if err != nil {
			return nil, err
		}
		miss, err := measure("miss", kallsyms.KindLookupName, misses, nil, o.Iters)
		if err != nil {
			return nil, err
		}
		spr, err := measure("sprint", kallsyms.KindSprint, nil, addrs, o.Iters)
		if err != nil {
			return nil, err
		}
		if o.Budget > 0 {
			walkIters = o.Iters // the budget decides
		}
		walk, err := measure("walk", kallsyms.KindOnEachSymbol, nil, nil, walkIters)
		if err != nil {
			return nil, err
		}
		run.HitNS, run.HitOps, run.HitCycles = hit.NsPerCall, hit.OpsPerCall, hit.CyclesPerCall
		run.MissNS, run.MissOps, run.MissCycles = miss.NsPerCall, miss.OpsPerCall, miss.CyclesPerCall
		run.SprintNS, run.SprintOps, run.SprintCycles = spr.NsPerCall, spr.OpsPerCall, spr.CyclesPerCall
		run.WalkUS, run.WalkCycles = walk.NsPerCall/1000, walk.CyclesPerCall
		run.SprintNoOffNS, run.Passes["sprint_no_offset"], _ = measureFor(o.Budget, o.Iters, func(n int) (float64, error) {
			return timeCalls(n, addrs, func(a uint64) { c.SprintSymbolNoOffset(nil, a) }), nil
		})
		mem := c.Memory()
		run.ExtraBytes, run.HeapPeakBytes = mem.ExtraRodata+mem.HeapPeak, mem.HeapPeak
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

// timeCalls returns Go ns per call of f over iters passes of xs.
func timeCalls(iters int, xs []uint64, f func(uint64)) float64 {
	start := time.Now()
	for i := 0; i < iters; i++ {
		for _, x := range xs {
			f(x)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters*len(xs))
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func opsTotal(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// WriteJSON writes the report.
func (r *KallsymsReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one row per run and metric.
func (r *KallsymsReport) WriteCSV(w io.Writer) error {
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

// WriteTable writes the perf-stat-like table: per variant the measured ns
// per call and the modelled ops and cycles per call, with ratios to the
// first variant (the baseline).
func (r *KallsymsReport) WriteTable(w io.Writer) error {
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
