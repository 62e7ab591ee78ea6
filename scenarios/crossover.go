package scenarios

import (
	"errors"
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/bpf"
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
	// Includes, NotModelled and Excluded say what the two totals (lookups
	// and walk) cover: the resolution step only.
	Includes    []string `json:"total_includes"`
	NotModelled []string `json:"not_modelled"`
	Excluded    []string `json:"excluded"`

	// Weights and Costs name the weights, as BPFReport's.
	Weights string   `json:"weights"`
	Costs   CostInfo `json:"costs"`
}

// Crossover's scope: the two ways of resolving K names, nothing else.
var (
	CrossoverIncludes = []string{
		"lookups: per name kallsyms_lookup_name (the variant's search and name expansion) and the ftrace_location check of its address",
		"walk: one ftrace_lookup_symbols over K names already sorted: kallsyms_on_each_symbol's expansion of every symbol, the bsearch of each in the request, ftrace_location per match",
	}
	CrossoverExcluded = []string{
		"the sort_r of the K names the walk needs (bpf_kprobe_multi_link_attach sorts them first: in run multi's link_create)",
		"everything else an attach does (copy_user_syms, allocations, fprobe or trampoline registration, text pokes): run multi and run tracing-multi price whole attaches",
		"module symbols (K counts vmlinux functions only)",
	}
)

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
	rep := &CrossoverReport{Kernel: k.Name, Release: k.Config.Version, Generation: k.Config.Gen.Effective().String(), Weights: costs.Describe(), Crossover: map[string]float64{}, PerLookup: map[string]float64{}, PerVisit: map[string]float64{},
		Includes: CrossoverIncludes, NotModelled: []string{}, Excluded: CrossoverExcluded}
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
				return fmt.Errorf("--n %d exceeds the %d uniquely named traceable functions", K, len(all))
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

// TracingMultiComponent is one component of a tracing multi attach: one
// phase of bpf.TracingMulti's model.
type TracingMultiComponent struct {
	Name    string            `json:"name"`
	Phase   string            `json:"phase"`
	Cycles  float64           `json:"est_cycles"`
	PerFunc float64           `json:"est_cycles_per_function"`
	Ops     map[string]uint64 `json:"ops"`
}

// TracingMultiRow is one kallsyms variant's attach.
type TracingMultiRow struct {
	Variant    string                  `json:"variant"`
	K          int                     `json:"k"`
	Components []TracingMultiComponent `json:"components"`
	TotalCyc   float64                 `json:"total_est_cycles"`
	PerFunc    float64                 `json:"total_est_cycles_per_function"`
	// KallsymsCyc is the kallsyms_lookup_name component's cycles; Share
	// its share of TotalCyc, present only when the total is complete
	// (the report's NotModelled is empty).
	KallsymsCyc float64  `json:"kallsyms_est_cycles"`
	Share       *float64 `json:"kallsyms_share,omitempty"`
	Trampolines int      `json:"trampolines"`
	JITInsns    int      `json:"jit_insns"`
	ImageBytes  int      `json:"image_bytes"`
	Packs       int      `json:"prog_packs"`
	TextCopies  int      `json:"text_copies"`
	Sites       int      `json:"poked_sites"`
	Batches     int      `json:"text_poke_batches"`
}

// TracingMultiReport is run tracing-multi's output.
type TracingMultiReport struct {
	Kernel     string `json:"kernel"`
	Release    string `json:"release,omitempty"`
	Generation string `json:"generation"`
	// KRequested is --n (0: every traceable function); K the functions
	// attached (at most the image's uniquely named traceable functions).
	KRequested int `json:"k_requested"`
	K          int `json:"k"`
	NrArgs     int `json:"nr_args"`
	// Includes lists what the total includes, NotModelled what it lacks
	// of the kernel's attach (empty: the total is complete), Excluded
	// what is outside it by scope.
	Includes    []string `json:"total_includes"`
	NotModelled []string `json:"not_modelled"`
	Excluded    []string `json:"excluded"`
	// Assumptions are what the model takes where the image says nothing
	// (it has no BTF) or the kernel's state is chosen.
	Assumptions []string          `json:"assumptions"`
	Rows        []TracingMultiRow `json:"rows"`
	// Weights and Costs name the weights, as BPFReport's (the caller
	// fills them).
	Weights string   `json:"weights"`
	Costs   CostInfo `json:"costs"`
}

