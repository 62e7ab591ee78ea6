package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
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

// The plot's page: the plot proper (title, axes, data area), the legend
// to the right of it (outside the data area, so it never covers a curve)
// and the caption under both.
const (
	plotWidth   = 8 * vg.Inch // the plot proper, axes included
	plotHeight  = 5 * vg.Inch
	captionSize = 7 // points
	legendSize  = 9
	pagePad     = 6 // points between the parts and at the page's edges
)

// PlotLayout is where a plot's parts were drawn, in points from the
// page's lower left corner (vg.Rectangle's units): tests check that the
// legend stays outside the data area.
type PlotLayout struct {
	Page    vg.Rectangle `json:"page"`
	Data    vg.Rectangle `json:"data"`
	Legend  vg.Rectangle `json:"legend"`
	Caption vg.Rectangle `json:"caption"`
}

// Plot draws one curve per run (gonum.org/v1/plot) and returns the SVG
// or PNG bytes: the legend to the right of the data area, the y ticks in
// one notation (SI suffixes: 100k, 1M), and a caption naming the kernel,
// its generation, the weights, each run's switches and the kpsim build
// (PlotCaption).
func Plot(s *scenarios.Sweep, o PlotOptions) ([]byte, error) {
	b, _, err := plotLayout(s, o)
	return b, err
}

func plotLayout(s *scenarios.Sweep, o PlotOptions) ([]byte, PlotLayout, error) {
	var lay PlotLayout
	d, err := PlotPoints(s, o)
	if err != nil {
		return nil, lay, err
	}
	p := plot.New()
	// The sweep's figure is the system's (every context: the task, the
	// optimizer's kworker and the other CPUs' IPI handlers; perf stat -a).
	what, unit := "estimated kernel cycles", "cycles, all contexts"
	if d.PerProbe {
		what, unit = "estimated kernel cycles per probe", "cycles/probe, all contexts"
	}
	scale := "log-log"
	if !d.Log {
		scale = "linear"
	}
	p.Title.Text = fmt.Sprintf("kpsim sweep %s: %s, phase %s", s.Scenario, what, d.Phase)
	p.X.Label.Text = fmt.Sprintf("N (probes registered; %s axes)", scale)
	p.Y.Label.Text = unit // the title says what they are
	p.X.Tick.Marker, p.Y.Tick.Marker = siTicks{plot.DefaultTicks{}}, siTicks{plot.DefaultTicks{}}
	if d.Log {
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = siTicks{plot.LogTicks{Prec: -1}}, siTicks{plot.LogTicks{Prec: -1}}
	}
	if len(s.Ns) <= 12 { // a tick at every N of the sweep
		var ticks []plot.Tick
		for _, n := range s.Ns {
			ticks = append(ticks, plot.Tick{Value: float64(n), Label: shortN(n)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = legendSize
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
			return nil, lay, err
		}
		col := plotutil.Color(i)
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		legend.Add(legendLabel(c), l, pts)
		drawn++
	}
	if drawn == 0 {
		attached := false
		for _, c := range d.Curves {
			attached = attached || c.Missing == ""
		}
		if !attached {
			return nil, lay, fmt.Errorf("nothing to plot: no run attached a probe at any N (without --plot the report and its warnings say why)")
		}
		return nil, lay, fmt.Errorf("nothing to plot: phase %s counted nothing at any N", d.Phase)
	}
	// The legend's width: its widest entry (as Legend.Rectangle measures).
	var legendW vg.Length
	for _, c := range d.Curves {
		if len(c.Points) > 0 {
			legendW = max(legendW, legend.ThumbnailWidth+legend.TextStyle.Rectangle("  "+legendLabel(c)).Max.X)
		}
	}
	legendW += 2 * vg.Points(pagePad)
	pageW := plotWidth + legendW
	capStyle := legend.TextStyle
	capStyle.Font.Size = captionSize
	var capLines []string
	for _, line := range PlotCaption(s) {
		capLines = append(capLines, wrapText(capStyle, line, pageW-2*vg.Points(pagePad))...)
	}
	lineH := capStyle.Rectangle("Xg").Size().Y * 1.2
	capH := lineH*vg.Length(len(capLines)) + 2*vg.Points(pagePad)
	pageH := plotHeight + capH

	format := o.Format
	if format == "" {
		format = "svg"
	}
	vc, err := draw.NewFormattedCanvas(pageW, pageH, format)
	if err != nil {
		return nil, lay, err
	}
	page := draw.New(vc)
	lay.Page = page.Rectangle
	page.SetColor(color.White) // the legend's and caption's ground too
	page.Fill(page.Rectangle.Path())
	plotC := draw.Crop(page, 0, -legendW, capH, 0)
	p.Draw(plotC)
	dataC := p.DataCanvas(plotC)
	lay.Data = dataC.Rectangle
	legC := draw.Canvas{Canvas: page.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: plotC.Max.X + vg.Points(pagePad), Y: dataC.Min.Y},
		Max: vg.Point{X: page.Max.X - vg.Points(pagePad), Y: dataC.Max.Y},
	}}
	legend.Draw(legC)
	lay.Legend = legC.Rectangle
	lay.Caption = vg.Rectangle{Min: vg.Point{X: page.Min.X, Y: page.Min.Y}, Max: vg.Point{X: page.Max.X, Y: page.Min.Y + capH}}
	y := page.Min.Y + capH - vg.Points(pagePad) - lineH
	for _, line := range capLines {
		page.FillText(capStyle, vg.Point{X: page.Min.X + vg.Points(pagePad), Y: y}, line)
		y -= lineH
	}
	var buf bytes.Buffer
	if _, err := vc.WriteTo(&buf); err != nil {
		return nil, lay, err
	}
	if format != "svg" {
		return buf.Bytes(), lay, nil
	}
	b, err := withMetadata(buf.String(), d)
	return b, lay, err
}

