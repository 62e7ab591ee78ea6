package staticcall

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

// TestFastScanCountsMatchWalk: same answers, exactly the walk's counts.
func TestFastScanCountsMatchWalk(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Functions, cfg.InitFunctions = 12, 2500, 150
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 1500, 400, 300, 800, 60
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var qs [][2]uint64
	for _, f := range k.Functions() {
		qs = append(qs, [2]uint64{f.Addr + 4, f.Addr + 4})
	}
	for _, s := range k.StaticCallSites {
		for d := uint64(0); d < 7; d++ {
			qs = append(qs, [2]uint64{s.Addr + d - 1, s.Addr + d - 1}, [2]uint64{s.Addr - 4, s.Addr + d})
		}
	}
	for _, st := range []boot.State{boot.Scheduling, boot.Running} {
		state := func() boot.State { return st }
		walk, _ := New(k, 0, nil, state)
		fast, _ := New(k, 0, nil, state)
		fast.EnableFastScan()
		cw, cf := sim.NewCounters(false), sim.NewCounters(false)
		for _, q := range qs {
			rw, _ := walk.TextReserved(cw, q[0], q[1])
			rf, _ := fast.TextReserved(cf, q[0], q[1])
			if rw != rf || !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
				t.Fatalf("%v [%#x,%#x]: walk %v fast %v; counts walk\n%s fast\n%s", st, q[0], q[1], rw, rf, cw, cf)
			}
		}
	}
}
