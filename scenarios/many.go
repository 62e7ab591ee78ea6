package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

func init() {
	Register(Info{Name: "many", Doc: "the batch kprobe sample: N generated functions, one kprobe each, register_kprobes then unregister_kprobes"})
}

// Placement says where on each target function the probe sits.
type Placement string

const (
	PlaceEntry       Placement = "entry"        // symbol+0 (ENDBR-adjusted to +4 with IBT)
	PlaceAfterFentry Placement = "after-fentry" // past the ENDBR and the __fentry__ call
	PlaceOffset      Placement = "offset"       // symbol + --offset
)

// ManyOptions parameterise the many scenario.
type ManyOptions struct {
	N         int
	Placement Placement
	Offset    int
	// Traced builds the targets with __fentry__ calls; entry probes on them
	// then take the kprobes-on-ftrace path.
	Traced bool
	// AllFunctions probes every function of the image instead of N
	// generated targets (what "trace everything" tools do).
	AllFunctions bool
	// ImageProbes adds probes on the image's own functions (and, in mixed
	// mode, on every kind of awkward address), interleaved with the targets.
	ImageProbes int
	// Mixed draws the image probes from every placement class the
	// equivalence tests need: mid-function boundaries and non-boundaries,
	// second probes at an address (aggregation), blacklisted, jump-label,
	// static-call, bug and ftrace sites, module functions, and addresses
	// inside another probe's optimized region.
	Mixed bool
	// Batch registers with register_kprobes (all or nothing, as the sample
	// does); otherwise register_kprobe one by one.
	Batch bool
	// OptimizeEvery: the deferred optimizer runs (if kicked) after every
	// this many registrations. A fixed schedule, identical for every
	// switch setting, stands in for OPTIMIZE_DELAY's 5 jiffies.
	OptimizeEvery int
	Seed          uint64
	CPUs          int
	Image         synth.Config
}

// DefaultManyOptions mirrors the kernel's batch sample: 20,000 untraced
// targets probed at their entry, registered with register_kprobes.
func DefaultManyOptions() ManyOptions {
	return ManyOptions{N: 20000, Placement: PlaceEntry, Batch: true, OptimizeEvery: 256, Seed: 1, CPUs: 8, Image: synth.DefaultConfig()}
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
	}
	switch o.Placement {
	case PlaceEntry, PlaceAfterFentry, PlaceOffset:
	default:
		return fmt.Errorf("--placement: want entry, after-fentry or offset, got %q", o.Placement)
	}
	return nil
}

// RunSpec is one run: a name and the switches it holds.
type RunSpec struct {
	Name     string
	Switches sim.Switches
}

// ProbeResult is one probe's outcome.
type ProbeResult struct {
	Addr      uint64
	Code      int // 0 or the positive errno
	Optimized bool
}

// RunResult is what one run did.
type RunResult struct {
	Name       string            `json:"name"`
	Patches    []string          `json:"patches"`
	Registered int               `json:"registered"`
	Optimized  int               `json:"optimized"`
	Rejected   map[string]int    `json:"rejected"`
	Digest     string            `json:"decisions_digest"`
	Ops        map[string]uint64 `json:"ops"`
	TotalOps   uint64            `json:"total_ops"`
	EstCycles  float64           `json:"est_cycles"`
	WallNS     int64             `json:"wall_ns"`
	PeakBytes  uint64            `json:"peak_bytes"`
	Phases     []PhaseResult     `json:"phases"`
	KernelMem  map[string]int64  `json:"kernel_bytes"`

	Results  []ProbeResult `json:"-"`
	Counters *sim.Counters `json:"-"`
	Switches sim.Switches  `json:"-"`
}

// PhaseResult is one phase of one run.
type PhaseResult struct {
	Name      string            `json:"name"`
	Ops       uint64            `json:"ops"`
	EstCycles float64           `json:"est_cycles"`
	WallNS    int64             `json:"wall_ns"`
	Counts    map[string]uint64 `json:"counts"`
}

// ManyReport is the scenario's whole output.
type ManyReport struct {
	Scenario string         `json:"scenario"`
	Kernel   string         `json:"kernel"`
	N        int            `json:"n"`
	Weights  string         `json:"weights"`
	Params   map[string]any `json:"params"`
	Runs     []*RunResult   `json:"runs"`
}

// Progress is told about each run's progress (may be nil).
type Progress interface {
	Start(run string, total int)
	Update(done int)
	Done()
}

// ManySetup is the image and probe list a set of runs shares.
type ManySetup struct {
	Opts   ManyOptions
	Kernel *image.Kernel
	Probes []ProbeSpec
}

