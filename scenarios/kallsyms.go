package scenarios

import (
	"fmt"
	"github.com/kpsim/kpsim/machine"
	"strconv"
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
		return nil, fmt.Errorf("--n: must be at least 1 (got %d)", o.Iters)
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
