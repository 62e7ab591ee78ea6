package scenarios

import (
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// CrossoverRow is one (variant, K) point.
type CrossoverRow struct {
	Variant     string  `json:"variant"`
	K           int     `json:"k"`
	LookupCyc   float64 `json:"lookups_est_cycles"` // K × (kallsyms_lookup_name + ftrace_location)
	WalkCyc     float64 `json:"walk_est_cycles"`    // ftrace_lookup_symbols(K names)
	WalkVisited uint64  `json:"walk_visited"`
	Winner      string  `json:"winner"`
}

// CrossoverReport is run crossover's output.
type CrossoverReport struct {
	Kernel string `json:"kernel"`
	// Release and Generation name the kernel the run modelled.
	Release    string             `json:"release,omitempty"`
	Generation string             `json:"generation"`
	Symbols    int                `json:"symbols"`
	Rows       []CrossoverRow     `json:"rows"`
	Crossover  map[string]float64 `json:"crossover_k"` // per variant: K above which the walk is cheaper
	PerLookup  map[string]float64 `json:"lookup_est_cycles_per_name"`
	PerVisit   map[string]float64 `json:"walk_est_cycles_per_symbol"`

	// Weights and Costs name the weights, as BPFReport's.
	Weights string   `json:"weights"`
	Costs   CostInfo `json:"costs"`
}

func variantSwitches(v kallsyms.Variant) (sim.Switches, bool) {
	var sw sim.Switches
	switch v.Index {
	case kallsyms.IndexMarkers:
	case kallsyms.IndexOffsets3:
		sw = sw.With(sim.KallsymsOffsetIndex)
	default:
		return 0, false
	}
	if v.TokenCmp {
		sw = sw.With(sim.KallsymsTokenCmp)
	}
	return sw, true
}

// variantKernel boots the wiring, then swaps in the requested variant's
// resolver (stride2 and dynamic32 have no switch).
func variantKernel(k *image.Kernel, v kallsyms.Variant) (*kallsyms.Compressed, *ftrace.Ftrace, error) {
	sw, _ := variantSwitches(v)
	c := sim.NewCounters(false)
	w, err := machine.Wire(k, sw, c, nil, false)
	if err != nil {
		return nil, nil, err
	}
	syms := w.Syms
	if syms.Variant() != v {
		t, err := machine.KallsymsTables(k)
		if err != nil {
			return nil, nil, err
		}
		if syms, err = kallsyms.NewCompressed(t, v, kallsyms.CompressedOptions{Modules: k.Modules}); err != nil {
			return nil, nil, err
		}
		syms.EnableFastScan()
	}
	ft, err := ftrace.New(k, syms, nil)
	if err != nil {
		return nil, nil, err
	}
	ft.FreeInitMem()
	return syms, ft, nil
}

// forEachVariant runs f on every variant's kernel (variantKernel), jobs
// at a time.
func forEachVariant(k *image.Kernel, variants []kallsyms.Variant, jobs int, f func(vi int, v kallsyms.Variant, syms *kallsyms.Compressed, ft *ftrace.Ftrace) error) error {
	return forEach(len(variants), jobs, func(vi int) error {
		syms, ft, err := variantKernel(k, variants[vi])
		if err != nil {
			return err
		}
		return f(vi, variants[vi], syms, ft)
	})
}

// KMax in a crossover K list means every uniquely named traceable function.
const KMax = -1

// RunCrossover measures, per kallsyms variant and K: K binary-search
// lookups (kallsyms_lookup_name + the ftrace_location check each name
// needs) against one ftrace_lookup_symbols walk over K sorted names.
//
// The variants are independent and run jobs at a time (0: GOMAXPROCS).
func RunCrossover(k *image.Kernel, ks []int, variants []kallsyms.Variant, costs *sim.CostTable, jobs int) (*CrossoverReport, error) {
	if len(ks) == 0 {
		return nil, fmt.Errorf("no K given")
	}
	rep := &CrossoverReport{Kernel: k.Name, Release: k.Config.Version, Generation: k.Config.Gen.Effective().String(), Weights: costs.Describe(), Crossover: map[string]float64{}, PerLookup: map[string]float64{}, PerVisit: map[string]float64{}}
	type variantResult struct {
		symbols int
		pts     []CrossoverRow
	}
	res := make([]variantResult, len(variants))
	err := forEachVariant(k, variants, jobs, func(vi int, v kallsyms.Variant, syms *kallsyms.Compressed, ft *ftrace.Ftrace) error {
		res[vi].symbols = syms.Tables().NumSyms
		all := TraceableFunctions(k, ft)
		var pts []CrossoverRow
		for _, K := range ks {
			if K == KMax {
				K = len(all)
			}
			if K > len(all) {
				return fmt.Errorf("--k %d exceeds the %d uniquely named traceable functions", K, len(all))
			}
			names := make([]string, 0, K)
			for _, f := range spread(all, K) {
				names = append(names, f.Name)
			}
			sort.Strings(names)
			c := sim.NewCounters(false)
			for _, n := range names {
				if a, ok := syms.LookupName(c, n); ok {
					ft.Location(c, a)
				}
			}
			look := costs.Cycles(c)
			c.Reset()
			addrs := make([]uint64, K)
			if err := ft.LookupSymbols(c, names, addrs, ftrace.LookupWalk); err != nil {
				return fmt.Errorf("crossover walk: %w", err)
			}
			walk := costs.Cycles(c)
			row := CrossoverRow{Variant: v.String(), K: K, LookupCyc: look, WalkCyc: walk, WalkVisited: c.Total(kallsyms.OpVisit), Winner: "lookups"}
			if walk < look {
				row.Winner = "walk"
			}
			pts = append(pts, row)
		}
		res[vi].pts = pts
		return nil
	})
	if err != nil {
		return nil, err
	}
	for vi, v := range variants {
		pts := res[vi].pts
		rep.Symbols = res[vi].symbols
		rep.Rows = append(rep.Rows, pts...)
		// Crossover: interpolate the first sign change of walk - lookups.
		x := -1.0
		for i := range pts {
			d := pts[i].WalkCyc - pts[i].LookupCyc
			if d < 0 {
				if i == 0 {
					x = float64(pts[i].K)
				} else {
					p := pts[i-1]
					dp := p.WalkCyc - p.LookupCyc
					x = float64(p.K) + (float64(pts[i].K-p.K))*dp/(dp-d)
				}
				break
			}
		}
		rep.Crossover[v.String()] = x
		last := pts[len(pts)-1]
		rep.PerLookup[v.String()] = last.LookupCyc / float64(last.K)
		rep.PerVisit[v.String()] = last.WalkCyc / float64(max(last.WalkVisited, 1))
	}
	return rep, nil
}

// TracingMultiRow is one variant's figures.
type TracingMultiRow struct {
	Variant     string  `json:"variant"`
	K           int     `json:"k"`
	KallsymsCyc float64 `json:"kallsyms_est_cycles"`
	FtraceCyc   float64 `json:"ftrace_est_cycles"`
	Share       float64 `json:"kallsyms_share"`
}

// RunTracingMulti models the kernel side of bpf_program__attach_tracing_multi
// (fentry/fexit multi by BTF id, Jiri Olsa's 2026 series; not in 6.1): per
// function one kallsyms_lookup_name of its BTF name, then the functions go
// into one ftrace_ops filter (ftrace_set_filter_ips) registered once —
// what the direct-call trampoline registration walks. The trampoline and
// BTF work are not modelled, so the share is of the modelled work only.
func RunTracingMulti(k *image.Kernel, K int, variants []kallsyms.Variant, costs *sim.CostTable, jobs int) ([]TracingMultiRow, error) {
	out := make([]TracingMultiRow, len(variants))
	err := forEachVariant(k, variants, jobs, func(vi int, v kallsyms.Variant, syms *kallsyms.Compressed, ft *ftrace.Ftrace) error {
		all := TraceableFunctions(k, ft)
		funcs := all
		if K > 0 {
			funcs = spread(all, K)
		}
		c := sim.NewCounters(false)
		addrs := make([]uint64, 0, len(funcs))
		for _, f := range funcs {
			a, ok := syms.LookupName(c, f.Name)
			if !ok {
				return fmt.Errorf("tracing-multi: %s not found", f.Name)
			}
			addrs = append(addrs, a)
		}
		ks := costs.Cycles(c)
		c.Reset()
		ops := ft.NewOps("bpf_tramp_multi")
		if err := ft.SetFilterIPs(c, ops, addrs); err != nil {
			return err
		}
		if err := ft.RegisterFunction(c, ops); err != nil {
			return err
		}
		fc := costs.Cycles(c)
		out[vi] = TracingMultiRow{Variant: v.String(), K: len(funcs), KallsymsCyc: ks, FtraceCyc: fc, Share: ks / (ks + fc)}
		return nil
	})
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return out, nil
}
