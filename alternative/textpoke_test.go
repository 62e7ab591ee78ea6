package alternative_test

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/sim"
)

// TestTextPokeSyncCounts: one sync is one fixed part and, for every other
// online CPU, the sender's queueing and wait and that CPU's handler, the
// handler counted in the other CPUs' context (not the task's: perf stat
// CMD does not see it).
func TestTextPokeSyncCounts(t *testing.T) {
	for _, tc := range []struct{ rounds, cpus, sync, perCPU, handler uint64 }{
		{1, 1, 1, 0, 0},
		{1, 8, 1, 7, 7},
		{3, 64, 3, 189, 189},
		{0, 8, 0, 0, 0},
	} {
		c := sim.NewCounters(false)
		alternative.SyncRounds(c, int(tc.rounds), int(tc.cpus))
		got := [3]uint64{c.Total(alternative.OpTextPokeSync), c.Total(alternative.OpTextPokeSyncCPU), c.Total(alternative.OpSyncCoreHandler)}
		if want := [3]uint64{tc.sync, tc.perCPU, tc.handler}; got != want {
			t.Errorf("%d rounds on %d CPUs: sync, per-CPU, handler = %v, want %v", tc.rounds, tc.cpus, got, want)
		}
	}
	if ctx := alternative.OpSyncCoreHandler.Info().Context; ctx != sim.OtherCPU {
		t.Errorf("text_poke.sync.handler runs in %v, want other_cpus", ctx)
	}
	for _, op := range []sim.Op{alternative.OpTextPoke, alternative.OpTextPokeSync, alternative.OpTextPokeSyncCPU, alternative.OpSyncCoreHandler} {
		if i := op.Info(); i.Hi == 0 || i.RangeSource == "" {
			t.Errorf("%s: no documented range", op.Name())
		}
	}
}

// One text_poke_sync on a 4-CPU machine: the sender's fixed part, and
// three other CPUs queued, interrupted and waited for.
func ExampleTextPokeSync() {
	c := sim.NewCounters(false)
	alternative.TextPokeSync(c, 4)
	for _, op := range []sim.Op{alternative.OpTextPokeSync, alternative.OpTextPokeSyncCPU, alternative.OpSyncCoreHandler} {
		fmt.Println(op.Name(), c.Total(op), op.Info().Context)
	}
	// Output:
	// text_poke.sync 1 task
	// text_poke.sync.cpu 3 task
	// text_poke.sync.handler 3 other_cpus
}
