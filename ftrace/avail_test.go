package ftrace_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/ftboot"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// TestReplayCountsMatch: the replayed reads of available_filter_functions
// (both files) and /proc/kallsyms give the model's lines and counts, read
// after read, also after the records changed (a fresh run then).
func TestReplayCountsMatch(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules, cfg.ModuleFunctions = 2000, 100, 2, 50
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 400, 80, 80, 20, 100, 20
	k := fixture.Generate(t, cfg)
	tab := fixture.KallsymsTables(t, k, ktab.Options{AllSymbols: true, BaseRelative: true})
	symsR, ftR := ftboot.New(t, k, tab)
	_, ftM := ftboot.New(t, k, tab)
	ftM.NoReplay = true
	read := func(f func(c *sim.Counters, out func([]byte))) ([]uint64, []byte) {
		c := sim.NewCounters(false)
		var b bytes.Buffer
		f(c, func(l []byte) { b.Write(l) })
		return c.Snapshot(), b.Bytes()
	}
	for round := 0; round < 3; round++ {
		if round == 2 {
			ftR.FreeInitMem() // the records change: the replay must re-run
			ftM.FreeInitMem()
		}
		for _, addrs := range []bool{false, true} {
			cr, lr := read(func(c *sim.Counters, o func([]byte)) { ftR.AvailableFilterFunctions(c, addrs, o) })
			cm, lm := read(func(c *sim.Counters, o func([]byte)) { ftM.AvailableFilterFunctions(c, addrs, o) })
			if !slices.Equal(cr, cm) || !bytes.Equal(lr, lm) || len(lm) == 0 {
				t.Fatalf("round %d addrs=%v: replayed read differs from the model", round, addrs)
			}
		}
		// /proc/kallsyms: symsM's table is the same; its first read runs
		// the model, symsR's later ones replay.
		cr, lr := read(func(c *sim.Counters, o func([]byte)) { symsR.ProcKallsyms(c, o) })
		syms2 := ftboot.Syms(t, k, tab)
		cm, lm := read(func(c *sim.Counters, o func([]byte)) { syms2.ProcKallsyms(c, o) })
		if !slices.Equal(cr, cm) || !bytes.Equal(lr, lm) {
			t.Fatalf("round %d: replayed /proc/kallsyms differs", round)
		}
	}
}
