package bug

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

// TestFastScanCountsMatchWalk: same answers, exactly the walks' counts,
// linear and indexed (the module walk stays linear under the index).
func TestFastScanCountsMatchWalk(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Functions = 13, 2500
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 1500, 400, 300, 800, 60
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var qs []uint64
	for _, f := range k.Functions() {
		qs = append(qs, f.Addr+4)
	}
	for _, b := range k.BugEntries {
		qs = append(qs, b.Addr, b.Addr+1)
	}
	for _, m := range k.Modules {
		for _, b := range m.BugEntries {
			qs = append(qs, b.Addr)
		}
	}
	for _, sw := range []sim.Switches{0, sim.Switches(0).With(sim.BugIndex)} {
		walk, _ := New(k, sw, nil)
		fast, _ := New(k, sw, nil)
		if err := walk.LateInit(nil); err != nil && sw != 0 {
			t.Fatal(err)
		}
		_ = fast.LateInit(nil)
		fast.EnableFastScan()
		cw, cf := sim.NewCounters(false), sim.NewCounters(false)
		for _, a := range qs {
			bw, bf := walk.FindBug(cw, a), fast.FindBug(cf, a)
			if bw != bf || !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
				t.Fatalf("%v %#x: walk %v fast %v; counts walk\n%s fast\n%s", sw.Names(), a, bw, bf, cw, cf)
			}
		}
	}
}