// ProbeSpec is one probe to register: by symbol (+offset) or by address.
type ProbeSpec struct {
	Symbol string
	Offset uint32
	Addr   uint64
	Post   bool // has a post handler (never optimized)
}

// PrepareMany builds the image (with the N targets) and the probe list.
func PrepareMany(o ManyOptions) (*ManySetup, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg := o.Image
	cfg.ProbeTargets, cfg.ProbeTargetsTraced = o.N, o.Traced
	k, _, err := synth.Generate(cfg)
	if err != nil {
		return nil, err
	}
	return PrepareManyOn(k, o)
}

// PrepareManyFor builds the setup on a loaded (real) kernel: the N targets
// are appended to its text, as the sample builds them into vmlinux, or,
// with AllFunctions, every function is probed at its entry.
func PrepareManyFor(k *image.Kernel, o ManyOptions) (*ManySetup, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.AllFunctions {
		s := &ManySetup{Opts: o, Kernel: k}
		for _, f := range k.Functions() {
			if f.Size > 0 {
				s.Probes = append(s.Probes, ProbeSpec{Addr: f.Addr})
			}
		}
		s.Opts.N = len(s.Probes)
		return s, nil
	}
	if _, err := synth.AddProbeTargets(k, nil, o.N, o.Traced, o.Seed); err != nil {
		return nil, err
	}
	return PrepareManyOn(k, o)
}

// PrepareManyOn builds the probe list on an image that already holds the
// targets (synth.ProbeTargetName(0..N-1)).
func PrepareManyOn(k *image.Kernel, o ManyOptions) (*ManySetup, error) {
	s := &ManySetup{Opts: o, Kernel: k}
	var off uint32
	switch o.Placement {
	case PlaceAfterFentry:
		if k.Config.IBT {
			off += 4
		}
		if o.Traced {
			off += 5
		}
	case PlaceOffset:
		off = uint32(o.Offset)
	}
	for i := 0; i < o.N; i++ {
		s.Probes = append(s.Probes, ProbeSpec{Symbol: synth.ProbeTargetName(i), Offset: off})
	}
	if o.ImageProbes > 0 {
		extra := imageProbes(k, o)
		// Interleave deterministically.
		rng := sim.NewRNG(o.Seed, "scenario.many.interleave")
		all := append(s.Probes, extra...)
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		s.Probes = all
	}
	return s, nil
}

// imageProbes draws probes on the image's own text.
func imageProbes(k *image.Kernel, o ManyOptions) []ProbeSpec {
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
	var out []ProbeSpec
	pick := func() image.Symbol { return funcs[rng.IntN(len(funcs))] }
	boundary := func(f image.Symbol) uint64 {
		// a random instruction boundary (simulator decode, uncounted)
		code := k.Text(f.Addr, int(f.Size))
		var starts []int
		for off := 0; off < len(code); {
			starts = append(starts, off)
			insn, err := x86.Decode(nil, code[off:])
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
			out = append(out, ProbeSpec{Symbol: f.Name})
			continue
		}
		switch rng.IntN(12) {
		case 0: // function entry by name
			out = append(out, ProbeSpec{Symbol: pick().Name})
		case 1: // mid-function instruction boundary, by address
			out = append(out, ProbeSpec{Addr: boundary(pick())})
		case 2: // mid-function byte, often not a boundary (-EILSEQ)
			f := pick()
			out = append(out, ProbeSpec{Symbol: f.Name, Offset: uint32(rng.IntN(int(f.Size)))})
		case 3: // a second probe at an earlier probe's address (aggregation)
			if len(out) > 0 {
				prev := out[rng.IntN(len(out))]
				prev.Post = rng.IntN(3) == 0
				out = append(out, prev)
			}
		case 4: // blacklisted
			if len(k.Blacklist) > 0 {
				out = append(out, ProbeSpec{Addr: k.Blacklist[rng.IntN(len(k.Blacklist))]})
			}
		case 5: // a jump-label site (reserved), or a byte inside one
			j := k.JumpEntries[rng.IntN(len(k.JumpEntries))]
			out = append(out, ProbeSpec{Addr: j.Code + uint64(rng.IntN(2))})
		case 6: // a static-call site
			s := k.StaticCallSites[rng.IntN(len(k.StaticCallSites))]
			out = append(out, ProbeSpec{Addr: s.Addr})
		case 7: // a bug site
			b := k.BugEntries[rng.IntN(len(k.BugEntries))]
			out = append(out, ProbeSpec{Addr: b.Addr})
		case 8: // an ftrace site (kprobe on ftrace), with or without post handler
			m := k.McountLocs[rng.IntN(len(k.McountLocs))]
			out = append(out, ProbeSpec{Addr: m, Post: rng.IntN(2) == 0})
		case 9: // a module function, by name or mid-function address
			if len(k.Modules) > 0 {
				m := k.Modules[rng.IntN(len(k.Modules))]
				s := m.Symbols[rng.IntN(len(m.Symbols))]
				if s.IsText() && s.Size > 0 {
					if rng.IntN(2) == 0 {
						out = append(out, ProbeSpec{Symbol: s.Name})
					} else {
						out = append(out, ProbeSpec{Addr: boundary(s)})
					}
				}
			}
		case 10: // inside an earlier probe's would-be optimized region
			if len(out) > 0 {
				prev := out[rng.IntN(len(out))]
				if prev.Addr != 0 {
					out = append(out, ProbeSpec{Addr: prev.Addr + 1 + uint64(rng.IntN(6))})
				} else {
					prev.Offset += uint32(1 + rng.IntN(8))
					out = append(out, prev)
				}
			}
		case 11: // a probe with a post handler (never optimized)
			out = append(out, ProbeSpec{Symbol: pick().Name, Post: true})
		}
	}
	return out
}

