package blacklist_test

import (
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/kprobes/blacklist"
	"github.com/kpsim/kpsim/sim"
)

func Example() {
	// A small synthetic image.
	k := resvtest.ExampleImage()
	c := sim.NewCounters(false)
	l, _ := blacklist.New(c, k, sim.PresetAll.Set, nil, nil) // populate_kprobe_blacklist at boot
	l.LateInit(c)
	entry, _ := k.Range(image.RangeEntryText)
	fmt.Println(l.WithinKprobeBlacklist(c, k.Blacklist[0]), l.WithinKprobeBlacklist(c, entry.Start), l.Indexed())
	// Output: true true true
}
