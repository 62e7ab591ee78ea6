// Package machine boots one modelled kernel: an image, the subsystems the
// kprobes paths call (kallsyms, ftrace, the jump-label / static-call / bug /
// blacklist checks, the exception tables) in the forms a switch set selects,
// the kprobes state, its counters and fault plan, and the late_initcall that
// builds the series' indexes.
//
// Linux reaches the state a registration meets in three steps: the boot
// initialises every table (populate_kprobe_blacklist, ftrace_init's records,
// jump_label_init, static_call_init), free_initmem drops init text and its
// ftrace records, and late_initcall runs. Scenarios, front ends (tracefs,
// perf, BPF) and tests all need that same booted kernel, so it is built here
// once instead of in each scenario.
package machine

import (
	"fmt"
	"sync"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/bug"
	"github.com/kpsim/kpsim/extable"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/jumplabel"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/kprobes/blacklist"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/staticcall"
)

// PhaseBoot holds boot-time work a run's kernel does before any probe
// (populate_kprobe_blacklist and the like).
var PhaseBoot = sim.NewPhase("boot", "boot-time initialisation (populate_kprobe_blacklist, ftrace records)")

// PhaseLateInit holds the late_initcall work (building the indexes).
var PhaseLateInit = sim.NewPhase("late_init", "late_initcall: building the address indexes of the series")

// KallsymsBuildOptions are the scripts/kallsyms flags of k's generation
// as Debian builds x86-64 (6.1 and 6.12: KALLSYMS_ALL, ABSOLUTE_PERCPU,
// BASE_RELATIVE; 7.3: KALLSYMS_ALL, PC-relative offsets).
func KallsymsBuildOptions(k *image.Kernel) ktab.Options { return ktab.OptionsFor(k.Config.Gen) }

// The kallsyms tables the build would embed in this image: built once per
// image, in its Derived store (simulator data; the tables never change).
type ksymsKey struct{}

// ksymsSlot holds an image's tables once built or given (UseKallsymsTables).
type ksymsSlot struct {
	mu sync.Mutex
	t  *ktab.Tables
}

func ksymsOf(k *image.Kernel) *ksymsSlot {
	return sim.DerivedValue(k.Derived(), ksymsKey{}, func() *ksymsSlot { return &ksymsSlot{} })
}

// KallsymsTables returns the compressed kallsyms tables of k, built as
// scripts/kallsyms builds them for a Debian 6.1 x86-64 kernel.
func KallsymsTables(k *image.Kernel) (*ktab.Tables, error) {
	s := ksymsOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t != nil {
		return s.t, nil
	}
	t, err := ktab.Build(SymbolsOf(k), KallsymsBuildOptions(k))
	if err != nil {
		return nil, fmt.Errorf("kallsyms tables of %s: %w", k.Name, err)
	}
	s.t = t
	return t, nil
}

