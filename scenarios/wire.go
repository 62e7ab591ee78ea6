package scenarios

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

// The kallsyms tables the build would embed in this image: built once per
// image (simulator cache; the tables never change) with Debian 6.1
// x86-64's options.
var ksymsCache sync.Map // *image.Kernel -> *ktab.Tables

// KallsymsBuildOptions are the scripts/kallsyms flags of an x86-64 6.1
// distro build (KALLSYMS_ALL, ABSOLUTE_PERCPU, BASE_RELATIVE).
var KallsymsBuildOptions = ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true}

func kallsymsTables(k *image.Kernel) (*ktab.Tables, error) {
	if t, ok := ksymsCache.Load(k); ok {
		return t.(*ktab.Tables), nil
	}
	t, err := ktab.Build(SymbolsOf(k), KallsymsBuildOptions)
	if err != nil {
		return nil, fmt.Errorf("kallsyms tables of %s: %w", k.Name, err)
	}
	ksymsCache.Store(k, t)
	return t, nil
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

// DefaultWiring builds the real subsystems for one run: kallsyms, the
// jump-label / static-call / bug / blacklist models in the forms the
// switches select, and returns the late-init hook that builds the indexes.
func DefaultWiring(k *image.Kernel, sw sim.Switches, c *sim.Counters, faults *sim.Faults) (kprobes.Deps, func() error, error) {
	state := func() boot.State { return boot.Running }
	tables, err := kallsymsTables(k)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	v := kallsyms.Variant{TokenCmp: sw.Has(sim.KallsymsTokenCmp)}
	if sw.Has(sim.KallsymsOffsetIndex) {
		v.Index = kallsyms.IndexOffsets3
	}
	syms, err := kallsyms.NewCompressed(tables, v, kallsyms.CompressedOptions{Modules: k.Modules, Faults: faults})
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	syms.RecordMemory(c)
	syms.EnableFastScan() // counts only: identical counts, no walking
	prev := c.Enter(PhaseBoot)
	defer c.Enter(prev)
	jl, err := jumplabel.New(k, sw, faults, state)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	sc, err := staticcall.New(k, sw, faults, state)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	bt, err := bug.New(k, sw, faults)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	bt.FinalizeModules(c) // module_bug_finalize at each module's load (module-bug-index)
	bl, err := blacklist.New(c, k, sw, faults, syms)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	ft, err := ftrace.New(k, syms, faults)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	// The runs happen at SYSTEM_RUNNING: init memory (and its ftrace
	// records) is gone.
	ft.FreeInitMem()
	ex, err := extable.New(k)
	if err != nil {
		return kprobes.Deps{}, nil, err
	}
	// Runs never patch text or change tables after this point: the
	// simulator may answer linear walks from sorted shadows (identical
	// counts; each package's TestFastScanCountsMatchWalk proves it).
	jl.EnableFastScan()
	sc.EnableFastScan()
	bt.EnableFastScan()
	bl.EnableFastScan()
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
	return deps, lateInit, nil
}
