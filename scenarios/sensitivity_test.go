package scenarios

import (
	"math"
	"testing"

	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// smallSample runs none and series over 300 generated probes.
func smallSample(t *testing.T) *ManyReport {
	t.Helper()
	o := testManyOptions()
	o.N = 300
	o.Image.SampleFunctions = o.N
	s := mustSetup(t, o)
	rep, err := RunMany(s, []RunSpec{{Name: "none"}, {Name: "series", Switches: sim.PresetSeries.Set}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestTaskCyclesLeaveOutTheOptimizer: the optimizer runs in a kworker, so
// its cycles are in the system total and not the task's, phase by phase;
// the IPI handlers its text_poke_syncs raise run on the other CPUs, as do
// the arm phase's.
func TestTaskCyclesLeaveOutTheOptimizer(t *testing.T) {
	rep := smallSample(t)
	for _, run := range rep.Runs {
		opt := run.Phase("optimizer")
		kw, other := opt.Contexts[sim.Kworker], opt.Contexts[sim.OtherCPU]
		if opt.EstCycles == 0 || opt.TaskCycles != 0 || kw == 0 || other == 0 || math.Abs(kw+other-opt.EstCycles) > 1e-9*opt.EstCycles {
			t.Errorf("%s: optimizer %v cycles, task %v, kworker %v, other CPUs %v", run.Name, opt.EstCycles, opt.TaskCycles, kw, other)
		}
		if arm := run.Phase("arm"); arm.Contexts[sim.OtherCPU] == 0 || arm.TaskCycles == 0 {
			t.Errorf("%s: arm: task %v, other CPUs %v: the int3 pokes' syncs interrupt the other CPUs", run.Name, arm.TaskCycles, arm.Contexts[sim.OtherCPU])
		}
		arm := run.Phase("prepare")
		if arm.TaskCycles == 0 {
			t.Errorf("%s: prepare has no task cycles", run.Name)
		}
		if got := run.Contexts.System(); math.Abs(got-run.EstCycles) > 1e-6*run.EstCycles {
			t.Errorf("%s: contexts sum to %v, total %v", run.Name, got, run.EstCycles)
		}
		if run.TaskCycles >= run.EstCycles {
			t.Errorf("%s: task %v not below system %v", run.Name, run.TaskCycles, run.EstCycles)
		}
	}
}

// TestSensitivityRowsAreRepricedRuns: each row's ratio at an end of the
// range is what pricing the same counts with that one weight moved gives,
// and the joint range contains every row's.
func TestSensitivityRowsAreRepricedRuns(t *testing.T) {
	rep := smallSample(t)
	alt := sim.DefaultCosts().Clone()
	for _, o := range sim.Ops() {
		op, _ := sim.LookupOp(o.Name)
		alt.Set(op, 2*o.Cycles, "test", "twice the default")
	}
	s := Sensitivity(rep, map[string]*sim.CostTable{"double": alt})
	base, series := rep.Runs[0], rep.Runs[1]
	if want := base.TaskCycles / series.TaskCycles; math.Abs(s.Ratio-want) > 1e-9*want {
		t.Fatalf("ratio %v, want %v", s.Ratio, want)
	}
	if len(s.Rows) == 0 {
		t.Fatal("no rows")
	}
	for i, row := range s.Rows {
		if i > 0 && row.Swing > s.Rows[i-1].Swing {
			t.Errorf("row %d (%s) swings more than the row above", i, row.Op)
		}
		op, _ := sim.LookupOp(row.Op)
		if row.Weight != sim.DefaultCosts().Weight(op) || row.Lo > row.Weight || row.Hi < row.Weight {
			t.Errorf("%s: weight %v range %v-%v", row.Op, row.Weight, row.Lo, row.Hi)
		}
		for _, end := range []struct {
			w, ratio float64
		}{{row.Lo, row.RatioLo}, {row.Hi, row.RatioHi}} {
			c := sim.DefaultCosts().Clone()
			c.Set(op, end.w, "test", "")
			want := c.ContextCycles(base.Counters).Task() / c.ContextCycles(series.Counters).Task()
			if math.Abs(end.ratio-want) > 1e-9*want {
				t.Errorf("%s at %v: ratio %v, repriced %v", row.Op, end.w, end.ratio, want)
			}
			if end.ratio < s.Low-1e-9 || end.ratio > s.High+1e-9 {
				t.Errorf("%s at %v: ratio %v outside the joint range %v-%v", row.Op, end.w, end.ratio, s.Low, s.High)
			}
		}
	}
	if !(s.Low <= s.Ratio && s.Ratio <= s.High) || s.Low == s.High {
		t.Errorf("joint range %v-%v around %v", s.Low, s.High, s.Ratio)
	}
}

// TestJointExtremeIsTheBestCorner: Dinkelbach's answer is the least and
// greatest ratio over every corner of a small box (brute force).
func TestJointExtremeIsTheBestCorner(t *testing.T) {
	a := []float64{5, 1, 0, 7, 2}
	b := []float64{1, 3, 4, 0.5, 2}
	w := []float64{2, 2, 1, 3, 1}
	lo := []float64{1, 0.5, 0.2, 1, 1}
	hi := []float64{4, 6, 3, 5, 1}
	priced := []int{0, 1, 2, 3, 4}
	best, worst := math.Inf(1), math.Inf(-1)
	for m := range 1 << len(a) {
		var num, den float64
		for i := range a {
			x := lo[i]
			if m&(1<<i) != 0 {
				x = hi[i]
			}
			num += a[i] * x
			den += b[i] * x
		}
		best, worst = min(best, num/den), max(worst, num/den)
	}
	if got := jointExtreme(priced, a, b, w, lo, hi, false); math.Abs(got-best) > 1e-12 {
		t.Errorf("low %v, brute force %v", got, best)
	}
	if got := jointExtreme(priced, a, b, w, lo, hi, true); math.Abs(got-worst) > 1e-12 {
		t.Errorf("high %v, brute force %v", got, worst)
	}
}
