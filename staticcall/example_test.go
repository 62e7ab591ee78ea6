package staticcall_test

import (
	"fmt"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/staticcall"
)

func Example() {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.Blacklist = 2000, 1000, 300, 30
	cfg.NoinstrFunctions, cfg.StaticCallSites, cfg.BugEntries = 20, 200, 600
	k, _, err := synth.Generate(cfg)
	if err != nil {
		panic(err)
	}
	t, _ := staticcall.New(k, sim.Switches(0).With(sim.StaticCallIndex), nil, nil) // nil state: SYSTEM_RUNNING
	c := sim.NewCounters(false)
	t.LateInit(c)
	var site uint64
	for _, s := range k.StaticCallSites {
		if !s.Init {
			site = s.Addr
			break
		}
	}
	last, _ := t.TextReserved(c, site+4, site+4) // the call's last byte
	after, _ := t.TextReserved(c, site+5, site+5)
	fmt.Println(last, after, t.Indexed(), c.Total(staticcall.OpScanSite))
	// Output: true false true 0
}