// Complete reports whether the total covers the whole kernel attach, so a
// share of it means something.
func (r *TracingMultiReport) Complete() bool { return len(r.NotModelled) == 0 }

// tracingMultiComponents are the report's components, in attach order.
var tracingMultiComponents = []struct {
	name  string
	phase sim.Phase
}{
	{"kallsyms_lookup_name", bpf.PhaseTMKallsyms},
	{"BTF checks", bpf.PhaseTMBTF},
	{"trampoline get/link", bpf.PhaseTMTrampoline},
	{"trampoline JIT", bpf.PhaseTMJIT},
	{"image alloc + copy", bpf.PhaseTMImage},
	{"ftrace direct add", bpf.PhaseTMFtrace},
	{"text pokes", bpf.PhaseTMTextPoke},
	{"link (once)", bpf.PhaseTMLink},
}

// TracingMultiIncludes is what run tracing-multi's total includes.
var TracingMultiIncludes = []string{
	"bpf(BPF_LINK_CREATE) → bpf_tracing_multi_attach: ids copy, check_dup_ids sort, link kvzalloc, bpf_link_prime",
	"per function bpf_check_attach_btf_id_multi: btf_id_deny, BTF type/name lookups, btf_distill_func_proto, kallsyms_lookup_name, ftrace_location",
	"per function bpf_trampoline_get (key-table walk, new trampoline) and __bpf_trampoline_link_prog → bpf_trampoline_update",
	"per function x86 arch_bpf_trampoline_size + arch_prepare_bpf_trampoline (scratch execmem page, two emission passes)",
	"per function bpf_tramp_image_alloc (bpf_prog_pack_alloc bitmap scan, new 2 MiB packs, percpu_ref_init, ksym) and bpf_arch_text_copy",
	"update_ftrace_direct_add: hash_add ×2 (64 buckets), direct_ops registration, ftrace_hash_rec_enable walk",
	"ftrace_replace_code: two record passes, per site ftrace_find_rec_direct + text poke, a batch flush per 256 sites",
}

// TracingMultiExcluded is outside the total by scope.
var TracingMultiExcluded = []string{
	"user space: libbpf's vmlinux BTF load and glob walk (collect_btf_func_ids_by_glob)",
	"the program's load and verification (bpf_check) before the attach",
	"deferred work after the syscall returns: RCU callbacks, vfree purges",
}

// TracingMultiAssumptions are run tracing-multi's choices where the
// image is silent.
func TracingMultiAssumptions(nrArgs int) []string {
	return []string{
		fmt.Sprintf("synthetic BTF (the image has none): BTF ids in address order, %d 8-byte arguments per function, no modifier or typedef chains", nrArgs),
		"btf_kfunc_check_flag: each of the 14 hooks a full 256-id kfunc set (an upper bound: the image has no kfunc sets)",
		"a fresh kernel: no other trampoline, direct call or ftrace ops; the program's own JIT image in the only pack",
		"x86-64 with the return thunk (retbleed/SRSO), no call-depth tracking, one NUMA node (2 MiB packs)",
		"the share is kallsyms_lookup_name's: ftrace_location's kallsyms_lookup_size_offset (in BTF checks and trampoline) is not in it",
	}
}

// ErrNoTracingMulti is run tracing-multi on a generation without tracing
// multi links.
var ErrNoTracingMulti = errors.New("no tracing multi link in this generation")

// TracingMultiNrArgs is the default argument count of every function of
// the synthetic BTF (the image has no BTF).
const TracingMultiNrArgs = 3

