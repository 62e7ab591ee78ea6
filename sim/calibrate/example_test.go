package calibrate_test

import (
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/sim/calibrate"
)

// The benchmark program prints one result line per benchmark; kpsim turns
// each into the weight of every op that names that benchmark.
func ExampleParseOutput() {
	out := "C clock thread_cputime\nC tsc_mhz 2600.0\n" +
		"R hlist_visit cold 39.95 38.10 44.02 15 node | nodes=20000 obj=128 buckets=64 chain=312\n" +
		"C done\n"
	ms, hdr, err := calibrate.ParseOutput(strings.NewReader(out))
	if err != nil {
		panic(err)
	}
	m := ms["hlist_visit"]
	fmt.Printf("%s (%s): %.2f cycles/%s, median of %d; clock %s\n", m.Bench, m.Regime, m.Median, m.Unit, m.Samples, hdr["clock"])
	// Output: hlist_visit (cold): 39.95 cycles/node, median of 15; clock thread_cputime
}

// Builtin returns a built-in profile; its header says where it was measured.
func ExampleBuiltin() {
	cold, err := calibrate.Builtin("cold")
	if err != nil {
		panic(err)
	}
	op, _ := sim.LookupOp("text_poke")
	kind, _ := calibrate.Classify(op.Info())
	fmt.Println(cold.Meta.Regime, kind, cold.Weight(op) == sim.DefaultCosts().Weight(op))
	// Output: cold documented true
}
