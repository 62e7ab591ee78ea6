package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotOptions choose what a sweep plot shows.
type PlotOptions struct {
	Phase    string // a phase name or "total" (the default)
	PerProbe bool   // cycles per probe (cycles / N) instead of cycles
	Linear   bool   // linear axes (default log-log)
	Format   string // "svg" or "png"
}

// PlotData is what a plot draws, embedded in its SVG as a <metadata>
// element so that a test (or a reader) can check the points.
type PlotData struct {
	Phase    string      `json:"phase"`
	PerProbe bool        `json:"per_probe"`
	Log      bool        `json:"log"`
	Curves   []PlotCurve `json:"curves"`
}

// PlotCurve is one run's curve.
type PlotCurve struct {
	Name   string       `json:"name"`
	Points [][2]float64 `json:"points"` // (N, value)
	Slope  float64      `json:"loglog_slope"`
	// Missing says why a curve is not drawn (it attached no probe at
	// any N, or at one N only); Omitted are the Ns left out because
	// the run attached no probe there.
	Missing string `json:"missing,omitempty"`
	Omitted []int  `json:"omitted_n,omitempty"`
}

// PlotPoints returns the curves the options select; points at which the
// run attached no probe are left out (their cycles are refusals', not
// probes'), as on log axes are points with no cycles (log 0 has no place
// on the axis). A curve left with no points is not drawn.
func PlotPoints(s *scenarios.Sweep, o PlotOptions) (PlotData, error) {
	phase := o.Phase
	if phase == "" {
		phase = "total"
	}
	if phase != "total" {
		ok := false
		for _, p := range s.Phases {
			ok = ok || p == phase
		}
		if !ok {
			return PlotData{}, fmt.Errorf("--plot-phase: no run counted in phase %q (phases: total, %s)", phase, strings.Join(s.Phases, ", "))
		}
	}
	d := PlotData{Phase: phase, PerProbe: o.PerProbe, Log: !o.Linear}
	for _, run := range s.Runs {
		c := PlotCurve{Name: run.Name, Slope: run.Fits[phase].Slope, Omitted: run.Omitted}
		if run.NoFit != "" {
			c.Missing, c.Slope = run.NoFit, 0
		}
		for i, y := range run.Series(phase) {
			if !run.Points[i].Attached() {
				continue
			}
			n := float64(s.Ns[i])
			if o.PerProbe {
				y /= n
			}
			if d.Log && y <= 0 {
				continue
			}
			c.Points = append(c.Points, [2]float64{n, y})
		}
		d.Curves = append(d.Curves, c)
	}
	return d, nil
}

// Plot draws one curve per run (gonum.org/v1/plot) and returns the SVG
// or PNG bytes.
func Plot(s *scenarios.Sweep, o PlotOptions) ([]byte, error) {
	d, err := PlotPoints(s, o)
	if err != nil {
		return nil, err
	}
	p := plot.New()
	what := "estimated cycles"
	if d.PerProbe {
		what = "estimated cycles per probe"
	}
	p.Title.Text = fmt.Sprintf("kpsim sweep %s: %s, phase %s", s.Scenario, what, d.Phase)
	p.X.Label.Text = "N (probes)"
	p.Y.Label.Text = what
	if d.Log {
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	}
	if len(s.Ns) <= 12 { // a tick at every N of the sweep
		var ticks []plot.Tick
		for _, n := range s.Ns {
			ticks = append(ticks, plot.Tick{Value: float64(n), Label: shortN(n)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(12), -vg.Points(12)
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, c := range d.Curves {
		if len(c.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(c.Points))
		for j, pt := range c.Points {
			xys[j].X, xys[j].Y = pt[0], pt[1]
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		col := plotutil.Color(i)
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		label := c.Name
		if len(c.Points) >= 2 && c.Missing == "" {
			label = fmt.Sprintf("%s (exponent %.2f)", c.Name, c.Slope)
		}
		p.Legend.Add(label, l, pts)
		drawn++
	}
	if drawn == 0 {
		attached := false
		for _, c := range d.Curves {
			attached = attached || c.Missing == ""
		}
		if !attached {
			return nil, fmt.Errorf("nothing to plot: no run attached a probe at any N (without --plot the report and its warnings say why)")
		}
		return nil, fmt.Errorf("nothing to plot: phase %s counted nothing at any N", d.Phase)
	}
	format := o.Format
	if format == "" {
		format = "svg"
	}
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	if format != "svg" {
		return buf.Bytes(), nil
	}
	meta, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	svg := buf.String()
	i := strings.LastIndex(svg, "</svg>")
	if i < 0 {
		return nil, fmt.Errorf("plot: no </svg> in the SVG")
	}
	var esc bytes.Buffer
	for _, r := range string(meta) {
		switch r {
		case '<':
			esc.WriteString("&lt;")
		case '&':
			esc.WriteString("&amp;")
		default:
			esc.WriteRune(r)
		}
	}
	return []byte(svg[:i] + `<metadata id="kpsim-plot-data">` + esc.String() + "</metadata>\n" + svg[i:]), nil
}

// shortN writes 5000 as 5k and 1500 as 1.5k.
func shortN(n int) string {
	if n >= 1000 && n%100 == 0 {
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1000), "0"), ".") + "k"
	}
	return fmt.Sprint(n)
}
