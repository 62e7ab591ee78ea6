package scenarios

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/doors"
)

// ParseNs reads a sweep's probe counts: START:STOP:STEP (STOP included
// when the steps reach it) or a comma-separated list, each at least 1.
func ParseNs(s string) ([]int, error) {
	var ns []int
	if strings.Contains(s, ":") {
		f := strings.Split(s, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("want START:STOP:STEP or N,N,..., got %q", s)
		}
		var v [3]int
		for i, x := range f {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil {
				return nil, fmt.Errorf("%q in %q is not an integer", x, s)
			}
			v[i] = n
		}
		if v[0] < 1 || v[1] < v[0] || v[2] < 1 {
			return nil, fmt.Errorf("%q: want 1 <= START <= STOP and STEP >= 1", s)
		}
		if (v[1]-v[0])/v[2] >= 1000 {
			return nil, fmt.Errorf("%q: more than 1000 points", s)
		}
		for n := v[0]; n <= v[1]; n += v[2] {
			ns = append(ns, n)
		}
	} else {
		for _, x := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q in %q is not a positive integer", x, s)
			}
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	for i := 1; i < len(ns); i++ {
		if ns[i] == ns[i-1] {
			return nil, fmt.Errorf("%d given twice", ns[i])
		}
	}
	if len(ns) < 2 {
		return nil, errors.New("a sweep needs at least two values of N")
	}
	return ns, nil
}

// Sweep is one scenario run at several N under the same runs (patch
// sets): per run and phase the totals at each N, a least-squares fit of
// cycles(N) = a + b·N + c·N² and the log-log slope (the growth exponent).
type Sweep struct {
	Schema   int            `json:"schema_version"`
	Meta     *Meta          `json:"meta"`
	Scenario string         `json:"scenario"`
	Via      doors.Via      `json:"via"`
	Params   map[string]any `json:"params"`
	Ns       []int          `json:"n"`
	Phases   []string       `json:"phases"` // the phases any run counted in, PhaseNames order
	Runs     []*SweepRun    `json:"runs"`

	reports []*ManyReport
}

// SweepRun is one run (patch set) across the sweep.
type SweepRun struct {
	Name    string   `json:"name"`
	Patches []string `json:"patches"`
	// Points[i] is the run at Ns[i].
	Points []SweepPoint `json:"points"`
	// Fits of estimated cycles against N, per phase and "total".
	Fits map[string]GrowthFit `json:"fits"`
	// SameDecisions is true when every N decided as the first run did.
	SameDecisions bool `json:"same_decisions_as_first_run"`
	// Omitted are the Ns at which the run attached no probe: their
	// points are left out of the fits, the exponents, the per-probe
	// figures and the plots (their cycles are the cost of refusals).
	Omitted []int `json:"omitted_n,omitempty"`
	// NoFit says why the run has no fits (fewer than two points left).
	NoFit string `json:"no_fit,omitempty"`
}

// SweepPoint is one run at one N.
type SweepPoint struct {
	N          int               `json:"n"`
	Ops        uint64            `json:"ops"`
	EstCycles  int64             `json:"est_cycles"`
	TaskCycles int64             `json:"task_est_cycles"`
	WallNS     int64             `json:"wall_ns"`
	Registered int               `json:"registered"`
	Rejected   map[string]int    `json:"rejected"`
	Digest     string            `json:"decisions_digest"`
	PhaseOps   map[string]uint64 `json:"phase_ops"`
	PhaseCyc   map[string]int64  `json:"phase_est_cycles"`

	// NotTried and Targets are the run's (RunOutcome); AttachWarnings
	// flag a point whose door attached nothing or left targets
	// unattempted.
	NotTried       int             `json:"not_attempted"`
	Targets        int             `json:"targets"`
	AttachWarnings []AttachWarning `json:"attach_warnings,omitempty"`
}

// Attached says whether the run attached any probe at this N: a point
// that attached none is drawn nowhere and fitted by nothing.
func (p SweepPoint) Attached() bool { return p.Registered > 0 }

