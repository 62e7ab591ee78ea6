package jumplabel

import (
	"sync"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

var (
	defOnce sync.Once
	defK    *image.Kernel
	defErr  error
)

// defaultImage is the default synthetic image, generated once per package.
// Tests must not modify it.
func defaultImage(t testing.TB) *image.Kernel {
	defOnce.Do(func() { defK, _, defErr = synth.Generate(synth.DefaultConfig()) })
	if defErr != nil {
		t.Fatal(defErr)
	}
	return defK
}

// smallConfig is a small randomised image (fast to generate and scan).
func smallConfig(seed uint64) synth.Config {
	c := synth.DefaultConfig()
	c.Seed = seed
	c.Functions, c.InitFunctions = 2000, 100
	c.JumpEntries, c.JumpKeys = 1000, 300
	c.StaticCallSites, c.StaticCallKeys = 200, 20
	c.BugEntries, c.Blacklist = 600, 30
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 5, 3, 20, 3
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 2, 60, 4
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 40, 6, 10
	return c
}

func smallImage(t testing.TB, seed uint64) *image.Kernel {
	k, _, err := synth.Generate(smallConfig(seed))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// form is one way of running the check.
type form struct {
	name  string
	sw    sim.Switches
	fault bool // make the index allocation fail
	late  bool // run LateInit
}

var forms = []form{
	{"linear", 0, false, true},
	{"linear-opcode", sim.Switches(0).With(sim.JumpSizeOpcode), false, true},
	{"indexed", sim.Switches(0).With(sim.JumpLabelIndex), false, true},
	{"indexed-opcode", sim.Switches(0).With(sim.JumpLabelIndex).With(sim.JumpSizeOpcode), false, true},
	{"indexed-allocfail", sim.Switches(0).With(sim.JumpLabelIndex), true, true},
	{"indexed-before-lateinit", sim.Switches(0).With(sim.JumpLabelIndex), false, false},
}

func newForm(t fataler, k *image.Kernel, f form, st *boot.State) *Table {
	var faults *sim.Faults
	if f.fault {
		faults = &sim.Faults{}
		faults.Set(FaultIndexAlloc, 0)
	}
	tb, err := New(k, f.sw, faults, func() boot.State { return *st })
	if err != nil {
		t.Fatal(err)
	}
	if f.late {
		if err := tb.LateInit(nil); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

var raceEnabled bool

type oSite struct {
	code, end uint64 // [code, end)
	init      bool
}

var (
	oMu    sync.Mutex
	oCache = map[*image.Kernel]map[*image.JumpEntry][]oSite{}
)

// oracleSites sizes every site of es once (simulator work, cached per image).
func oracleSites(t fataler, k *image.Kernel, es []image.JumpEntry) []oSite {
	if len(es) == 0 {
		return nil
	}
	oMu.Lock()
	defer oMu.Unlock()
	m := oCache[k]
	if m == nil {
		m = map[*image.JumpEntry][]oSite{}
		oCache[k] = m
	}
	if s, ok := m[&es[0]]; ok && len(s) == len(es) {
		return s
	}
	out := make([]oSite, len(es))
	for i, e := range es {
		n, err := x86.JumpEntrySize(nil, k.Text(e.Code, 15))
		if err != nil {
			t.Fatalf("site %#x: %v", e.Code, err)
		}
		out[i] = oSite{e.Code, e.Code + uint64(n), e.Init}
	}
	m[&es[0]] = out
	return out
}

// oracle answers jump_label_text_reserved from first principles: any live
// site (by the init rules) whose bytes [code, code+size) meet [start, end].
func oracle(t fataler, k *image.Kernel, st boot.State, start, end uint64) bool {
	hit := func(es []image.JumpEntry, init bool) bool {
		for _, s := range oracleSites(t, k, es) {
			if s.init && !init {
				continue
			}
			if s.code <= end && s.end > start {
				return true
			}
		}
		return false
	}
	if hit(k.JumpEntries, st.InitSitesCount()) {
		return true
	}
	for _, m := range k.Modules {
		if m.State != image.ModuleUnformed && m.Contains(start) {
			if m.State == image.ModuleGoing {
				return false
			}
			return hit(m.JumpEntries, m.State == image.ModuleComing)
		}
	}
	return false
}