// RunTracingMulti models the kernel side of bpf_program__attach_tracing_multi
// on 7.3 (bpf.TracingMulti: fentry.multi by BTF id, Jiri Olsa's series) for
// K functions, once per kallsyms variant: every component the kernel runs
// per function and once per link, and the kallsyms_lookup_name share of
// the whole. Generations without the link (6.1, 6.12: link_create has no
// BPF_TRACE_FENTRY_MULTI) are refused with ErrNoTracingMulti: there is
// nothing of theirs to model.
//
// The image has no BTF: function i of the traceable functions (address
// order, one per address) gets BTF id i+1 and nrArgs 8-byte arguments.
func RunTracingMulti(k *image.Kernel, K, nrArgs int, variants []kallsyms.Variant, costs *sim.CostTable, jobs int) (*TracingMultiReport, error) {
	gen := k.Config.Gen.Effective()
	if gen != image.Gen73 {
		return nil, fmt.Errorf("%w: %s has no BPF_TRACE_FENTRY_MULTI (bpf_tracing_multi_attach is 7.3's; link_create refuses the attach type)", ErrNoTracingMulti, image.ReleaseLine(k.Config.Version, gen.String()))
	}
	if nrArgs < 0 || nrArgs > 6 {
		return nil, fmt.Errorf("nr_args %d: the model covers 0..6 register arguments", nrArgs)
	}
	rep := &TracingMultiReport{Kernel: k.Name, Release: k.Config.Version, Generation: gen.String(), KRequested: K, NrArgs: nrArgs,
		Includes: TracingMultiIncludes, NotModelled: []string{}, Excluded: TracingMultiExcluded, Assumptions: TracingMultiAssumptions(nrArgs)}
	out := make([]TracingMultiRow, len(variants))
	err := forEachVariant(k, variants, jobs, func(vi int, v kallsyms.Variant, syms *kallsyms.Compressed, ft *ftrace.Ftrace) error {
		// BTF has one FUNC per function body: of symbols sharing an
		// address (aliases, section markers) the first keeps it.
		var all []image.Symbol
		seen := map[uint64]bool{}
		for _, f := range TraceableFunctions(k, ft) {
			if !seen[f.Addr] {
				seen[f.Addr] = true
				all = append(all, f)
			}
		}
		id := make(map[string]uint32, len(all))
		for i, f := range all {
			id[f.Name] = uint32(i + 1)
		}
		picked := all
		if K > 0 {
			picked = spread(all, K)
		}
		funcs := make([]bpf.TracingMultiFunc, len(picked))
		for i, f := range picked {
			funcs[i] = bpf.TracingMultiFunc{ID: id[f.Name], Name: f.Name, NrArgs: nrArgs}
		}
		c := sim.NewCounters(false)
		tm := bpf.NewTracingMulti(gen, syms, ft, tracingMultiProgChunks)
		st, err := tm.Attach(c, funcs)
		if err != nil {
			return fmt.Errorf("tracing-multi: %w", err)
		}
		row := TracingMultiRow{Variant: v.String(), K: len(funcs), Trampolines: st.Trampolines, JITInsns: st.JITInsns,
			ImageBytes: st.ImageBytes, Packs: st.Packs, TextCopies: st.TextCopies, Sites: st.Direct.Sites, Batches: st.Direct.Batches}
		perPhase := map[sim.Phase]map[string]uint64{}
		for _, nz := range c.NonZero() {
			if perPhase[nz.Phase] == nil {
				perPhase[nz.Phase] = map[string]uint64{}
			}
			perPhase[nz.Phase][nz.Op.Name()] = nz.N
		}
		for _, comp := range tracingMultiComponents {
			cyc := costs.PhaseCycles(c, comp.phase)
			row.Components = append(row.Components, TracingMultiComponent{Name: comp.name, Phase: comp.phase.Name(),
				Cycles: cyc, PerFunc: cyc / float64(max(len(funcs), 1)), Ops: perPhase[comp.phase]})
			row.TotalCyc += cyc
		}
		if other := c.PhaseTotal(sim.PhaseOther); other != 0 {
			return fmt.Errorf("tracing-multi: %d ops counted outside the model's phases", other)
		}
		row.PerFunc = row.TotalCyc / float64(max(len(funcs), 1))
		row.KallsymsCyc = costs.PhaseCycles(c, bpf.PhaseTMKallsyms)
		out[vi] = row
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if rep.Complete() && out[i].TotalCyc > 0 {
			s := out[i].KallsymsCyc / out[i].TotalCyc
			out[i].Share = &s
		}
		rep.K = out[i].K
	}
	rep.Rows = out
	return rep, nil
}

// tracingMultiProgChunks is the attached program's own JIT image in the
// first bpf_prog_pack: a small fentry program (~100 bytes of x86) plus
// BPF_INSN_SAFETY, 64-byte chunks.
const tracingMultiProgChunks = 3
