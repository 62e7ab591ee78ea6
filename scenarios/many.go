package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/sizer"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// Placement says where on each target function the probe sits.
type Placement string

const (
	PlaceEntry       Placement = "entry"        // symbol+0 (ENDBR-adjusted to +4 with IBT)
	PlaceAfterFentry Placement = "after-fentry" // past the ENDBR and the __fentry__ call
	PlaceOffset      Placement = "offset"       // symbol + --offset
)

// ManyOptions parameterise the many scenario.
type ManyOptions struct {
	// N is the number of the sample's generated functions probed
	// (Targets generated).
	N         int
	Placement Placement
	Offset    int
	// Traced builds the targets with __fentry__ calls; entry probes on them
	// then take the kprobes-on-ftrace path.
	Traced bool
	// Targets says where the probed functions come from; FileTargets holds
	// a parsed list for TargetsFile.
	Targets     TargetKind
	FileTargets []Target
	// ByAddress registers all-functions targets by address instead of by
	// name (every other kind is registered by name, as the front doors do).
	ByAddress bool
	// Order is the attach order (sorted, shuffled with Seed, or as listed).
	Order Order
	// Via is the front door; "" picks register_kprobes for generated
	// targets and register_kprobe otherwise.
	Via doors.Via
	// Enable, for kprobe_events: how the events are enabled.
	Enable doors.EnableMode
	// LinesPerWrite, for kprobe_events: lines per write() (the first
	// failing line ends its write; the lines after it are lost).
	LinesPerWrite int
	// BatchReport, when positive: the cycles per probe of every batch of
	// that many accepted probes, fitted to a + b·N.
	BatchReport int
	// ImageProbes adds probes on the image's own functions (and, in mixed
	// mode, on every kind of awkward address), interleaved with the targets.
	ImageProbes int
	// Mixed draws the image probes from every placement class the
	// equivalence tests need: mid-function boundaries and non-boundaries,
	// second probes at an address (aggregation), blacklisted, jump-label,
	// static-call, bug and ftrace sites, module functions, and addresses
	// inside another probe's optimized region.
	Mixed bool
	// OptimizeEvery: the deferred optimizer runs (if kicked) after every
	// this many registrations (or enables). A fixed schedule, identical for
	// every switch setting, stands in for OPTIMIZE_DELAY's 5 jiffies.
	OptimizeEvery int
	Seed          uint64
	CPUs          int
	Image         synth.Config
	// Jobs is how many runs RunMany runs at once (0: GOMAXPROCS; 1:
	// one after another). Runs share only the read-only setup, so the
	// counts and digests are the same for every value.
	Jobs int
	// Pool, when set, bounds the runs of several RunMany calls together
	// (a sweep's points); Jobs is then ignored.
	Pool *Pool
	// Walk builds every run's machine with the simulator's straightforward
	// walks (machine.Config.Walk): the fast-path differential tests.
	Walk bool
}

// DefaultManyOptions mirrors the kernel's batch sample: 20,000 untraced
// targets probed at their entry, registered with register_kprobes.
func DefaultManyOptions() ManyOptions {
	return ManyOptions{N: 20000, Placement: PlaceEntry, Targets: TargetsGenerated, Order: OrderFile,
		Enable: doors.EnableNone, LinesPerWrite: 1000, OptimizeEvery: 256, Seed: 1, CPUs: 8, Image: synth.ConfigFor(image.Gen73)}
}

// FrontDoor returns the front door the run uses.
func (o *ManyOptions) FrontDoor() doors.Via {
	switch {
	case o.Via != "":
		return o.Via
	case o.Targets == TargetsGenerated || o.Targets == "":
		return doors.ViaRegisterKprobes
	}
	return doors.ViaRegisterKprobe
}

