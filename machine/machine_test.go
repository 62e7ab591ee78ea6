package machine_test

import (
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// TestBootLateInitOnce: Boot runs the late initcalls once, in their
// phase, only when a switch builds an index; a second LateInit is free.
func TestBootLateInitOnce(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.JumpEntries, cfg.JumpKeys = 2000, 100, 800, 200
	cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 200, 30, 500, 40
	cfg.Modules, cfg.ModuleFunctions, cfg.SampleFunctions = 1, 30, 0
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
