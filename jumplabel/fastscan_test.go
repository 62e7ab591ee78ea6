package jumplabel

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

// fastQueries: every function entry, each site's bytes around its first and
// last byte, ranges spanning sites, random ranges; module and init text.
func fastQueries(k *image.Kernel, sites []uint64, seed uint64) [][2]uint64 {
	var q [][2]uint64
	for _, f := range k.Functions() {
		q = append(q, [2]uint64{f.Addr, f.Addr}, [2]uint64{f.Addr + 4, f.Addr + 4})
	}
	for _, a := range sites {
		for d := uint64(0); d < 7; d++ {
			q = append(q, [2]uint64{a + d - 1, a + d - 1}, [2]uint64{a - 4, a + d})
		}
		q = append(q, [2]uint64{a - 20, a + 20})
	}
	rng := sim.NewRNG(seed, "fastscan.test")
	core := k.CoreText()
	for i := 0; i < 2000; i++ {
		a := core.Start + uint64(rng.IntN(len(core.Bytes)))
		q = append(q, [2]uint64{a, a + uint64(rng.IntN(20))})
	}
	for _, m := range k.Modules {
		q = append(q, [2]uint64{m.Text.Start + 16, m.Text.Start + 16})
	}
	return q
}

func fastTestImage(t *testing.T, seed uint64) *image.Kernel {
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Functions, cfg.InitFunctions = seed, 2500, 150
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 1500, 400, 300, 800, 60
	cfg.Modules, cfg.ModuleFunctions = 2, 60
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFastScanCountsMatchWalk: the simulator's fast path gives the walk's
// answers and exactly its counts (kernel work is unchanged by simulator
// shortcuts).
func TestFastScanCountsMatchWalk(t *testing.T) {
	k := fastTestImage(t, 11)
	var sites []uint64
	for _, e := range k.JumpEntries {
		sites = append(sites, e.Code)
	}
	qs := fastQueries(k, sites, 11)
	for _, st := range []boot.State{boot.Scheduling, boot.Running} {
		for _, sw := range []sim.Switches{0, sim.Switches(0).With(sim.JumpSizeOpcode)} {
			t.Run(fmt.Sprint(st, sw.Names()), func(t *testing.T) {
				state := func() boot.State { return st }
				walk, _ := New(k, sw, nil, state)
				fast, _ := New(k, sw, nil, state)
				fast.EnableFastScan()
				cw, cf := sim.NewCounters(false), sim.NewCounters(false)
				for _, q := range qs {
					rw, ew := walk.TextReserved(cw, q[0], q[1])
					rf, ef := fast.TextReserved(cf, q[0], q[1])
					if rw != rf || (ew == nil) != (ef == nil) {
						t.Fatalf("[%#x,%#x]: walk %v %v, fast %v %v", q[0], q[1], rw, ew, rf, ef)
					}
					if !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
						t.Fatalf("[%#x,%#x]: counts differ: walk\n%s fast\n%s", q[0], q[1], cw, cf)
					}
				}
				if cw.Sum() == 0 {
					t.Fatal("nothing counted")
				}
			})
		}
	}
}