// Validate checks the options, naming the flag at fault.
func (o *ManyOptions) Validate() error {
	switch {
	case o.N < 1:
		return fmt.Errorf("--n: must be at least 1 (got %d)", o.N)
	case o.N > 1_000_000:
		return fmt.Errorf("--n: at most 1000000 (got %d)", o.N)
	case o.ImageProbes < 0:
		return fmt.Errorf("--image-probes: must not be negative (got %d)", o.ImageProbes)
	case o.OptimizeEvery < 1:
		return fmt.Errorf("--optimize-every: must be at least 1 (got %d)", o.OptimizeEvery)
	case o.CPUs < 1 || o.CPUs > 8192:
		return fmt.Errorf("--cpus: must be in [1, 8192] (got %d)", o.CPUs)
	case o.Offset < 0:
		return fmt.Errorf("--offset: must not be negative (got %d)", o.Offset)
	case o.Offset > 1<<32-1:
		return fmt.Errorf("--offset: at most 2^32-1 (got %d)", o.Offset)
	case o.LinesPerWrite < 1:
		return fmt.Errorf("--lines-per-write: must be at least 1 (got %d)", o.LinesPerWrite)
	case o.BatchReport < 0:
		return fmt.Errorf("--batch-report: must not be negative (got %d)", o.BatchReport)
	case o.Jobs < 0:
		return fmt.Errorf("--jobs: must be at least 1 (got %d)", o.Jobs)
	}
	switch o.Placement {
	case PlaceEntry, PlaceAfterFentry, PlaceOffset:
	default:
		return fmt.Errorf("--placement: want entry, after-fentry or offset, got %q", o.Placement)
	}
	switch o.Targets {
	case "", TargetsGenerated, TargetsAllFunctions, TargetsTraceable:
	case TargetsFile:
		if len(o.FileTargets) == 0 {
			return fmt.Errorf("--targets: the target list is empty")
		}
	default:
		return fmt.Errorf("--targets: want generated, all-functions, traceable or a file, got %q", o.Targets)
	}
	switch o.Order {
	case "", OrderFile, OrderSorted, OrderShuffle:
	default:
		return fmt.Errorf("--order: want file, sorted or shuffle, got %q", o.Order)
	}
	via := o.FrontDoor()
	switch via {
	case doors.ViaRegisterKprobes, doors.ViaRegisterKprobe, doors.ViaKprobeEvents, doors.ViaPerfKprobe:
	default:
		return fmt.Errorf("--via: want register_kprobes, register_kprobe, kprobe_events or perf_kprobe, got %q", via)
	}
	switch o.Enable {
	case "", doors.EnableNone:
	case doors.EnableEach, doors.EnableGroup:
		if via != doors.ViaKprobeEvents {
			return fmt.Errorf("--enable %s: only kprobe_events registers probes disabled (%s arms them itself)", o.Enable, via)
		}
	default:
		return fmt.Errorf("--enable: want none, each or group, got %q", o.Enable)
	}
	if o.ByAddress && o.Targets != TargetsAllFunctions {
		return fmt.Errorf("--by-address: applies to --targets all-functions only")
	}
	if o.Mixed && o.ImageProbes == 0 {
		return fmt.Errorf("--mixed: needs --image-probes")
	}
	return nil
}

// RunSpec is one run: a name and the switches it holds.
type RunSpec struct {
	Name     string
	Switches sim.Switches
}

// ProbeResult is one probe's outcome. Code is 0, the positive errno, or -1
// for a probe never attempted (a rolled-back batch, a line after a failed
// write).
type ProbeResult struct {
	Addr      uint64
	Code      int
	Optimized bool
	State     string
	Reason    string
}

// RunResult is what one run did.
type RunResult struct {
	RunOutcome
	// EstCycles is the whole estimate, every context (what `perf stat -a`
	// would count of this work); TaskCycles the registering task's share
	// (what `perf stat CMD` counts); Contexts splits EstCycles by context.
	EstCycles  float64           `json:"est_cycles"`
	TaskCycles float64           `json:"task_est_cycles"`
	Contexts   sim.ContextCycles `json:"-"`
	// Waits is the time counted ops keep a context asleep (grace
	// periods), per op and context: time, not cycles.
	Waits []sim.OpWait `json:"-"`
	// OpCycles is every op's count and cycles per context.
	OpCycles []sim.OpContextCount `json:"-"`
	WallNS   int64                `json:"wall_ns"`
	// RetainedBytes is the most the run's simulator structures held
	// (internal/sizer), sampled at the end of the attach (the optimizer
	// drained), before a failed batch rolls back, and after the teardown
	// (the tracing layer keeps a little after its events are gone).
	// Registration only adds state until the end of the attach (apart
	// from arrays it replaces, such as a resized hash table), so no
	// earlier point is higher.
	RetainedBytes uint64           `json:"sim_retained_bytes"`
	Phases        []PhaseResult    `json:"phases"`
	KernelMem     map[string]int64 `json:"kernel_bytes"`
	Growth        []*Growth        `json:"growth,omitempty"`

	Results  []ProbeResult `json:"-"`
	Counters *sim.Counters `json:"-"`
	Switches sim.Switches  `json:"-"`
}

