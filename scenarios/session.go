package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// SessionOptions parameterise run session and run multi.
type SessionOptions struct {
	BPF      BPFOptions
	Programs int // session: programs (default 50)
	Pairs    bool
	// Multi: Pattern (glob) or Functions (K, 0 = every traceable function).
	Pattern   string
	Functions int
	Runs      []RunSpec
}

// BPFRunReport is one switch set's run.
type BPFRunReport struct {
	Name      string         `json:"name"`
	Switches  []string       `json:"switches"`
	Stages    []StageRow     `json:"stages"`
	Cycles    float64        `json:"est_cycles"`
	MS        float64        `json:"est_ms"`
	PerAttach float64        `json:"est_ms_per_attach"`
	Attaches  int            `json:"attaches"`
	OK        int            `json:"ok"`
	Errors    map[string]int `json:"errors"`
	Paths     map[string]int `json:"paths"`
	Digest    string         `json:"decisions_digest"`
	WallNS    int64          `json:"wall_ns"`
	Changed   []string       `json:"changed_vs_first,omitempty"`
	Failed    []string       `json:"failed,omitempty"` // "target: -ERR" per failed attach
	// Group: runs compared with each other (the first of a group is the
	// base): "" for session runs, "pairs", the form for multi.
	Group string `json:"group,omitempty"`
	// AttachWarnings flag a run in which every attach failed
	// (BPFAttachWarnings).
	AttachWarnings []AttachWarning `json:"attach_warnings,omitempty"`

	results []attachResult
}

// AttachWarnings returns every flagged run's warnings as "RUN: TEXT"
// lines, in run order.
func (rep *BPFReport) AttachWarnings() []string {
	return warningLines(rep.Runs, func(r *BPFRunReport) (string, []AttachWarning) { return r.Name, r.AttachWarnings })
}

// BPFReport is a session/multi report.
type BPFReport struct {
	Scenario string `json:"scenario"`
	Kernel   string `json:"kernel"`
	// Release and Generation name the kernel the run modelled; Facts the
	// build facts it decided on.
	Release    string             `json:"release,omitempty"`
	Generation string             `json:"generation"`
	Facts      []image.ConfigFact `json:"config_facts,omitempty"`
	Model      map[string]string  `json:"model"`
	// Weights names the cost table the runs were priced with
	// (sim.CostTable.Describe, as run many's); Costs the cost file, if
	// any (the caller fills it).
	Weights string         `json:"weights"`
	Costs   CostInfo       `json:"costs"`
	Params  map[string]any `json:"params"`
	// Includes lists what each run's est_cycles sums, NotModelled what
	// the kernel and libbpf do on that path that the sum lacks, Excluded
	// what is outside it by scope (TotalScope).
	Includes    []string        `json:"total_includes"`
	NotModelled []string        `json:"not_modelled"`
	Excluded    []string        `json:"excluded"`
	Runs        []*BPFRunReport `json:"runs"`
}

// TotalScope says what a run session / run multi total includes and what
// it lacks, for the scenario ("session" or "multi"), the kernel's
// generation and whether the --pairs run is there.
func TotalScope(scenario string, gen image.Generation, pairs bool) (includes, notModelled, excluded []string) {
	includes = []string{
		"libbpf 1.8 in user space: SEC() parsing, glob_match, the pattern path's file reads (fscanf, qsort, bsearch) or the exact-name path",
		"the kernel side of each file libbpf reads: /proc/kallsyms (s_show) and available_filter_functions[_addrs] (t_show)",
		"bpf(BPF_LINK_CREATE) → bpf_kprobe_multi_link_attach: copy_user_syms, sort_r, allocations, bpf_link_prime, get_modules_for_addrs (6.12+)",
		"symbol resolution: ftrace_lookup_symbols (the kallsyms walk, or 7.3's single-name fast path)",
		"register_fprobe_ips: ftrace_set_filter_ips, rethook/objpool nodes or 7.3's shared fprobe ops, register_ftrace_function's record walks, ftrace_replace_code and its text pokes (a text_poke_bp_batch every 256 sites)",
	}
	if pairs {
		includes = append(includes, "pairs: perf_event_open on the kprobe PMU (register_kprobe's pipeline) and bpf_perf_link_attach, twice per function")
	}
	// kallsyms.Compressed.ProcKallsyms has no BPF, ftrace-trampoline or
	// kprobe-insn-page symbols (the image has none to give).
	notModelled = []string{"the /proc/kallsyms lines of BPF, ftrace-trampoline and kprobe-insn-page symbols (get_ksymbol_bpf and friends) when libbpf reads it"}
	if scenario == "session" && gen.Effective() == image.Gen73 {
		notModelled = append(notModelled, "7.3's ftrace_startup_subops on the fgraph manager ops (the session links' fprobe_graph_ops): counted as one ftrace_startup")
	}
	excluded = []string{
		"the BPF object's open, load and verification (bpf_prog_load) before the attach",
		"boot (the kernel's boot phase is not in the total)",
		"deferred work after the syscalls return: RCU callbacks, link release",
	}
	return includes, notModelled, excluded
}

