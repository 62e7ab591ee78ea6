package blacklist_test

import (
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes/blacklist"
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
	c := sim.NewCounters(false)
	l, _ := blacklist.New(c, k, sim.PresetAll.Set, nil, nil) // populate_kprobe_blacklist at boot
	l.LateInit(c)
	entry, _ := k.Range(image.RangeEntryText)
	fmt.Println(l.WithinKprobeBlacklist(c, k.Blacklist[0]), l.WithinKprobeBlacklist(c, entry.Start), l.Indexed())
	// Output: true true true
}