// GrowthFit is cycles(N) = A + B·N + C·N² (least squares) and the slope
// of log cycles against log N (least squares over the points with
// cycles > 0): 1 is linear growth, 2 quadratic.
type GrowthFit struct {
	A, B, C float64
	R2      float64 `json:"r2"`
	Slope   float64 `json:"loglog_slope"`
	SlopeR2 float64 `json:"loglog_r2"`
	Points  int     `json:"points"`
}

// NewSweep assembles reports of the same scenario and runs at
// increasing N.
func NewSweep(reps []*ManyReport) (*Sweep, error) {
	if len(reps) < 2 {
		return nil, errors.New("a sweep needs at least two reports")
	}
	first := reps[0]
	sw := &Sweep{Schema: SchemaVersion, Meta: first.Meta, Scenario: first.Scenario, Via: first.Via, Params: map[string]any{}, reports: reps}
	for k, v := range first.Params {
		if k != "probes" {
			sw.Params[k] = v
		}
	}
	for _, r := range first.Runs {
		sw.Runs = append(sw.Runs, &SweepRun{Name: r.Name, Patches: r.Patches, Fits: map[string]GrowthFit{}, SameDecisions: true})
	}
	for _, rep := range reps {
		if len(rep.Runs) != len(sw.Runs) {
			return nil, fmt.Errorf("n=%d: %d runs, want %d", rep.N, len(rep.Runs), len(sw.Runs))
		}
		sw.Ns = append(sw.Ns, rep.N)
		for i, r := range rep.Runs {
			p := SweepPoint{N: rep.N, Ops: r.TotalOps, EstCycles: Cycles(r.EstCycles), TaskCycles: Cycles(r.TaskCycles), WallNS: r.WallNS, Registered: r.Registered,
				Rejected: r.Rejected, Digest: r.Digest, PhaseOps: map[string]uint64{}, PhaseCyc: map[string]int64{},
				NotTried: r.NotTried, Targets: r.Targets, AttachWarnings: r.AttachWarnings}
			for _, ph := range r.Phases {
				p.PhaseOps[ph.Name], p.PhaseCyc[ph.Name] = ph.Ops, Cycles(ph.EstCycles)
			}
			sw.Runs[i].Points = append(sw.Runs[i].Points, p)
			if r.Digest != rep.Runs[0].Digest {
				sw.Runs[i].SameDecisions = false
			}
		}
	}
	for i := 1; i < len(sw.Ns); i++ {
		if sw.Ns[i] <= sw.Ns[i-1] {
			return nil, fmt.Errorf("n=%d after n=%d: the reports must be in increasing N", sw.Ns[i], sw.Ns[i-1])
		}
	}
	for _, name := range PhaseNames() {
		for _, run := range sw.Runs {
			if used(run, name) {
				sw.Phases = append(sw.Phases, name)
				break
			}
		}
	}
	for _, run := range sw.Runs {
		var ns []int
		var keep []int
		for i, p := range run.Points {
			if !p.Attached() {
				run.Omitted = append(run.Omitted, p.N)
				continue
			}
			ns, keep = append(ns, p.N), append(keep, i)
		}
		if len(ns) < 2 {
			run.NoFit = "attached no probe at any N"
			if len(ns) == 1 {
				run.NoFit = fmt.Sprintf("attached probes at one N only (%d)", ns[0])
			}
			continue
		}
		pick := func(ys []float64) []float64 {
			out := make([]float64, len(keep))
			for j, i := range keep {
				out[j] = ys[i]
			}
			return out
		}
		run.Fits["total"] = fitGrowth(ns, pick(run.series("total")))
		for _, ph := range sw.Phases {
			run.Fits[ph] = fitGrowth(ns, pick(run.series(ph)))
		}
	}
	return sw, nil
}

// Reports are the reports the sweep was made of, in increasing N.
func (s *Sweep) Reports() []*ManyReport { return s.reports }