// RunOutcome is the part of a run's result every report prints as it
// is: its name, switches, decisions, digests and counts. The JSON report
// (scenarios/report) embeds it ahead of its own forms of the rest.
type RunOutcome struct {
	Name       string            `json:"name"`
	Patches    []string          `json:"patches"`
	Registered int               `json:"registered"`
	Optimized  int               `json:"optimized"`
	OnFtrace   int               `json:"on_ftrace"`
	Rejected   map[string]int    `json:"rejected"`
	Reasons    map[string]int    `json:"reasons"`
	NotTried   int               `json:"not_attempted"`
	Digest     string            `json:"decisions_digest"`
	WhyDigest  string            `json:"reasons_digest"`
	Ops        map[string]uint64 `json:"ops"`
	TotalOps   uint64            `json:"total_ops"`

	// Targets is how many targets the run was asked to attach:
	// Registered + refused + NotTried.
	Targets int `json:"targets"`
	// AttachWarnings flag a run whose front door attached nothing or
	// left targets unattempted (see flagAttach): its figures are not
	// those of the probes it was asked for.
	AttachWarnings []AttachWarning `json:"attach_warnings,omitempty"`
}

// PhaseResult is one phase of one run.
type PhaseResult struct {
	Name       string            `json:"name"`
	Ops        uint64            `json:"ops"`
	EstCycles  float64           `json:"est_cycles"`
	TaskCycles float64           `json:"task_est_cycles"`
	Contexts   sim.ContextCycles `json:"-"`
	WallNS     int64             `json:"wall_ns"`
	Counts     map[string]uint64 `json:"counts"`
}

// ManyReport is the scenario's whole output.
type ManyReport struct {
	Scenario string         `json:"scenario"`
	Kernel   string         `json:"kernel"`
	CPU      string         `json:"cpu"` // boot CPU the kernel text was patched for (image.Config.CPU), "none" when as built
	N        int            `json:"n"`
	Weights  string         `json:"weights"`
	Via      doors.Via      `json:"via"`
	Params   map[string]any `json:"params"`
	Runs     []*RunResult   `json:"runs"`

	// Targets are the probes in attach order, for the per-probe report.
	Targets []Target `json:"-"`
	// Meta says how the report was made (the caller fills it).
	Meta *Meta `json:"-"`
	// Costs are the weights the runs were priced with.
	Costs *sim.CostTable `json:"-"`
	// Sensitivity, when asked for, says how the headline ratio moves with
	// each weight (see Sensitivity).
	Sensitivity *SensitivityReport `json:"-"`
}

// Progress is told about each run's progress (may be nil).
type Progress interface {
	Start(run string, total int)
	Update(done int)
	Done()
}

// ManySetup is the image and target list a set of runs shares.
type ManySetup struct {
	Opts    ManyOptions
	Kernel  *image.Kernel
	Targets []Target
}

// PrepareMany builds the image (with the sample's targets when they are
// generated: synth.SampleSize, 50,000 by default as kernel/kprobes_many.c
// adds, of which the first N are probed) and the target list.
func PrepareMany(o ManyOptions) (*ManySetup, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	k, _, err := synth.Generate(ManyImageConfig(o))
	if err != nil {
		return nil, err
	}
	return prepareOn(k, o)
}

// ManyImageConfig is the generator configuration PrepareMany builds the
// image with: o.Image, plus the sample's targets when they are generated.
func ManyImageConfig(o ManyOptions) synth.Config {
	cfg := o.Image
	if o.Targets == TargetsGenerated || o.Targets == "" {
		cfg.ProbeTargets, cfg.ProbeTargetsTraced = synth.SampleSize(cfg, o.N), o.Traced
	}
	return cfg
}

// PrepareManyFor builds the setup on a loaded (real) kernel: generated
// targets (the sample's synth.SampleSize functions, the first N probed)
// are appended to its text, as the sample builds them into vmlinux; other
// kinds are read off the kernel (or the file).
func PrepareManyFor(k *image.Kernel, o ManyOptions) (*ManySetup, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Targets == TargetsGenerated || o.Targets == "" {
		if err := synth.AddSample(k, o.Image, o.N, o.Traced, o.Seed); err != nil {
			return nil, err
		}
	}
	return prepareOn(k, o)
}

