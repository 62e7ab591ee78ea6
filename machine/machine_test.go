package machine_test

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// smallImage is a small image with one module (a quick boot).
func smallImage(t testing.TB) *image.Kernel {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.JumpEntries, cfg.JumpKeys = 2000, 100, 800, 200
	cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 200, 30, 500, 40
	cfg.Modules, cfg.ModuleFunctions, cfg.SampleFunctions = 1, 30, 0
	return fixture.Generate(t, cfg)
}

// TestBootLateInitOnce: Boot runs the late initcalls once, in their
// phase, only when a switch builds an index; a second LateInit is free.
func TestBootLateInitOnce(t *testing.T) {
	k := smallImage(t)
	for _, sw := range []sim.Switches{0, sim.PresetSeries.Set} {
		mc := machine.DefaultConfig()
		mc.Switches = sw
		m, err := machine.Boot(k, mc)
		if err != nil {
			t.Fatal(err)
		}
		late := m.C.PhaseTotal(machine.PhaseLateInit)
		if (late != 0) != (sw != 0) {
			t.Fatalf("%s: late-init ops %d", sw.Name(), late)
		}
		if err := m.LateInit(); err != nil || m.C.PhaseTotal(machine.PhaseLateInit) != late {
			t.Fatalf("%s: a second LateInit counted again (%v)", sw.Name(), err)
		}
		if m.Syms == nil || m.Ftrace == nil || m.KP == nil {
			t.Fatal("machine lacks its subsystems")
		}
		p := &kprobes.Kprobe{SymbolName: k.Functions()[1000].Name}
		_ = m.KP.RegisterKprobe(p) // any outcome: the machine answers
	}
}

// TestConfigReachesTheModels: Config.Walk and Config.WrapTree reach the
// kprobes model (its registry is built with the wrapped tree), the wiring
// hands over the concrete subsystems, and a walking machine counts what a
// fast one does.
func TestConfigReachesTheModels(t *testing.T) {
	k := smallImage(t)
	var counts [2]*sim.Counters
	for i, walk := range []bool{false, true} {
		wraps := 0
		mc := machine.DefaultConfig()
		mc.Switches, mc.Walk = sim.PresetSeries.Set, walk
		mc.Counters = sim.NewCounters(false)
		mc.WrapTree = func(t kprobes.AddrTree) kprobes.AddrTree { wraps++; return t }
		m, err := machine.Boot(k, mc)
		if err != nil {
			t.Fatal(err)
		}
		if wraps != 1 || m.KP.Cfg.Sim.Walk != walk || !m.KP.Reg.HasTree() {
			t.Fatalf("walk=%v: tree wrapped %d times, kprobes walk %v", walk, wraps, m.KP.Cfg.Sim.Walk)
		}
		if m.Syms == nil || m.Ftrace == nil || m.JumpLabel == nil || m.StaticCall == nil || m.Bugs == nil || m.Blacklist == nil {
			t.Fatalf("walk=%v: the machine lacks a concrete subsystem: %+v", walk, m)
		}
		for _, f := range k.Functions()[900:960] {
			_ = m.KP.RegisterKprobe(&kprobes.Kprobe{SymbolName: f.Name})
		}
		counts[i] = m.C
	}
	if op, _ := sim.LookupOp("kprobe.hash.lookup"); counts[0].Total(op) < 60 {
		t.Fatalf("too few get_kprobe calls counted: %d", counts[0].Total(op))
	}
	for op, o := range sim.Ops() {
		if a, b := counts[0].Total(sim.OpAt(op)), counts[1].Total(sim.OpAt(op)); a != b {
			t.Errorf("%s: fast %d, walk %d", o.Name, a, b)
		}
	}
}
