package jumplabel_test

import (
	"fmt"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/jumplabel"
	"github.com/kpsim/kpsim/sim"
)

// The registration pipeline owns system_state and calls LateInit at its
// late-initcall point; TextReserved then answers in the indexed form.
func Example() {
	// A small synthetic image.
	k := resvtest.ExampleImage()
	state := boot.Booting
	t, _ := jumplabel.New(k, sim.PresetSeries.Set, nil, func() boot.State { return state })
	_, err := t.Index()
	fmt.Println("before late init:", err != nil)

	c := sim.NewCounters(false)
	if err := t.LateInit(c); err != nil {
		panic(err)
	}
	state = boot.Running
	var site uint64
	for _, e := range k.JumpEntries {
		if !e.Init { // init-text sites no longer count once SYSTEM_RUNNING
			site = e.Code
			break
		}
	}
	r1, _ := t.TextReserved(c, site, site)
	r2, _ := t.TextReserved(c, site-64, site-60)
	x, _ := t.Index()
	fmt.Println(r1, r2, t.Indexed(), x.Len() == len(k.JumpEntries), x.EntryBytes())
	// Output:
	// before late init: true
	// true false true true 8
}