// Wiring builds the subsystems one run's kernel uses; scenarios share it.
type Wiring func(k *image.Kernel, sw sim.Switches, c *sim.Counters, faults *sim.Faults) (kprobes.Deps, func() error, error)

// RunMany runs every spec on the setup and returns the report.
func RunMany(s *ManySetup, specs []RunSpec, wire Wiring, costs *sim.CostTable, faults string, prog Progress) (*ManyReport, error) {
	rep := &ManyReport{Scenario: "many", Kernel: s.Kernel.Name, N: s.Opts.N, Weights: costs.Describe(), Params: s.params()}
	for _, spec := range specs {
		r, err := runOne(s, spec, wire, costs, faults, prog)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", spec.Name, err)
		}
		rep.Runs = append(rep.Runs, r)
	}
	return rep, nil
}

func (s *ManySetup) params() map[string]any {
	o := s.Opts
	return map[string]any{
		"placement": string(o.Placement), "offset": o.Offset, "traced": o.Traced,
		"image_probes": o.ImageProbes, "mixed": o.Mixed, "batch": o.Batch,
		"optimize_every": o.OptimizeEvery, "seed": o.Seed, "cpus": o.CPUs, "probes": len(s.Probes),
		"targets": map[bool]string{true: "all-functions", false: "generated"}[o.AllFunctions],
	}
}

func runOne(s *ManySetup, spec RunSpec, wire Wiring, costs *sim.CostTable, faultSpec string, prog Progress) (*RunResult, error) {
	faults, err := sim.ParseFaults(faultSpec)
	if err != nil {
		return nil, err
	}
	c := sim.NewCounters(true)
	deps, lateInit, err := wire(s.Kernel, spec.Switches, c, faults)
	if err != nil {
		return nil, err
	}
	cfg := kprobes.DefaultConfig()
	cfg.CPUs = s.Opts.CPUs
	kp, err := kprobes.New(deps, cfg, spec.Switches, c)
	if err != nil {
		return nil, err
	}
	kp.Faults = faults
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	start := time.Now()
	// Late init: the indexes of the series are built here (before it the
	// linear scans answer). Its cost is reported in its own phase.
	if lateInit != nil {
		prev := c.Enter(PhaseLateInit)
		if err := lateInit(); err != nil {
			return nil, err
		}
		c.Enter(prev)
	}

	probes := make([]*kprobes.Kprobe, len(s.Probes))
	for i, ps := range s.Probes {
		probes[i] = &kprobes.Kprobe{SymbolName: ps.Symbol, Offset: ps.Offset, Addr: ps.Addr, HasPostHandler: ps.Post}
	}
	res := &RunResult{Name: spec.Name, Patches: spec.Switches.Names(), Rejected: map[string]int{}, Switches: spec.Switches, Counters: c}
	res.Results = make([]ProbeResult, len(probes))
	if prog != nil {
		prog.Start(spec.Name, len(probes))
	}
	codeOf := func(err error) (int, error) {
		if err == nil {
			return 0, nil
		}
		var e kprobes.Errno
		if errors.As(err, &e) {
			return int(e), nil
		}
		return 0, err // a kernel BUG or a model fault: the run stops
	}
	var registered []*kprobes.Kprobe
	if s.Opts.Batch {
		// register_kprobes: the optimizer still runs on its schedule, so
		// the batch is registered in steps of OptimizeEvery probes with
		// the optimizer in between; the first failure unregisters all.
		failAt, failErr := -1, error(nil)
		for i := 0; i < len(probes) && failAt < 0; i++ {
			if err := kp.RegisterKprobe(probes[i]); err != nil {
				failAt, failErr = i, err
				break
			}
			afterRegistration(kp, i, s.Opts.OptimizeEvery, prog, sample)
		}
		if failAt >= 0 {
			code, err := codeOf(failErr)
			if err != nil {
				return nil, err
			}
			kp.UnregisterKprobes(probes[:failAt])
			for i := range probes {
				res.Results[i] = ProbeResult{Addr: probes[i].Addr}
				if i >= failAt {
					res.Results[i].Code = -1 // not attempted / rolled back
				}
			}
			res.Results[failAt].Code = code
			res.Rejected[kprobes.Errno(code).Name()]++
		} else {
			registered = probes
		}
	} else {
		for i, p := range probes {
			code, err := codeOf(kp.RegisterKprobe(p))
			if err != nil {
				return nil, fmt.Errorf("probe %d (%s+%d @%#x): %w", i, p.SymbolName, p.Offset, p.Addr, err)
			}
			res.Results[i] = ProbeResult{Addr: p.Addr, Code: code}
			if code == 0 {
				registered = append(registered, p)
			} else {
				res.Rejected[kprobes.Errno(code).Name()]++
			}
			afterRegistration(kp, i, s.Opts.OptimizeEvery, prog, sample)
		}
	}
	kp.Drain()
	sample()
	for i, p := range probes {
		if s.Opts.Batch && res.Results[i].Code != 0 {
			continue
		}
		res.Results[i].Addr = p.Addr
		res.Results[i].Optimized = p.Optimized() || (p.Parent() != nil && p.Parent().Optimized())
		if res.Results[i].Code == 0 {
			res.Registered++
			if res.Results[i].Optimized {
				res.Optimized++
			}
		}
	}
	for _, nb := range kp.Bytes() {
		c.SetBytes(nb.Name, nb.Bytes)
	}
	kp.UnregisterKprobes(registered)
	kp.Drain()
	sample()
	res.WallNS = time.Since(start).Nanoseconds()
	res.PeakBytes = peak - min(base, peak)
	if prog != nil {
		prog.Done()
	}
	res.finish(costs)
	return res, nil
}

