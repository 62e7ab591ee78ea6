package blacklist

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

// TestFastScanCountsMatchWalk: same answers, exactly the walk's counts,
// including the second walk for dotted names.
func TestFastScanCountsMatchWalk(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Functions, cfg.ClonePercent = 14, 2500, 20
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 1500, 400, 300, 800, 200
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var qs []uint64
	for _, f := range k.Functions() {
		qs = append(qs, f.Addr, f.Addr+4, f.Addr+f.Size)
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			qs = append(qs, s.Addr)
		}
	}
	walk, _ := New(nil, k, 0, nil, nil)
	fast, _ := New(nil, k, 0, nil, nil)
	fast.EnableFastScan()
	cw, cf := sim.NewCounters(false), sim.NewCounters(false)
	hits := 0
	for _, a := range qs {
		rw, rf := walk.WithinKprobeBlacklist(cw, a), fast.WithinKprobeBlacklist(cf, a)
		if rw != rf || !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
			t.Fatalf("%#x: walk %v fast %v; counts walk\n%s fast\n%s", a, rw, rf, cw, cf)
		}
		if rw {
			hits++
		}
	}
	if hits == 0 {
		t.Fatal("no blacklisted address among the queries")
	}
}