// PrepareManyOn builds the target list on an image that already holds
// the generated targets (synth.ProbeTargetName(0..N-1)).
func PrepareManyOn(k *image.Kernel, o ManyOptions) (*ManySetup, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return prepareOn(k, o)
}

func prepareOn(k *image.Kernel, o ManyOptions) (*ManySetup, error) {
	s := &ManySetup{Opts: o, Kernel: k}
	switch o.Targets {
	case TargetsGenerated, "":
		for i := 0; i < o.N; i++ {
			n := synth.ProbeTargetName(i)
			s.Targets = append(s.Targets, Target{Raw: n, Symbol: n, Source: "generated"})
		}
	case TargetsAllFunctions:
		s.Targets = AllFunctionTargets(k, o.ByAddress)
	case TargetsTraceable:
		m, err := machine.New(k, machine.Config{Counters: sim.NewCounters(false)})
		if err != nil {
			return nil, err
		}
		s.Targets = TraceableTargets(m)
	case TargetsFile:
		s.Targets = append([]Target(nil), o.FileTargets...)
	}
	PlaceTargets(s.Targets, k, o.Placement, o.Offset)
	if o.ImageProbes > 0 {
		extra := imageProbes(k, o)
		for i := range extra {
			t := &extra[i]
			t.Source = "image-probes"
			switch {
			case t.Symbol == "":
				t.Raw = fmt.Sprintf("0x%x", t.Addr)
			case t.Offset != 0:
				t.Raw, t.OwnOffset = fmt.Sprintf("%s+%d", t.Symbol, t.Offset), true
			default:
				t.Raw = t.Symbol
			}
		}
		// Interleave deterministically.
		rng := sim.NewRNG(o.Seed, "scenario.many.interleave")
		all := append(s.Targets, extra...)
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		s.Targets = all
	}
	OrderTargets(s.Targets, o.Order, o.Seed)
	if len(s.Targets) == 0 {
		return nil, fmt.Errorf("--targets %s: the image has no such functions", o.Targets)
	}
	if o.FrontDoor() == doors.ViaRegisterKprobes {
		for _, t := range s.Targets {
			if t.Return {
				return nil, fmt.Errorf("--via register_kprobes: %s is a return probe (register_kprobes takes none; use --via register_kprobe)", t.Source)
			}
		}
	}
	if o.BatchReport > 0 && o.BatchReport >= len(s.Targets) {
		// One batch is one point: a + b·N needs two.
		return nil, fmt.Errorf("--batch-report %d: the run has %d targets, so at most one batch of accepted probes, and a fit of a + b·N needs two; give K below %d", o.BatchReport, len(s.Targets), len(s.Targets))
	}
	s.Opts.N = len(s.Targets)
	return s, nil
}

