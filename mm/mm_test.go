package mm_test

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

// TestSetMemoryCalls: each call interrupts every other online CPU; the
// handlers run in the other CPUs' context, not the caller's.
func TestSetMemoryCalls(t *testing.T) {
	for _, tc := range []struct{ calls, cpus, want uint64 }{{2, 8, 14}, {1, 1, 0}, {3, 64, 189}, {0, 8, 0}} {
		c := sim.NewCounters(false)
		mm.SetMemoryCalls(c, int(tc.calls), int(tc.cpus))
		if c.Total(mm.OpFlushCPU) != tc.want || c.Total(mm.OpFlushHandler) != tc.want {
			t.Errorf("%d calls on %d CPUs: %d per-CPU parts, %d handlers, want %d", tc.calls, tc.cpus, c.Total(mm.OpFlushCPU), c.Total(mm.OpFlushHandler), tc.want)
		}
	}
	if ctx := mm.OpFlushHandler.Info().Context; ctx != sim.OtherCPU {
		t.Errorf("set_memory.flush.handler runs in %v, want other_cpus", ctx)
	}
	if mm.SetMemoryCycles <= 0 || mm.VmallocPageCycles <= 0 {
		t.Error("no composed weight")
	}
}

// 6.1's alloc_insn_page makes two set_memory_* calls on an 8-CPU machine:
// each interrupts the seven others.
func ExampleSetMemoryCalls() {
	c := sim.NewCounters(false)
	mm.SetMemoryCalls(c, 2, 8)
	fmt.Println(c.Total(mm.OpFlushCPU), c.Total(mm.OpFlushHandler), mm.OpFlushHandler.Info().Context)
	// Output: 14 14 other_cpus
}