func used(r *SweepRun, phase string) bool {
	for _, p := range r.Points {
		if p.PhaseOps[phase] != 0 || p.PhaseCyc[phase] != 0 {
			return true
		}
	}
	return false
}

// series returns the run's estimated cycles of a phase (or "total") at
// every N.
func (r *SweepRun) series(phase string) []float64 {
	ys := make([]float64, len(r.Points))
	for i, p := range r.Points {
		if phase == "total" {
			ys[i] = float64(p.EstCycles)
		} else {
			ys[i] = float64(p.PhaseCyc[phase])
		}
	}
	return ys
}

// Series is the exported form of series, for plots.
func (r *SweepRun) Series(phase string) []float64 { return r.series(phase) }

// fitGrowth fits ys = a + b·n + c·n² by least squares (normal equations
// on n scaled to [0, 1] for conditioning) and the log-log slope.
func fitGrowth(ns []int, ys []float64) GrowthFit {
	f := GrowthFit{Points: len(ns)}
	scale := float64(ns[len(ns)-1])
	// Normal equations M·[a b c] = v over x = n/scale.
	var m [3][4]float64
	for i, n := range ns {
		x := float64(n) / scale
		pw := [3]float64{1, x, x * x}
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				m[r][c] += pw[r] * pw[c]
			}
			m[r][3] += pw[r] * ys[i]
		}
	}
	k := 3
	if len(ns) < 3 {
		k = 2 // two points: a line
	}
	coef, ok := solve(m, k)
	if ok {
		f.A, f.B, f.C = coef[0], coef[1]/scale, coef[2]/(scale*scale)
		var mean, ssTot, ssRes float64
		for _, y := range ys {
			mean += y
		}
		mean /= float64(len(ys))
		for i, n := range ns {
			x := float64(n)
			d := ys[i] - (f.A + f.B*x + f.C*x*x)
			ssRes += d * d
			ssTot += (ys[i] - mean) * (ys[i] - mean)
		}
		f.R2 = 1
		if ssTot > 0 {
			f.R2 = 1 - ssRes/ssTot
		}
		// Rounding noise of an exact fit: a term worth less than 1e-9 of
		// the largest value is zero (and -0 is 0).
		var ymax float64
		for _, y := range ys {
			ymax = math.Max(ymax, math.Abs(y))
		}
		tiny := func(v, at float64) float64 {
			if math.Abs(v*at) < 1e-9*ymax {
				return 0
			}
			return v + 0
		}
		f.A, f.B, f.C = tiny(f.A, 1), tiny(f.B, scale), tiny(f.C, scale*scale)
	}
	var lx, ly []float64
	for i, n := range ns {
		if ys[i] > 0 {
			lx, ly = append(lx, math.Log(float64(n))), append(ly, math.Log(ys[i]))
		}
	}
	if len(lx) >= 2 {
		f.Slope, _, f.SlopeR2 = lineFit(lx, ly)
	}
	return f
}

// solve does Gaussian elimination with partial pivoting on the first k
// unknowns of an augmented 3x4 system.
func solve(m [3][4]float64, k int) ([3]float64, bool) {
	var out [3]float64
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if math.Abs(m[p][c]) < 1e-12 {
			return out, false
		}
		m[c], m[p] = m[p], m[c]
		for r := c + 1; r < k; r++ {
			f := m[r][c] / m[c][c]
			for j := c; j < 4; j++ {
				if j < k || j == 3 {
					m[r][j] -= f * m[c][j]
				}
			}
		}
	}
	for r := k - 1; r >= 0; r-- {
		s := m[r][3]
		for j := r + 1; j < k; j++ {
			s -= m[r][j] * out[j]
		}
		out[r] = s / m[r][r]
	}
	return out, true
}

// lineFit fits y = a + b·x and returns b, a and R² (0 when the xs do
// not spread).
func lineFit(xs, ys []float64) (b, a, r2 float64) {
	a, b, r2, spread := ols(xs, ys)
	if !spread {
		return 0, a, 0
	}
	return b, a, r2
}