// imageProbes draws probes on the image's own text.
func imageProbes(k *image.Kernel, o ManyOptions) []Target {
	rng := sim.NewRNG(o.Seed, "scenario.many.image-probes")
	var funcs []image.Symbol
	names := map[string]int{}
	for _, s := range k.Symbols {
		names[s.Name]++
	}
	for _, f := range k.Functions() {
		if f.Size == 0 {
			continue // a linker marker such as _stext
		}
		// Mostly unique names; a duplicated name resolves to its first
		// address, so only some of those are drawn.
		if names[f.Name] == 1 || rng.IntN(4) == 0 {
			funcs = append(funcs, f)
		}
	}
	var out []Target
	pick := func() image.Symbol { return funcs[rng.IntN(len(funcs))] }
	dec := x86.For(k.Config.Gen)
	boundary := func(f image.Symbol) uint64 {
		// a random instruction boundary (simulator decode, uncounted)
		code := k.Text(f.Addr, int(f.Size))
		var starts []int
		for off := 0; off < len(code); {
			starts = append(starts, off)
			insn, err := dec.Decode(nil, code[off:])
			if err != nil {
				break
			}
			off += insn.Len
		}
		return f.Addr + uint64(starts[rng.IntN(len(starts))])
	}
	for len(out) < o.ImageProbes {
		if !o.Mixed {
			f := pick()
			out = append(out, Target{Symbol: f.Name})
			continue
		}
		switch rng.IntN(12) {
		case 0: // function entry by name
			out = append(out, Target{Symbol: pick().Name})
		case 1: // mid-function instruction boundary, by address
			out = append(out, Target{Addr: boundary(pick())})
		case 2: // mid-function byte, often not a boundary (-EILSEQ)
			f := pick()
			out = append(out, Target{Symbol: f.Name, Offset: uint32(rng.IntN(int(f.Size)))})
		case 3: // a second probe at an earlier probe's address (aggregation)
			if len(out) > 0 {
				prev := out[rng.IntN(len(out))]
				prev.Post = rng.IntN(3) == 0
				out = append(out, prev)
			}
		case 4: // blacklisted
			if len(k.Blacklist) > 0 {
				out = append(out, Target{Addr: k.Blacklist[rng.IntN(len(k.Blacklist))]})
			}
		case 5: // a jump-label site (reserved), or a byte inside one
			j := k.JumpEntries[rng.IntN(len(k.JumpEntries))]
			out = append(out, Target{Addr: j.Code + uint64(rng.IntN(2))})
		case 6: // a static-call site
			s := k.StaticCallSites[rng.IntN(len(k.StaticCallSites))]
			out = append(out, Target{Addr: s.Addr})
		case 7: // a bug site
			b := k.BugEntries[rng.IntN(len(k.BugEntries))]
			out = append(out, Target{Addr: b.Addr})
		case 8: // an ftrace site (kprobe on ftrace), with or without post handler
			m := k.McountLocs[rng.IntN(len(k.McountLocs))]
			out = append(out, Target{Addr: m, Post: rng.IntN(2) == 0})
		case 9: // a module function, by name or mid-function address
			if len(k.Modules) > 0 {
				m := k.Modules[rng.IntN(len(k.Modules))]
				s := m.Symbols[rng.IntN(len(m.Symbols))]
				if s.IsText() && s.Size > 0 {
					if rng.IntN(2) == 0 {
						out = append(out, Target{Symbol: s.Name})
					} else {
						out = append(out, Target{Addr: boundary(s)})
					}
				}
			}
		case 10: // inside an earlier probe's would-be optimized region
			if len(out) > 0 {
				prev := out[rng.IntN(len(out))]
				if prev.Addr != 0 {
					out = append(out, Target{Addr: prev.Addr + 1 + uint64(rng.IntN(6))})
				} else {
					prev.Offset += uint32(1 + rng.IntN(8))
					out = append(out, prev)
				}
			}
		case 11: // a probe with a post handler (never optimized)
			out = append(out, Target{Symbol: pick().Name, Post: true})
		}
	}
	return out
}

