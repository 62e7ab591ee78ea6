package scenarios

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// SensitivityReport says how a report's headline ratio (the first run's
// task cycles over the compared run's: none/series) moves when each
// weight moves across its documented range, the others held. Counts do
// not depend on weights, so every figure is exact arithmetic over the
// runs' counts: nothing is re-run. A claimed speedup is only as good as
// the weights its ratio leans on; this names them.
type SensitivityReport struct {
	Base  string  `json:"base"`
	Run   string  `json:"run"`
	Ratio float64 `json:"ratio"`
	// Rows are the ops priced in the ratio (counted in either run's task
	// context), by how far the ratio swings across their range, widest
	// first; ops of equal swing by name.
	Rows []SensitivityRow `json:"rows"`
	// Low and High bound the ratio when every weight may sit anywhere in
	// its range at once (the extremes of a linear-fractional function
	// over a box, found exactly at its corners by Dinkelbach's method).
	Low  float64 `json:"joint_low"`
	High float64 `json:"joint_high"`
	// Fixed counts the priced ops with no range (a single documented
	// value and no other regime's); their rows have a zero swing.
	Fixed int `json:"fixed_weights"`
}

// SensitivityRow is one weight's effect on the ratio.
type SensitivityRow struct {
	Op        string  `json:"op"`
	Weight    float64 `json:"weight"`
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	Range     string  `json:"range_source"`
	BaseCount uint64  `json:"base_task_count"`
	RunCount  uint64  `json:"run_task_count"`
	// RatioLo and RatioHi are the ratio with this weight at Lo and at Hi.
	RatioLo float64 `json:"ratio_at_lo"`
	RatioHi float64 `json:"ratio_at_hi"`
	Swing   float64 `json:"swing"`
	// Share is the op's part of the compared run's task cycles at the
	// report's weights.
	Share float64 `json:"run_share"`
}