// legendLabel is a curve's legend entry.
func legendLabel(c PlotCurve) string {
	if len(c.Points) >= 2 && c.Missing == "" {
		return fmt.Sprintf("%s (exponent %.2f)", c.Name, c.Slope)
	}
	return c.Name
}

// PlotCaption is the text under a sweep's plot: the kernel (the synthetic
// profile or the image's release) and its generation, the weights (cost
// regime or --costs file), each run's switch set and the kpsim build.
func PlotCaption(s *scenarios.Sweep) []string {
	var out []string
	if m := s.Meta; m != nil {
		k := m.Kernel
		kern := "synthetic image (profile " + k.Profile + ")"
		if k.Source != "" && k.Source != "synthetic" {
			kern = filepath.Base(k.Path)
			if k.Release != "" {
				kern = "Linux " + k.Release + " (" + kern + ")"
			}
		}
		if k.Generation != "" {
			kern += ", generation " + k.Generation
		}
		switch n := len(k.Modules); {
		case n == 1:
			kern += ", 1 module"
		case n > 1:
			kern += fmt.Sprintf(", %d modules", n)
		}
		w := m.Costs.Regime
		if m.Costs.File != "" {
			w = fmt.Sprintf("--costs %s (%d weights set by the file; %s)", m.Costs.File, m.Costs.Overrides, m.Costs.Regime)
		}
		if w == "" {
			w = "the registered defaults"
		}
		out = append(out, "kernel: "+kern+". weights: "+w+".")
	}
	// One entry per switch set: a sweep over doors names its runs
	// SET@DOOR, and the set's switches are the same at every door.
	var sets, why []string
	seen := map[string]bool{}
	missing := map[string][]string{} // why a run has no curve -> the runs
	for _, r := range s.Runs {
		if r.NoFit != "" {
			if missing[r.NoFit] == nil {
				why = append(why, r.NoFit)
			}
			missing[r.NoFit] = append(missing[r.NoFit], r.Name)
		}
		set, _, _ := strings.Cut(r.Name, "@")
		if seen[set] {
			continue
		}
		seen[set] = true
		sw := "no switch"
		if len(r.Patches) > 0 {
			sw = strings.Join(r.Patches, ", ")
		}
		sets = append(sets, fmt.Sprintf("%s = %s", set, sw))
	}
	via := ""
	if s.Via != "" {
		via = fmt.Sprintf(" (via %s)", s.Via)
	}
	out = append(out, "switches"+via+": "+strings.Join(sets, "; ")+".")
	for _, w := range why {
		out = append(out, "not drawn ("+w+"): "+strings.Join(missing[w], ", ")+".")
	}
	v := scenarios.BuildVersion()
	if s.Meta != nil {
		v = s.Meta.Kpsim
	}
	out = append(out, "made by "+shortVersion(v)+".")
	return out
}

// shortVersion is the build in a caption's few words: "kpsim (devel)
// 1a2b3c4d5e6f+dirty go1.26", or "(no VCS stamp)".
func shortVersion(v scenarios.Version) string {
	s := "kpsim " + v.Version
	if v.Revision == "" {
		return s + " (no VCS stamp) " + v.Go
	}
	r := v.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if v.Modified {
		r += "+dirty"
	}
	return s + " " + r + " " + v.Go
}

// wrapText breaks line at spaces so that no piece is wider than w in sty.
func wrapText(sty draw.TextStyle, line string, w vg.Length) []string {
	var out []string
	cur := ""
	for _, word := range strings.Fields(line) {
		next := word
		if cur != "" {
			next = cur + " " + word
		}
		if cur != "" && sty.Rectangle(next).Max.X > w {
			out = append(out, cur)
			next = word
		}
		cur = next
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// siTicks relabels another ticker's labelled ticks in one notation, SI
// suffixes (950, 100k, 2.5M, 1G), where LogTicks and DefaultTicks mix
// 1e+06 with 100000.
type siTicks struct{ plot.Ticker }

// Ticks implements plot.Ticker. A range with fewer than two labelled
// ticks (a log axis within one decade) also labels the ticks at 2, 3 and
// 5 times a power of ten, so that the axis can be read.
func (t siTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := t.Ticker.Ticks(lo, hi)
	labelled := 0
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = siLabel(ts[i].Value)
			if lo <= ts[i].Value && ts[i].Value <= hi { // LogTicks reaches past the range
				labelled++
			}
		}
	}
	if labelled >= 2 {
		return ts
	}
	for i := range ts {
		if v := ts[i].Value; v > 0 && ts[i].Label == "" {
			m := v / math.Pow(10, math.Floor(math.Log10(v)))
			if r := math.Round(m); math.Abs(m-r) < 1e-9 && (r == 2 || r == 3 || r == 5) {
				ts[i].Label = siLabel(v)
			}
		}
	}
	return ts
}

// siLabel writes v with at most three significant digits and an SI
// suffix: 100000 as 100k, 1e6 as 1M, 2500000 as 2.5M, 0.5 as 0.5.
func siLabel(v float64) string {
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	suffix := ""
	for _, u := range []struct {
		div float64
		s   string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.div*0.9995 {
			v, suffix = v/u.div, u.s
			break
		}
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return neg + strconv.FormatFloat(r, 'f', -1, 64) + suffix
}

// withMetadata embeds d in the SVG as <metadata id="kpsim-plot-data">.
func withMetadata(svg string, d PlotData) ([]byte, error) {
	meta, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
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
