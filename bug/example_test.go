package bug_test

import (
	"fmt"

	"github.com/kpsim/kpsim/bug"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

func Example() {
	// A small synthetic image.
	k := resvtest.ExampleImage()
	t, _ := bug.New(k, sim.PresetAll.Set, nil)
	c := sim.NewCounters(false)
	t.LateInit(c)
	b := t.FindBug(c, k.BugEntries[10].Addr)
	fmt.Println(b == &k.BugEntries[10], t.FindBug(c, k.BugEntries[10].Addr+1) == nil)
	// Output: true true
}