func afterRegistration(kp *kprobes.Kprobes, i, every int, prog Progress, sample func()) {
	if (i+1)%every == 0 {
		if kp.KickPending() {
			kp.RunOptimizer()
		}
		if prog != nil {
			prog.Update(i + 1)
		}
	}
	if (i+1)%4096 == 0 {
		sample()
	}
}

// PhaseLateInit holds the late_initcall work (building the indexes).
var PhaseLateInit = sim.NewPhase("late_init", "late_initcall: building the address indexes of the series")

func (r *RunResult) finish(costs *sim.CostTable) {
	c := r.Counters
	ops, phases := sim.Ops(), sim.Phases()
	r.Ops = map[string]uint64{}
	perPhase := map[sim.Phase]*PhaseResult{}
	for _, nz := range c.NonZero() {
		name := ops[nz.Op].Name
		r.Ops[name] += nz.N
		pr := perPhase[nz.Phase]
		if pr == nil {
			pr = &PhaseResult{Name: phases[nz.Phase].Name, Counts: map[string]uint64{}}
			perPhase[nz.Phase] = pr
		}
		pr.Counts[name] += nz.N
		if ops[nz.Op].Metric {
			continue // reported, but not an operation: out of the totals
		}
		r.TotalOps += nz.N
		pr.Ops += nz.N
	}
	for ph, pr := range perPhase {
		pr.EstCycles = costs.PhaseCycles(c, ph)
		pr.WallNS = c.Wall(ph).Nanoseconds()
	}
	for ph := range phases {
		if pr := perPhase[sim.Phase(ph)]; pr != nil {
			r.Phases = append(r.Phases, *pr)
		}
	}
	r.EstCycles = costs.Cycles(c)
	r.KernelMem = map[string]int64{}
	for _, nb := range c.Bytes() {
		r.KernelMem[nb.Name] = nb.Bytes
	}
	r.Digest = digest(r.Results)
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

// AblationSpecs returns the runs --ablation adds: every switch alone (an
// iterator switch with the kprobe-tree it needs) and, for the series'
// switches, the series minus that switch (minus kprobe-tree drops the
// iterators too).
func AblationSpecs() []RunSpec {
	var out []RunSpec
	for _, s := range sim.AllSwitches() {
		set := s.Closure()
		out = append(out, RunSpec{Name: set.Name(), Switches: set})
	}
	for _, s := range sim.PresetSeries.Set.List() {
		set := sim.PresetSeries.Set.Without(s)
		for _, d := range s.Dependents().List() {
			set = set.Without(d)
		}
		out = append(out, RunSpec{Name: "series-" + s.String(), Switches: set})
	}
	return out
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
