package ftrace

import (
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/sim"
)

// TestCodeUpdateFollowsCPUs: the per-CPU parts of every sync round of a
// code update (the text_poke_bp batch, the trace function update, the
// shutdown's text_poke_bp) follow Ftrace.CPUs, not a fixed 8, while the
// rounds' fixed parts do not move.
func TestCodeUpdateFollowsCPUs(t *testing.T) {
	run := func(cpus int) *sim.Counters {
		ft := newOn(t, smallImage(t))
		ft.CPUs = cpus
		o := ft.NewOps("cpus")
		c := sim.NewCounters(false)
		var ips []uint64
	pages:
		for _, pg := range ft.Pages() {
			for _, r := range pg.Records {
				if len(ips) == 16 {
					break pages
				}
				if r.Flags&FlDisabled == 0 {
					ips = append(ips, r.IP)
				}
			}
		}
		if err := ft.SetFilterIPs(c, o, ips); err != nil {
			t.Fatal(err)
		}
		if err := ft.RegisterFunction(c, o); err != nil {
			t.Fatal(err)
		}
		if err := ft.UnregisterFunction(c, o); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c2, c64 := run(2), run(64)
	for _, op := range []sim.Op{OpTextPokeBatch, OpUpdateTraceFunc, OpOpsUnregister, OpReplaceSite} {
		if c2.Total(op) != c64.Total(op) {
			t.Errorf("%s: %d at 2 CPUs, %d at 64: the fixed parts must not follow --cpus", op.Name(), c2.Total(op), c64.Total(op))
		}
	}
	rounds := c2.Total(OpTextPokeBatch)*pokeBatchSyncs + c2.Total(OpUpdateTraceFunc)*updateTraceFuncSyncs + c2.Total(OpOpsUnregister)*opsUnregisterSyncs
	if rounds == 0 {
		t.Fatal("no sync round counted: the update patched nothing")
	}
	for _, tc := range []struct {
		c    *sim.Counters
		cpus uint64
	}{{c2, 2}, {c64, 64}} {
		if got, want := tc.c.Total(alternative.OpTextPokeSyncCPU), rounds*(tc.cpus-1); got != want {
			t.Errorf("%d CPUs: text_poke.sync.cpu %d, want %d (%d rounds)", tc.cpus, got, want, rounds)
		}
		if got, want := tc.c.Total(alternative.OpSyncCoreHandler), rounds*(tc.cpus-1); got != want {
			t.Errorf("%d CPUs: text_poke.sync.handler %d, want %d", tc.cpus, got, want)
		}
	}
}