// BuiltKallsymsTables returns k's tables if KallsymsTables built (or was
// given) them, else nil.
func BuiltKallsymsTables(k *image.Kernel) *ktab.Tables {
	s := ksymsOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// UseKallsymsTables makes t the tables KallsymsTables returns for k (a
// cache read them back; they must be what ktab.Build makes of
// SymbolsOf(k) with KallsymsBuildOptions).
func UseKallsymsTables(k *image.Kernel, t *ktab.Tables) {
	s := ksymsOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t
}

// SymbolsOf lists k's vmlinux symbols as scripts/kallsyms reads them from
// `nm -n` (address order, the image's own types; per-cpu symbols a
// stripped image's tables list as 'A' as ktab.BuildInput says for k's
// generation).
func SymbolsOf(k *image.Kernel) []ktab.Symbol {
	out := make([]ktab.Symbol, 0, len(k.Symbols))
	for _, s := range k.Symbols {
		out = append(out, ktab.Symbol{Addr: s.Addr, Type: byte(s.Type), Name: s.Name})
	}
	return ktab.BuildInput(KallsymsBuildOptions(k), out)
}

// bugAdapter turns bug.Table's entry-returning FindBug into the predicate
// check_kprobe_address_safe uses.
type bugAdapter struct{ t *bug.Table }

func (b bugAdapter) FindBug(c *sim.Counters, addr uint64) bool { return b.t.FindBug(c, addr) != nil }

// extableAdapter: search_exception_tables as the predicate its callers test.
type extableAdapter struct{ e *extable.Extable }

func (x extableAdapter) SearchExceptionTables(c *sim.Counters, addr uint64) bool {
	return x.e.Search(c, addr) != nil
}

// Subsystems are what a Wiring builds: the interfaces kprobes calls, the
// concrete models behind them (nil when a test wiring supplies others) and
// the late-init hook that builds the indexes.
type Subsystems struct {
	kprobes.Deps
	Syms       *kallsyms.Compressed
	Ftrace     *ftrace.Ftrace
	JumpLabel  *jumplabel.Table
	StaticCall *staticcall.Table
	Bugs       *bug.Table
	Blacklist  *blacklist.List
	// LateInit runs the late_initcalls (nil: none).
	LateInit func() error
}

// Wiring builds the subsystems one run's kernel uses. walk is
// Config.Walk: the subsystems walk what the kernel walks instead of
// answering from the simulator's shortcuts. Tests substitute their own.
type Wiring func(k *image.Kernel, sw sim.Switches, c *sim.Counters, faults *sim.Faults, walk bool) (*Subsystems, error)

// Wire is the real wiring: kallsyms over the compressed tables, the
// jump-label / static-call / bug / blacklist models in the forms the
// switches select, ftrace after free_initmem, the exception tables.
func Wire(k *image.Kernel, sw sim.Switches, c *sim.Counters, faults *sim.Faults, walk bool) (*Subsystems, error) {
	state := func() boot.State { return boot.Running }
	tables, err := KallsymsTables(k)
	if err != nil {
		return nil, err
	}
	v := kallsyms.Variant{TokenCmp: sw.Has(sim.KallsymsTokenCmp)}
	if sw.Has(sim.KallsymsOffsetIndex) {
		v.Index = kallsyms.IndexOffsets3
	}
	syms, err := kallsyms.NewCompressed(tables, v, kallsyms.CompressedOptions{Modules: k.Modules, Faults: faults})
	if err != nil {
		return nil, err
	}
	syms.RecordMemory(c)
	if !walk {
		syms.EnableFastScan() // counts only: identical counts, no walking
	}
	prev := c.Enter(PhaseBoot)
	defer c.Enter(prev)
	jl, err := jumplabel.New(k, sw, faults, state)
	if err != nil {
		return nil, err
	}
	sc, err := staticcall.New(k, sw, faults, state)
	if err != nil {
		return nil, err
	}
	bt, err := bug.New(k, sw, faults)
	if err != nil {
		return nil, err
	}
	bt.FinalizeModules(c) // module_bug_finalize at each module's load (module-bug-index)
	bl, err := blacklist.New(c, k, sw, faults, syms)
	if err != nil {
		return nil, err
	}
	// The boot records are the same for every run on k (the resolver is
	// built from k's cached kallsyms tables): built once, copied per run.
	var ftSrc any
	if !walk {
		ftSrc = tables
	}
	ft, err := ftrace.NewShared(k, syms, faults, ftSrc)
	if err != nil {
		return nil, err
	}
	if walk {
		ft.WalkRecords()
	}
	// The runs happen at SYSTEM_RUNNING: init memory (and its ftrace
	// records) is gone.
	ft.FreeInitMem()
	ex, err := extable.New(k)
	if err != nil {
		return nil, err
	}
	// Runs never patch text or change tables after this point: the
	// simulator may answer linear walks from sorted shadows (identical
	// counts; each package's TestFastScanCountsMatchWalk proves it).
	// (Config.Walk keeps the walks, for the differential tests.)
	if !walk {
		jl.EnableFastScan()
		sc.EnableFastScan()
		bt.EnableFastScan()
		bl.EnableFastScan()
	}
	deps := kprobes.Deps{
		Image: k, Syms: syms, Ftrace: ft, Extable: extableAdapter{ex},
		JumpLabel: jl, StaticCall: sc, Bugs: bugAdapter{bt}, Blacklist: bl,
	}
	lateInit := func() error {
		// late_initcall: each index is built (or its allocation fails and
		// the linear scan stays); errors here are model faults, not
		// injected ones.
		for _, f := range []func(*sim.Counters) error{jl.LateInit, sc.LateInit, bt.LateInit, bl.LateInit} {
			if err := f(c); err != nil {
				return err
			}
		}
		return nil
	}
	return &Subsystems{Deps: deps, Syms: syms, Ftrace: ft, JumpLabel: jl, StaticCall: sc, Bugs: bt, Blacklist: bl, LateInit: lateInit}, nil
}

// Config chooses how a machine is built.
type Config struct {
	Switches sim.Switches
	// Faults is the fault plan (nil: none).
	Faults *sim.Faults
	// Kprobes is the kprobes configuration (CPUs, preemption, ...).
	Kprobes kprobes.Config
	// Counters receives every count (nil: new counters with timing).
	Counters *sim.Counters
	// Wiring builds the subsystems (nil: Wire).
	Wiring Wiring
	// Walk makes every model walk what the kernel walks (hash chains,
	// slot pages, linear table scans, every decode) instead of answering
	// from the simulator's indexes and memos: the same counts, decisions
	// and reasons, slower. The differential tests' reference.
	Walk bool
	// WrapTree, if set, wraps the kprobe registry's P4 tree when it is
	// built (tests inject a model bug under the range iterators with it).
	WrapTree func(kprobes.AddrTree) kprobes.AddrTree
}

// DefaultConfig is Debian 6.1's kprobes configuration with no switch on.
func DefaultConfig() Config { return Config{Kprobes: kprobes.DefaultConfig()} }

// Machine is one booted kernel. Not safe for concurrent use: every call is
// made under the modelled kernel's mutexes.
type Machine struct {
	Kernel   *image.Kernel
	Switches sim.Switches
	C        *sim.Counters
	Faults   *sim.Faults
	Deps     kprobes.Deps
	KP       *kprobes.Kprobes
	// Syms and Ftrace are the concrete subsystems behind Deps (nil when a
	// test wiring supplies others).
	Syms   *kallsyms.Compressed
	Ftrace *ftrace.Ftrace
	// The reservation checks behind Deps (nil when a test wiring supplies
	// others); CheckInvariants compares their late-init indexes with
	// their tables.
	JumpLabel  *jumplabel.Table
	StaticCall *staticcall.Table
	Bugs       *bug.Table
	Blacklist  *blacklist.List

	lateInit func() error
	lateMore []func(*sim.Counters) // late initcalls of front ends built on the machine
	inv      invState
	lateDone bool
}

// New builds the machine up to (not including) late init.
func New(k *image.Kernel, cfg Config) (*Machine, error) {
	if cfg.Faults == nil {
		cfg.Faults = &sim.Faults{}
	}
	if cfg.Counters == nil {
		cfg.Counters = sim.NewCounters(true)
	}
	if cfg.Wiring == nil {
		cfg.Wiring = Wire
	}
	if cfg.Kprobes.CPUs == 0 {
		cfg.Kprobes = kprobes.DefaultConfig()
	}
	w, err := cfg.Wiring(k, cfg.Switches, cfg.Counters, cfg.Faults, cfg.Walk)
	if err != nil {
		return nil, err
	}
	if w.Ftrace != nil {
		w.Ftrace.CPUs = cfg.Kprobes.CPUs // one machine: every text_poke_sync IPIs the same CPUs
	}
	cfg.Kprobes.Sim = kprobes.SimOptions{Walk: cfg.Walk, WrapTree: cfg.WrapTree}
	kp, err := kprobes.New(w.Deps, cfg.Kprobes, cfg.Switches, cfg.Counters)
	if err != nil {
		return nil, err
	}
	kp.Faults = cfg.Faults
	m := &Machine{Kernel: k, Switches: cfg.Switches, C: cfg.Counters, Faults: cfg.Faults, Deps: w.Deps, KP: kp,
		Syms: w.Syms, Ftrace: w.Ftrace, JumpLabel: w.JumpLabel, StaticCall: w.StaticCall, Bugs: w.Bugs, Blacklist: w.Blacklist,
		lateInit: w.LateInit}
	return m, nil
}

// LateInit runs the late_initcalls once, counted in PhaseLateInit.
func (m *Machine) LateInit() error {
	if m.lateDone {
		return nil
	}
	m.lateDone = true
	if m.lateInit == nil && len(m.lateMore) == 0 {
		return nil
	}
	prev := m.C.Enter(PhaseLateInit)
	defer m.C.Enter(prev)
	if m.lateInit != nil {
		if err := m.lateInit(); err != nil {
			return err
		}
	}
	for _, f := range m.lateMore {
		f(m.C)
	}
	return nil
}

// AtLateInit adds a late initcall of a subsystem built on the machine (the
// tracing layer's): it runs in LateInit, or at once, counted in
// PhaseLateInit, when late init has already run.
func (m *Machine) AtLateInit(f func(*sim.Counters)) {
	if !m.lateDone {
		m.lateMore = append(m.lateMore, f)
		return
	}
	prev := m.C.Enter(PhaseLateInit)
	defer m.C.Enter(prev)
	f(m.C)
}

// Boot is New followed by LateInit: the kernel at SYSTEM_RUNNING.
func Boot(k *image.Kernel, cfg Config) (*Machine, error) {
	m, err := New(k, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.LateInit(); err != nil {
		return nil, err
	}
	return m, nil
}