// RunMany runs every spec on the setup and returns the report.
//
// The runs are independent (each boots its own machine on the shared,
// read-only setup), so they run s.Opts.Jobs at a time (s.Opts.Pool's
// bound when set); the report lists them in spec order whatever order
// they finished in, and the first failing spec's error is returned.
func RunMany(s *ManySetup, specs []RunSpec, wire machine.Wiring, costs *sim.CostTable, faults string, prog Progress) (*ManyReport, error) {
	rep := &ManyReport{Scenario: "many", Kernel: s.Kernel.Name, CPU: s.Kernel.BootCPU(), N: s.Opts.N, Weights: costs.Describe(), Via: s.Opts.FrontDoor(), Params: s.params(), Targets: s.Targets, Costs: costs}
	pool := s.Opts.Pool
	if pool == nil {
		pool = NewPool(s.Opts.Jobs)
	}
	if pool.Size() == 1 || len(specs) < 2 {
		for _, spec := range specs {
			pool.acquire()
			r, err := runOne(s, spec, wire, costs, faults, prog)
			pool.release()
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", spec.Name, err)
			}
			rep.Runs = append(rep.Runs, r)
		}
		rep.flagAttach(s.Opts)
		return rep, nil
	}
	if _, err := machine.KallsymsTables(s.Kernel); err != nil { // built once, before the runs share it
		return nil, err
	}
	var progs []Progress
	if prog != nil {
		progs = newSharedProgress(prog, len(specs), len(s.Targets))
	}
	results := make([]*RunResult, len(specs))
	errs := make([]error, len(specs))
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i, spec := range specs {
		// Specs start in order and none starts after a failure, so every
		// spec before the first failed one has run: the error reported
		// is the serial run's.
		pool.acquire()
		if failed.Load() {
			pool.release()
			break
		}
		var p Progress
		if progs != nil {
			p = progs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pool.release()
			results[i], errs[i] = runOne(s, spec, wire, costs, faults, p)
			if errs[i] != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	if progs != nil {
		prog.Done()
	}
	for i, spec := range specs {
		if errs[i] != nil {
			return nil, fmt.Errorf("run %s: %w", spec.Name, errs[i])
		}
	}
	rep.Runs = results // complete: a spec was skipped only after an earlier one failed
	rep.flagAttach(s.Opts)
	return rep, nil
}

func (s *ManySetup) params() map[string]any {
	o := s.Opts
	p := map[string]any{
		"placement": string(o.Placement), "offset": o.Offset, "traced": o.Traced,
		"image_probes": o.ImageProbes, "mixed": o.Mixed, "via": string(o.FrontDoor()),
		"optimize_every": o.OptimizeEvery, "seed": o.Seed, "cpus": o.CPUs, "probes": len(s.Targets),
		"targets": string(o.Targets), "order": string(o.Order),
	}
	if o.Targets == "" {
		p["targets"] = string(TargetsGenerated)
	}
	if o.FrontDoor() == doors.ViaKprobeEvents {
		p["enable"], p["lines_per_write"] = string(o.Enable), o.LinesPerWrite
	}
	if o.ByAddress {
		p["by_address"] = true
	}
	if o.BatchReport > 0 {
		p["batch_report"] = o.BatchReport
	}
	if o.Targets == TargetsGenerated || o.Targets == "" {
		p["sample_functions"] = synth.SampleSize(o.Image, o.N) // functions kprobes_many.c adds
	}
	return p
}

// run is one run's state while it attaches and tears down.
type run struct {
	s      *ManySetup
	m      *machine.Machine
	d      *doors.Doors
	at     []doors.Attachment
	prog   Progress
	peak   func()
	growth *growthRecorder
}

// sampleTeardown forces the retained-bytes sample after the teardown for
// every front door. By default only kprobe_events and perf_kprobe take it:
// their teardown builds what their attach did not (dyn_event removal,
// perf's close path), while register_kprobe(s)' teardown only frees (the
// probes' slots and hash/tree entries) and allocates nothing that outlives
// it, so the peak is the attach sample; TestRetainedPeakAtAttach checks
// that on mixed images. The walk is ~20 ms at 20k probes, a tenth of a run.
var sampleTeardown bool

func runOne(s *ManySetup, spec RunSpec, wire machine.Wiring, costs *sim.CostTable, faultSpec string, prog Progress) (*RunResult, error) {
	faults, err := sim.ParseFaults(faultSpec)
	if err != nil {
		return nil, err
	}
	c := sim.NewCounters(true)
	kcfg := kprobes.DefaultConfig()
	kcfg.CPUs = s.Opts.CPUs
	m, err := machine.New(s.Kernel, machine.Config{Switches: spec.Switches, Faults: faults, Kprobes: kcfg, Counters: c, Wiring: wire, Walk: s.Opts.Walk})
	if err != nil {
		return nil, err
	}
	// The run's own memory: what its simulator structures retain, walked
	// from its roots (the shared image and kallsyms tables excluded), so
	// overlapping runs do not see each other's heap.
	// Typed nils name types whose values are shared without walking any.
	sz := sizer.New(s, s.Kernel, machine.BuiltKallsymsTables(s.Kernel), costs,
		(*image.Module)(nil), (*image.Region)(nil), (*ktab.Tables)(nil), (*time.Location)(nil))
	var r *run
	var peak uint64
	sample := func() {
		peak = max(peak, sz.Measure(m, r.d, r.at, r.growth))
	}
	start := time.Now()
	// Late init: the indexes of the series are built here (before it the
	// linear scans answer). Its cost is reported in its own phase.
	if err := m.LateInit(); err != nil {
		return nil, err
	}
	r = &run{s: s, m: m, d: doors.New(m), at: make([]doors.Attachment, len(s.Targets)), prog: prog, peak: sample}
	via := s.Opts.FrontDoor()
	if via.Traced() {
		r.d.Tracing() // built before the attach, as the kernel's is at boot
	}
	if s.Opts.BatchReport > 0 {
		r.growth = newGrowthRecorder(costs, c, s.Opts.BatchReport)
	}
	res := &RunResult{RunOutcome: RunOutcome{Name: spec.Name, Patches: spec.Switches.Names(), Rejected: map[string]int{}, Reasons: map[string]int{}}, Switches: spec.Switches, Counters: c}
	if prog != nil {
		prog.Start(spec.Name, len(s.Targets))
	}
	switch via {
	case doors.ViaRegisterKprobes:
		err = r.registerBatch()
	case doors.ViaRegisterKprobe:
		err = r.registerEach()
	case doors.ViaKprobeEvents:
		err = r.kprobeEvents()
	case doors.ViaPerfKprobe:
		err = r.perfOpen()
	}
	if err != nil {
		return nil, err
	}
	if r.growth != nil {
		r.growth.finish("attach")
	}
	if via == doors.ViaKprobeEvents && s.Opts.Enable != doors.EnableNone {
		if r.growth != nil {
			r.growth.start()
		}
		r.enableEvents(true)
		if r.growth != nil {
			r.growth.finish("enable")
		}
	}
	m.KP.Drain()
	sample()
	res.Results = make([]ProbeResult, len(r.at))
	for i := range r.at {
		res.Results[i] = r.result(i)
		pr := res.Results[i]
		switch {
		case pr.Code == 0:
			res.Registered++
			if pr.Optimized {
				res.Optimized++
			}
			if pr.State == kprobes.StateFtrace.String() {
				res.OnFtrace++
			}
		case pr.Code < 0:
			res.NotTried++
		default:
			res.Rejected[errno.Errno(pr.Code).Name()]++
		}
		if pr.Reason != "" {
			res.Reasons[ReasonClass(pr.Reason)]++
		}
	}
	for _, nb := range m.KP.Bytes() {
		c.SetBytes(nb.Name, nb.Bytes)
	}
	if err := r.teardown(); err != nil {
		return nil, err
	}
	m.KP.Drain()
	if via.Traced() || sampleTeardown {
		sample()
	}
	res.WallNS = time.Since(start).Nanoseconds()
	res.RetainedBytes = peak
	if prog != nil {
		prog.Done()
	}
	if r.growth != nil {
		res.Growth = r.growth.series
	}
	res.finish(costs)
	return res, nil
}

// ReasonClass is the part of a reason that names the deciding check
// (without the detail), for the report's refusal classes.
func ReasonClass(reason string) string {
	// "check: sub-check: detail" → the checks; details start after the
	// last ": " that is followed by a lower-case word or a digit.
	parts := strings.Split(reason, ": ")
	n := len(parts)
	for n > 1 && !isCheckName(parts[n-1]) {
		n--
	}
	return strings.Join(parts[:n], ": ")
}

// isCheckName: a kernel function or chain element (identifier characters
// only), not a detail in words.
func isCheckName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '.') {
			return false
		}
	}
	return true
}

