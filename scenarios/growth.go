package scenarios

import (
	"fmt"
	"math"

	"github.com/kpsim/kpsim/sim"
)

// Growth is how the per-probe cost of one pass (attach, enable) grows with
// the number of probes already there: the modelled cycles per probe of
// every batch of K accepted probes, total and per phase, and a
// least-squares fit c(N) = a + b·N over the batches (N at each batch's
// midpoint). A linear per-probe cost means a quadratic total: b·N is the
// share of each probe's cost that the probes before it cause.
type Growth struct {
	Pass    string         `json:"pass"`
	K       int            `json:"batch"`
	Batches []Batch        `json:"batches"`
	Fit     Fit            `json:"fit"`
	Phases  map[string]Fit `json:"phase_fits"`
	// NoFit says why the pass has no fit: it accepted too few probes
	// for two batches (refusals left fewer than K+1); Fit and Phases
	// are then empty.
	NoFit string `json:"no_fit,omitempty"`
	perPh map[string][]float64
}

// Batch is one batch of accepted probes.
type Batch struct {
	Start          int                `json:"start"` // accepted probes before it
	End            int                `json:"end"`   // and after it
	CyclesPerProbe float64            `json:"cycles_per_probe"`
	Phases         map[string]float64 `json:"phases"` // cycles per probe by phase
}

// Fit is c(N) = A + B·N with its R², the B·N share of c at NMax, and the
// growth from the first batch to the last.
type Fit struct {
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	R2     float64 `json:"r2"`
	NMax   int     `json:"n_max"`
	Share  float64 `json:"bn_share"`
	Growth float64 `json:"growth"`
}

// growthRecorder cuts a pass into batches of K accepted probes.
type growthRecorder struct {
	costs  *sim.CostTable
	c      *sim.Counters
	k      int
	n      int       // accepted in this pass
	lastN  int       // at the last boundary
	last   []float64 // cumulative cycles per phase at the last boundary
	cur    *Growth
	series []*Growth
}

func newGrowthRecorder(costs *sim.CostTable, c *sim.Counters, k int) *growthRecorder {
	g := &growthRecorder{costs: costs, c: c, k: k}
	g.start()
	return g
}

func (g *growthRecorder) cycles() []float64 {
	phs := sim.Phases()
	out := make([]float64, len(phs))
	for i := range phs {
		out[i] = g.costs.PhaseCycles(g.c, sim.PhaseAt(i))
	}
	return out
}

// start begins a pass at the counters' current state.
func (g *growthRecorder) start() {
	g.n, g.lastN = 0, 0
	g.last = g.cycles()
	g.cur = &Growth{K: g.k, perPh: map[string][]float64{}}
}

func (g *growthRecorder) accept() {
	g.n++
	if g.n%g.k == 0 {
		g.cut()
	}
}

func (g *growthRecorder) cut() {
	now := g.cycles()
	size := float64(g.n - g.lastN)
	b := Batch{Start: g.lastN, End: g.n, Phases: map[string]float64{}}
	phs := sim.Phases()
	for i := range now {
		d := now[i] - g.last[i]
		if d == 0 {
			continue
		}
		b.CyclesPerProbe += d / size
		b.Phases[phs[i].Name] = d / size
	}
	g.cur.Batches = append(g.cur.Batches, b)
	g.last, g.lastN = now, g.n
}

// finish closes the pass (a last partial batch included) and fits it.
func (g *growthRecorder) finish(pass string) {
	if g.n > g.lastN {
		g.cut()
	}
	cur := g.cur
	cur.Pass = pass
	if len(cur.Batches) == 0 {
		return
	}
	if len(cur.Batches) < 2 { // one point: no line through it
		cur.NoFit = fmt.Sprintf("the pass accepted %d probes, one batch (a fit of a + b·N needs two; give --batch-report below %d)", g.n, g.n)
		if g.n == 0 {
			cur.NoFit = "the pass accepted no probe"
		}
		g.series = append(g.series, cur)
		return
	}
	xs := make([]float64, len(cur.Batches))
	ys := make([]float64, len(cur.Batches))
	names := map[string]bool{}
	for i, b := range cur.Batches {
		xs[i] = float64(b.Start+b.End) / 2
		ys[i] = b.CyclesPerProbe
		for n := range b.Phases {
			names[n] = true
		}
	}
	cur.Fit = fitLinear(xs, ys, g.n)
	cur.Phases = map[string]Fit{}
	for n := range names {
		py := make([]float64, len(cur.Batches))
		for i, b := range cur.Batches {
			py[i] = b.Phases[n]
		}
		cur.Phases[n] = fitLinear(xs, py, g.n)
	}
	g.series = append(g.series, cur)
}

// fitLinear is ordinary least squares of y = a + b·x.
func fitLinear(xs, ys []float64, nmax int) Fit {
	f := Fit{NMax: nmax}
	f.A, f.B, f.R2, _ = ols(xs, ys)
	if c := f.A + f.B*float64(nmax); c != 0 {
		f.Share = f.B * float64(nmax) / c
	}
	if ys[0] != 0 {
		f.Growth = ys[len(ys)-1] / ys[0]
	}
	if math.IsNaN(f.R2) {
		f.R2 = 0
	}
	return f
}

// ols is ordinary least squares of y = a + b·x: a, b, R², and whether
// the xs spread (when they do not, b is 0 and a the mean).
func ols(xs, ys []float64) (a, b, r2 float64, spread bool) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		a = sy / n
	} else {
		b = (n*sxy - sx*sy) / den
		a = (sy - b*sx) / n
	}
	mean := sy / n
	var ssTot, ssRes float64
	for i := range xs {
		e := ys[i] - (a + b*xs[i])
		ssRes += e * e
		d := ys[i] - mean
		ssTot += d * d
	}
	r2 = 1
	if ssTot > 0 {
		r2 = 1 - ssRes/ssTot
	}
	return a, b, r2, den != 0
}
