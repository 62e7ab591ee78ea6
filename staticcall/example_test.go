package staticcall_test

import (
	"fmt"

	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/staticcall"
)

func Example() {
	// A small synthetic image.
	k := resvtest.ExampleImage()
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