// step runs after the i-th target was handled: the optimizer on its
// schedule, progress, memory sampling, and the growth batches.
func (r *run) step(i int, accepted bool) {
	if accepted && r.growth != nil {
		r.growth.accept()
	}
	afterRegistration(r.m.KP, i, r.s.Opts.OptimizeEvery, r.prog)
}

// registerBatch is the sample's register_kprobes: the optimizer still
// runs on its schedule between the registrations.
func (r *run) registerBatch() error {
	ps := make([]doors.Probe, len(r.s.Targets))
	for i, t := range r.s.Targets {
		ps[i] = t.Probe()
	}
	return r.d.RegisterBatch(ps, r.at, func(i int) { r.step(i, true) }, r.peak)
}

// registerEach: register_kprobe (register_kretprobe) one probe at a time.
func (r *run) registerEach() error {
	for i, t := range r.s.Targets {
		a, err := r.d.Register(t.Probe())
		r.at[i] = a
		if err != nil {
			return fmt.Errorf("probe %d (%s): %w", i, t.Raw, err)
		}
		r.step(i, a.Code == 0)
	}
	return nil
}

// kprobeEvents writes the targets' lines to kprobe_events,
// LinesPerWrite lines a write; a failed line loses the rest of its write.
func (r *run) kprobeEvents() error {
	r.d.OpenKprobeEvents()
	k := r.s.Opts.LinesPerWrite
	ts := r.s.Targets
	for lo := 0; lo < len(ts); lo += k {
		hi := min(lo+k, len(ts))
		lines := make([]string, 0, hi-lo)
		for _, t := range ts[lo:hi] {
			lines = append(lines, t.EventLine())
		}
		if err := r.d.WriteEvents(lines, r.at[lo:hi]); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			r.step(i, r.at[i].Code == 0)
		}
	}
	return nil
}

// enableEvents enables (or disables) the events of the accepted lines.
func (r *run) enableEvents(enable bool) {
	r.d.EnableEvents(r.at, r.s.Opts.Enable, enable, func(n int) { r.step(n, true) })
}