// WeightRange returns op's documented range and where it comes from: the
// range registered beside the op (sim.Op.Range), else the span of the
// weights the op has in the given tables (the documented defaults and the
// built-in hot and cold profiles: a measured op's regimes bound where a
// real kernel's cache state puts it). The table in use is always inside.
func WeightRange(op sim.Op, costs *sim.CostTable, alts map[string]*sim.CostTable) (lo, hi float64, source string) {
	w := costs.Weight(op)
	info := op.Info()
	if info.RangeSource != "" {
		return min(info.Lo, w), max(info.Hi, w), info.RangeSource
	}
	lo, hi = w, w
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range alts {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range names {
		v := alts[k].Weight(op)
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo == hi {
		return lo, hi, ""
	}
	return lo, hi, "span of the " + joinNames(names) + " weights"
}

func joinNames(ns []string) string {
	switch len(ns) {
	case 0:
		return ""
	case 1:
		return ns[0]
	}
	s := ns[0]
	for _, n := range ns[1 : len(ns)-1] {
		s += ", " + n
	}
	return s + " and " + ns[len(ns)-1]
}

// Sensitivity computes the report's SensitivityReport: the first run
// against the series run (or the last run when none is named series).
// alts are the other weight tables whose values bound an op without a
// registered range.
func Sensitivity(rep *ManyReport, alts map[string]*sim.CostTable) *SensitivityReport {
	if len(rep.Runs) < 2 || rep.Costs == nil {
		return nil
	}
	base, run := rep.Runs[0], rep.Runs[len(rep.Runs)-1]
	for _, r := range rep.Runs[1:] {
		if r.Name == "series" {
			run = r
		}
	}
	costs := rep.Costs
	n := len(sim.Ops())
	a, b := make([]float64, n), make([]float64, n)
	for _, x := range base.OpCycles {
		if x.Context == sim.Task {
			a[x.Op.Index()] += float64(x.N)
		}
	}
	for _, x := range run.OpCycles {
		if x.Context == sim.Task {
			b[x.Op.Index()] += float64(x.N)
		}
	}
	w, lo, hi := make([]float64, n), make([]float64, n), make([]float64, n)
	out := &SensitivityReport{Base: base.Name, Run: run.Name}
	var priced []int
	src := make([]string, n)
	for i := range n {
		op := sim.OpAt(i)
		w[i] = costs.Weight(op)
		lo[i], hi[i] = w[i], w[i]
		if a[i] == 0 && b[i] == 0 {
			continue
		}
		priced = append(priced, i)
		lo[i], hi[i], src[i] = WeightRange(op, costs, alts)
	}
	ratio := func(ws []float64) float64 {
		var num, den float64
		for _, i := range priced {
			num += a[i] * ws[i]
			den += b[i] * ws[i]
		}
		if den == 0 {
			return math.Inf(1)
		}
		return num / den
	}
	out.Ratio = ratio(w)
	var runTask float64
	for _, i := range priced {
		runTask += b[i] * w[i]
	}
	for _, i := range priced {
		op := sim.OpAt(i)
		row := SensitivityRow{Op: op.Name(), Weight: w[i], Lo: lo[i], Hi: hi[i], Range: src[i], BaseCount: uint64(a[i]), RunCount: uint64(b[i])}
		if runTask > 0 {
			row.Share = b[i] * w[i] / runTask
		}
		ws := slices.Clone(w)
		ws[i] = lo[i]
		row.RatioLo = ratio(ws)
		ws[i] = hi[i]
		row.RatioHi = ratio(ws)
		row.Swing = math.Abs(row.RatioHi - row.RatioLo)
		if lo[i] == hi[i] {
			out.Fixed++
		}
		out.Rows = append(out.Rows, row)
	}
	slices.SortStableFunc(out.Rows, func(x, y SensitivityRow) int {
		if c := cmp.Compare(y.Swing, x.Swing); c != 0 {
			return c
		}
		return cmp.Compare(x.Op, y.Op)
	})
	out.Low = jointExtreme(priced, a, b, w, lo, hi, false)
	out.High = jointExtreme(priced, a, b, w, lo, hi, true)
	return out
}

// jointExtreme finds the least (or greatest) of sum(a·w)/sum(b·w) over
// the box lo <= w <= hi by Dinkelbach's iteration: for the current ratio
// λ, the corner minimising sum((a - λb)·w) picks each w at lo or hi by
// the sign of a - λb; its ratio is λ's next value, which never rises (or
// falls) and settles on the optimum in a finite number of corners.
func jointExtreme(priced []int, a, b, w, lo, hi []float64, maximise bool) float64 {
	ratioAt := func(ws []float64) float64 {
		var num, den float64
		for _, i := range priced {
			num += a[i] * ws[i]
			den += b[i] * ws[i]
		}
		if den == 0 {
			return math.Inf(1)
		}
		return num / den
	}
	ws := slices.Clone(w)
	lambda := ratioAt(ws)
	for range 100 {
		for _, i := range priced {
			d := a[i] - lambda*b[i]
			if maximise {
				d = -d
			}
			if d > 0 {
				ws[i] = lo[i]
			} else {
				ws[i] = hi[i]
			}
		}
		next := ratioAt(ws)
		if next == lambda || (!maximise && next > lambda) || (maximise && next < lambda) {
			break
		}
		lambda = next
	}
	return lambda
}

// WeightSource says where costs' weight for op comes from: the cost file
// or built-in profile line and its note, or, for a registered weight, its
// rationale; with the range the sensitivity report would move it across.
func WeightSource(costs *sim.CostTable, op sim.Op) string {
	s := costs.Source(op)
	if s == "default" {
		s = "registered: " + op.Info().Rationale
	} else if n := costs.Note(op); n != "" {
		s += ": " + n
	}
	if info := op.Info(); info.RangeSource != "" {
		s += fmt.Sprintf(" [range %g-%g: %s]", info.Lo, info.Hi, info.RangeSource)
	}
	return s
}

// OpShare is one op's part of a run's cycles in one context.
type OpShare struct {
	Op      string  `json:"op"`
	Context string  `json:"context"`
	Count   uint64  `json:"count"`
	Weight  float64 `json:"weight"`
	Cycles  int64   `json:"est_cycles"`
	// Share is of the run's task cycles for a task op, of its cycles
	// outside the task otherwise.
	Share  float64 `json:"share"`
	Source string  `json:"weight_source"`
}

// TopOps returns the n ops costing the most of run's task cycles (task
// true) or of its cycles outside the task, dearest first.
func TopOps(run *RunResult, costs *sim.CostTable, task bool, n int) []OpShare {
	var xs []sim.OpContextCount
	for _, x := range run.OpCycles {
		if (x.Context == sim.Task) == task && x.Cycles > 0 {
			xs = append(xs, x)
		}
	}
	slices.SortStableFunc(xs, func(a, b sim.OpContextCount) int {
		if c := cmp.Compare(b.Cycles, a.Cycles); c != 0 {
			return c
		}
		return cmp.Compare(a.Op.Name(), b.Op.Name())
	})
	total := run.TaskCycles
	if !task {
		total = run.EstCycles - run.TaskCycles
	}
	var out []OpShare
	for _, x := range xs[:min(n, len(xs))] {
		s := OpShare{Op: x.Op.Name(), Context: x.Context.String(), Count: x.N, Weight: costs.Weight(x.Op), Cycles: Cycles(x.Cycles), Source: WeightSource(costs, x.Op)}
		if total > 0 {
			s.Share = x.Cycles / total
		}
		out = append(out, s)
	}
	return out
}
