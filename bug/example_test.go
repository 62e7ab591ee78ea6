package bug_test

import (
	"fmt"

	"github.com/kpsim/kpsim/bug"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

func Example() {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.Blacklist = 2000, 1000, 300, 30
	cfg.NoinstrFunctions, cfg.StaticCallSites, cfg.BugEntries = 20, 200, 600
	k, _, err := synth.Generate(cfg)
	if err != nil {
		panic(err)
	}
	t, _ := bug.New(k, sim.PresetAll.Set, nil)
	c := sim.NewCounters(false)
	t.LateInit(c)
	b := t.FindBug(c, k.BugEntries[10].Addr)
	fmt.Println(b == &k.BugEntries[10], t.FindBug(c, k.BugEntries[10].Addr+1) == nil)
	// Output: true true
}