func (o *SessionOptions) model(why string, k *image.Kernel) map[string]string {
	kc := "none"
	if v, ok := o.BPF.Kconfig["FPROBE"]; ok {
		kc = "FPROBE=" + yn(v)
	}
	kern, fp := bpf.Describe(k.Config.Gen)
	return map[string]string{
		"libbpf":   libbpf.Version,
		"kernel":   kern,
		"fprobe":   fp,
		"fprobe_y": why,
		"kconfig":  kc,
		"image":    k.Name,
	}
}

// RunSession runs `kpsim run session`.
func RunSession(k *image.Kernel, o SessionOptions, costs *sim.CostTable) (*BPFReport, error) {
	if o.Programs <= 0 {
		return nil, fmt.Errorf("--n (programs) must be positive, got %d", o.Programs)
	}
	rep := &BPFReport{Scenario: "session", Kernel: k.Name, Release: k.Config.Version, Generation: k.Config.Gen.Effective().String(), Facts: k.Config.Facts, Weights: costs.Describe(),
		Params: map[string]any{"programs": o.Programs, "pairs": o.Pairs, "possible_cpus": o.BPF.PossibleCPUs}}
	runs := o.Runs
	if o.Pairs {
		runs = append(runs, RunSpec{Name: "pairs"})
	}
	out := make([]*BPFRunReport, len(runs))
	whys := make([]string, len(runs))
	err := forEach(len(runs), o.BPF.Jobs, func(i int) error {
		spec := runs[i]
		c := sim.NewCounters(true)
		r, why, err := bootBPF(k, spec.Switches, o.BPF, c)
		if err != nil {
			return err
		}
		whys[i] = why
		funcs := spread(TraceableFunctions(k, r.ft), o.Programs)
		c.Reset()
		start := time.Now()
		var res []attachResult
		for i, f := range funcs {
			if spec.Name == "pairs" {
				res = append(res, r.attachPair(c, i, f.Name)...)
				continue
			}
			ar := attachResult{Target: f.Name}
			l, err := r.lib.Attach(c, fmt.Sprintf("session%d", i), "kprobe.session/"+f.Name)
			if err != nil {
				ar.Err, ar.Why = errName(err)
			} else if l != nil {
				ar.Addrs, ar.Path = r.lastLinkAddrs(), l.Path
			}
			res = append(res, ar)
		}
		run := finishRun(spec, c, costs, o.BPF.Clock, res, time.Since(start))
		if spec.Name == "pairs" {
			run.Group = "pairs"
		}
		out[i] = run
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep.finish(o, k, whys, out), nil
}

// attachPair is the classic setup Andrey compared against: SEC("kprobe/f")
// and SEC("kretprobe/f"), two perf events per function.
func (r *bpfRun) attachPair(c *sim.Counters, i int, fn string) []attachResult {
	var out []attachResult
	for _, sec := range []string{"kprobe/", "kretprobe/"} {
		ar := attachResult{Target: sec + fn}
		l, err := r.lib.Attach(c, fmt.Sprintf("pair%d", i), sec+fn)
		if err != nil {
			ar.Err, ar.Why = errName(err)
		} else if l != nil {
			ar.Path = l.Path
		}
		out = append(out, ar)
	}
	return out
}

// errName is the errno an attach returned ("-ENOENT"); why is the
// longer reason when the error carries one (the kprobes core's refusals).
func errName(err error) (name, why string) {
	var e errno.Errno
	if !errors.As(err, &e) {
		return err.Error(), ""
	}
	var r *doors.Refusal
	if errors.As(err, &r) {
		why = r.Reason
	}
	return "-" + e.Name(), why
}

func finishRun(spec RunSpec, c *sim.Counters, costs *sim.CostTable, clk Clock, res []attachResult, wall time.Duration) *BPFRunReport {
	run := &BPFRunReport{Name: spec.Name, Switches: spec.Switches.Names(), Errors: map[string]int{}, Paths: map[string]int{},
		WallNS: wall.Nanoseconds(), results: res}
	run.Stages = stages(c, costs, clk, map[sim.Phase]bool{machine.PhaseBoot: true})
	for _, s := range run.Stages {
		run.Cycles += s.Cycles
	}
	run.MS = clk.MS(run.Cycles)
	run.Attaches = len(res)
	if len(res) > 0 {
		run.PerAttach = run.MS / float64(len(res))
		for i := range run.Stages {
			run.Stages[i].PerAttachMS = run.Stages[i].MS / float64(len(res))
		}
	}
	for _, a := range res {
		if a.Err == "" {
			run.OK++
			run.Paths[a.Path]++
		} else {
			run.Errors[a.Err]++
			f := a.Target + ": " + a.Err
			if a.Why != "" {
				f += " (" + a.Why + ")"
			}
			run.Failed = append(run.Failed, f)
		}
	}
	run.Digest = bpfDigest(res)
	return run
}

// finish fills in the model (the first run's, as the serial loop kept)
// and the runs, and marks what changed against each group's first run.
func (rep *BPFReport) finish(o SessionOptions, k *image.Kernel, whys []string, out []*BPFRunReport) *BPFReport {
	if len(whys) > 0 {
		rep.Model = o.model(whys[0], k)
	}
	rep.Includes, rep.NotModelled, rep.Excluded = TotalScope(rep.Scenario, k.Config.Gen, o.Pairs)
	if len(out) > 0 {
		rep.Runs = out
	}
	fp, why := FprobeFromImage(k)
	if v, set := o.BPF.Kconfig["FPROBE"]; set {
		if v != fp {
			why = fmt.Sprintf("%s; overridden by --kconfig FPROBE=%s", why, yn(v))
		}
		fp = v
	}
	for _, r := range rep.Runs {
		r.AttachWarnings = BPFAttachWarnings(r, fp, why)
	}
	markChanged(rep)
	return rep
}

func markChanged(rep *BPFReport) {
	for _, r := range rep.Runs {
		if b := rep.Base(r); b != r && r.Digest != b.Digest {
			r.Changed = diffResults(b.results, r.results)
		}
	}
}

// Base is the first run of r's group: the run r is compared with.
func (rep *BPFReport) Base(r *BPFRunReport) *BPFRunReport {
	for _, x := range rep.Runs {
		if x.Group == r.Group {
			return x
		}
	}
	return r
}

// RunMulti runs `kpsim run multi`: one kprobe.multi link over K functions,
// in the pattern form (libbpf resolves in user space, unless
// libbpf-exact-syms sends a wildcard-free pattern as syms) and the syms
// form (the kernel resolves all K names with ftrace_lookup_symbols).
func RunMulti(k *image.Kernel, o SessionOptions, costs *sim.CostTable) (*BPFReport, error) {
	if o.Functions < 0 || o.Functions > bpf.MaxKprobeMultiCnt*4 {
		return nil, fmt.Errorf("--functions %d out of range", o.Functions)
	}
	rep := &BPFReport{Scenario: "multi", Kernel: k.Name, Release: k.Config.Version, Generation: k.Config.Gen.Effective().String(), Facts: k.Config.Facts, Weights: costs.Describe(), Params: map[string]any{"pattern": o.Pattern, "functions": o.Functions}}
	type job struct {
		spec RunSpec
		form string
	}
	var jobs []job
	for _, spec := range o.Runs {
		for _, form := range []string{"pattern", "syms"} {
			if form == "pattern" && o.Pattern == "" {
				continue
			}
			jobs = append(jobs, job{spec, form})
		}
	}
	out := make([]*BPFRunReport, len(jobs))
	whys := make([]string, len(jobs))
	err := forEach(len(jobs), o.BPF.Jobs, func(i int) error {
		spec, form := jobs[i].spec, jobs[i].form
		c := sim.NewCounters(true)
		r, why, err := bootBPF(k, spec.Switches, o.BPF, c)
		if err != nil {
			return err
		}
		whys[i] = why
		funcs := TraceableFunctions(k, r.ft)
		if o.Functions > 0 {
			funcs = spread(funcs, o.Functions)
		}
		c.Reset()
		start := time.Now()
		ar := attachResult{Target: form}
		var l *libbpf.Link
		prog := &bpf.Prog{Name: "multi"}
		if form == "pattern" {
			ar.Target = "pattern " + o.Pattern
			l, err = r.lib.AttachKprobeMultiOpts(c, prog, o.Pattern, true, libbpf.KprobeMultiOpts{})
		} else {
			names := make([]string, len(funcs))
			for i, f := range funcs {
				names[i] = f.Name
			}
			ar.Target = fmt.Sprintf("syms ×%d", len(names))
			l, err = r.lib.AttachKprobeMultiOpts(c, prog, "", false, libbpf.KprobeMultiOpts{Syms: names, Cnt: len(names)})
		}
		if err != nil {
			ar.Err, ar.Why = errName(err)
		} else {
			ar.Addrs, ar.Path = r.lastLinkAddrs(), l.Path
		}
		run := finishRun(RunSpec{Name: spec.Name + " " + form, Switches: spec.Switches}, c, costs, o.BPF.Clock, []attachResult{ar}, time.Since(start))
		run.Group = form
		out[i] = run
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep.finish(o, k, whys, out), nil
}

// RunNames lists the run names.
func (rep *BPFReport) RunNames() string {
	var n []string
	for _, r := range rep.Runs {
		n = append(n, r.Name)
	}
	return strings.Join(n, ", ")
}
