package sim

import (
	"testing"
	"time"
)

var (
	testPhaseWorker = NewPhase("test.worker", "a phase run from a workqueue").In(Kworker, "test")
	testOpIPI       = NewOp("test.ipi", 100, "test weight", "an IPI handler").In(OtherCPU, "test")
	testOpWait      = NewOp("test.wait", 1000, "test weight", "a grace period").
			Waits(3*time.Millisecond, time.Millisecond, 20*time.Millisecond, "test")
)

// TestContextSplit: an op counted in a kworker phase is the kworker's; an
// op that names its own context keeps it in any phase; the task's share
// plus the others' is the whole estimate.
func TestContextSplit(t *testing.T) {
	c := NewCounters(false)
	c.Enter(testPh1)
	c.Add(testOpA, 5)   // task: 10
	c.Add(testOpIPI, 2) // other CPUs: 200
	c.Enter(testPhaseWorker)
	c.Add(testOpB, 3)   // kworker: 30
	c.Add(testOpIPI, 1) // other CPUs still: 100
	c.Inc(testOpWait)   // kworker: 1000, and 3 ms of waiting
	costs := DefaultCosts()

	a := costs.PhaseContextCycles(c, testPh1)
	if a[Task] != 10 || a[OtherCPU] != 200 || a[Kworker] != 0 {
		t.Errorf("phase a split = %v, want task 10, other_cpus 200", a)
	}
	w := costs.PhaseContextCycles(c, testPhaseWorker)
	if w[Task] != 0 || w[Kworker] != 1030 || w[OtherCPU] != 100 {
		t.Errorf("worker split = %v, want kworker 1030, other_cpus 100", w)
	}
	all := costs.ContextCycles(c)
	if all.Task() != 10 || all.System() != costs.Cycles(c) {
		t.Errorf("totals task %v system %v, want 10 and %v", all.Task(), all.System(), costs.Cycles(c))
	}
	if got := PhaseWaits(c, testPhaseWorker); got[Kworker] != 3*time.Millisecond || got[Task] != 0 {
		t.Errorf("waits = %v, want 3ms in the kworker", got)
	}
	ws := Waits(c)
	if len(ws) != 1 || ws[0].Op != testOpWait || ws[0].Context != Kworker || ws[0].Lo != time.Millisecond || ws[0].Hi != 20*time.Millisecond {
		t.Errorf("Waits = %+v", ws)
	}
	oc := costs.OpContextCounts(c)
	want := []OpContextCount{{testOpA, Task, 5, 10}, {testOpB, Kworker, 3, 30}, {testOpIPI, OtherCPU, 3, 300}, {testOpWait, Kworker, 1, 1000}}
	got := map[OpContextCount]bool{}
	for _, x := range oc {
		got[x] = true
	}
	for _, x := range want {
		if !got[x] {
			t.Errorf("OpContextCounts lacks %+v: %+v", x, oc)
		}
	}
	if len(oc) != len(want) {
		t.Errorf("OpContextCounts = %+v, want %d entries", oc, len(want))
	}
	if ContextOf(testPh1, testOpA) != Task || ContextOf(testPhaseWorker, testOpA) != Kworker {
		t.Error("ContextOf ignores the phase's context")
	}
}

func TestContextNames(t *testing.T) {
	want := []string{"task", "kworker", "rcu_callback", "other_cpus"}
	for i, c := range Contexts() {
		if c.String() != want[i] {
			t.Errorf("context %d = %q, want %q", i, c, want[i])
		}
	}
}