// perfOpen opens one perf kprobe event per target (armed at open).
func (r *run) perfOpen() error {
	for i, t := range r.s.Targets {
		a, err := r.d.PerfAttach(t.Probe())
		if err != nil {
			return fmt.Errorf("probe %d (%s): %w", i, t.Raw, err)
		}
		r.at[i] = a
		r.step(i, a.Code == 0)
	}
	return nil
}

// result is target i's outcome after the optimizer drained.
func (r *run) result(i int) ProbeResult {
	a := r.at[i]
	pr := ProbeResult{Addr: a.Addr, Code: a.Code, Reason: a.Reason, State: "-"}
	if a.Code != 0 {
		return pr
	}
	if a.TK != nil && a.TK.Pending() {
		pr.State = "pending"
		return pr
	}
	if a.Kp == nil {
		return pr
	}
	pr.Addr = a.Kp.Addr
	st := a.Kp.State()
	pr.State = st.String()
	pr.Optimized = st == kprobes.StateOptimized
	if !pr.Optimized && a.Reason == "" {
		pr.Reason = a.Kp.Why().String()
	}
	return pr
}

// teardown undoes the attach the way its front door does.
func (r *run) teardown() error {
	return r.d.Detach(r.s.Opts.FrontDoor(), r.at, r.s.Opts.Enable, r.s.Opts.LinesPerWrite)
}

func afterRegistration(kp *kprobes.Kprobes, i, every int, prog Progress) {
	if (i+1)%every == 0 {
		if kp.KickPending() {
			kp.RunOptimizer()
		}
		if prog != nil {
			prog.Update(i + 1)
		}
	}
}

func (r *RunResult) finish(costs *sim.CostTable) {
	c := r.Counters
	r.Ops = map[string]uint64{}
	perPhase := map[sim.Phase]*PhaseResult{}
	for _, nz := range c.NonZero() {
		name := nz.Op.Name()
		r.Ops[name] += nz.N
		pr := perPhase[nz.Phase]
		if pr == nil {
			pr = &PhaseResult{Name: nz.Phase.Name(), Counts: map[string]uint64{}}
			perPhase[nz.Phase] = pr
		}
		pr.Counts[name] += nz.N
		if nz.Op.Info().Metric {
			continue // reported, but not an operation: out of the totals
		}
		r.TotalOps += nz.N
		pr.Ops += nz.N
	}
	for ph, pr := range perPhase {
		pr.EstCycles = costs.PhaseCycles(c, ph)
		pr.Contexts = costs.PhaseContextCycles(c, ph)
		pr.TaskCycles = pr.Contexts.Task()
		pr.WallNS = c.Wall(ph).Nanoseconds()
	}
	for _, name := range PhaseNames() {
		if ph, _ := sim.LookupPhase(name); perPhase[ph] != nil {
			r.Phases = append(r.Phases, *perPhase[ph])
		}
	}
	r.EstCycles = costs.Cycles(c)
	r.Contexts = costs.ContextCycles(c)
	r.TaskCycles = r.Contexts.Task()
	r.Waits = sim.Waits(c)
	r.OpCycles = costs.OpContextCounts(c)
	r.KernelMem = map[string]int64{}
	for _, nb := range c.Bytes() {
		r.KernelMem[nb.Name] = nb.Bytes
	}
	r.Digest = digest(r.Results)
	r.WhyDigest = whyDigest(r.Results)
}

// digest hashes every probe's address, result code and optimized flag in
// registration order.
func digest(rs []ProbeResult) string {
	h := sha256.New()
	var b [17]byte
	for _, r := range rs {
		binary.LittleEndian.PutUint64(b[0:], r.Addr)
		binary.LittleEndian.PutUint64(b[8:], uint64(int64(r.Code)))
		b[16] = 0
		if r.Optimized {
			b[16] = 1
		}
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// whyDigest hashes every probe's state and reason in registration order:
// the proof that a switch changed no reason.
func whyDigest(rs []ProbeResult) string {
	h := sha256.New()
	for _, r := range rs {
		fmt.Fprintf(h, "%s\x00%s\x00", r.State, r.Reason)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SameDecisions reports the first probe whose outcome differs between two runs.
func SameDecisions(a, b *RunResult) (int, bool) {
	if len(a.Results) != len(b.Results) {
		return 0, false
	}
	for i := range a.Results {
		if a.Results[i] != b.Results[i] {
			return i, false
		}
	}
	return -1, true
}
