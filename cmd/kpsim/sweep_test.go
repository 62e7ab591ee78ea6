package main

import (
	"encoding/json"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

type sweepJSON struct {
	Schema int   `json:"schema_version"`
	Ns     []int `json:"n"`
	Runs   []struct {
		Name   string
		Points []struct {
			N         int   `json:"n"`
			EstCycles int64 `json:"est_cycles"`
		}
		Fits map[string]struct {
			A, B, C float64
			Slope   float64 `json:"loglog_slope"`
		}
	}
}

var curvePath = regexp.MustCompile(`<path d="([^"]+)" style="[^"]*stroke-width:1.5[^"]*"`)

// svgCurves returns the polylines of 1.5-point strokes (the curves and
// the legend's samples) as lists of (x, y) in SVG units.
func svgCurves(t *testing.T, svg string) [][][2]float64 {
	var out [][][2]float64
	for _, m := range curvePath.FindAllStringSubmatch(svg, -1) {
		var pts [][2]float64
		for _, seg := range strings.FieldsFunc(m[1], func(r rune) bool { return r == 'M' || r == 'L' }) {
			xy := strings.Split(seg, ",")
			if len(xy) != 2 {
				t.Fatalf("path segment %q", seg)
			}
			x, _ := strconv.ParseFloat(xy[0], 64)
			y, _ := strconv.ParseFloat(xy[1], 64)
			pts = append(pts, [2]float64{x, y})
		}
		out = append(out, pts)
	}
	return out
}

// TestSweepPlotData: the SVG has one curve per run, with one vertex per
// N, placed where log N and log cycles put them, and its embedded data
// are the sweep's figures.
func TestSweepPlotData(t *testing.T) {
	dir := t.TempDir()
	svgPath := filepath.Join(dir, "sweep.svg")
	out := mustKpsim(t, append([]string{"sweep", "many", "--n", "100,200,400", "--format", "json", "--plot", svgPath}, small...)...)
	var sw sweepJSON
	if err := json.Unmarshal([]byte(out), &sw); err != nil {
		t.Fatal(err)
	}
	if len(sw.Runs) != 2 || len(sw.Ns) != 3 || sw.Runs[0].Name != "none" || sw.Runs[1].Name != "series" {
		t.Fatalf("sweep %+v", sw)
	}
	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	// The embedded data.
	i, j := strings.Index(svg, `<metadata id="kpsim-plot-data">`), strings.Index(svg, "</metadata>")
	if i < 0 || j < i {
		t.Fatal("no plot data in the SVG")
	}
	var pd struct {
		Log    bool
		Curves []struct {
			Name   string
			Points [][2]float64
		}
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(svg[i+len(`<metadata id="kpsim-plot-data">`):j])), &pd); err != nil {
		t.Fatal(err)
	}
	if !pd.Log || len(pd.Curves) != len(sw.Runs) {
		t.Fatalf("plot data: log %v, %d curves", pd.Log, len(pd.Curves))
	}
	for ci, c := range pd.Curves {
		run := sw.Runs[ci]
		if c.Name != run.Name || len(c.Points) != len(run.Points) {
			t.Fatalf("curve %d: %s with %d points, run %s has %d", ci, c.Name, len(c.Points), run.Name, len(run.Points))
		}
		for k, p := range c.Points {
			if p[0] != float64(run.Points[k].N) || p[1] != float64(run.Points[k].EstCycles) {
				t.Errorf("curve %s point %d = %v, sweep says (%d, %d)", c.Name, k, p, run.Points[k].N, run.Points[k].EstCycles)
			}
		}
	}
	// The drawn curves: one polyline per run with a vertex per N (the
	// legend's two-point samples aside).
	var curves [][][2]float64
	for _, c := range svgCurves(t, svg) {
		if len(c) == len(sw.Ns) {
			curves = append(curves, c)
		}
	}
	if len(curves) != len(sw.Runs) {
		t.Fatalf("%d drawn curves of %d points, want %d", len(curves), len(sw.Ns), len(sw.Runs))
	}
	// Geometry: on log-log axes, x is affine in log N and y in log cycles,
	// with one map for every curve.
	type pair struct{ v, px float64 }
	var xs, ys []pair
	for ci, c := range curves {
		for k, p := range c {
			xs = append(xs, pair{math.Log(float64(sw.Ns[k])), p[0]})
			ys = append(ys, pair{math.Log(float64(sw.Runs[ci].Points[k].EstCycles)), p[1]})
		}
	}
	for axis, ps := range map[string][]pair{"x": xs, "y": ys} {
		sort.Slice(ps, func(a, b int) bool { return ps[a].v < ps[b].v })
		lo, hi := ps[0], ps[len(ps)-1]
		for _, p := range ps {
			want := lo.px + (p.v-lo.v)/(hi.v-lo.v)*(hi.px-lo.px)
			if math.Abs(p.px-want) > 0.1 {
				t.Errorf("%s axis: value e^%.3f drawn at %.3f, the log scale puts it at %.3f", axis, p.v, p.px, want)
			}
		}
	}
	// The fits reproduce the exact counts (three points, three terms).
	for _, run := range sw.Runs {
		f := run.Fits["total"]
		for _, p := range run.Points {
			n := float64(p.N)
			if got := f.A + f.B*n + f.C*n*n; math.Abs(got-float64(p.EstCycles)) > 1e-6*float64(p.EstCycles) {
				t.Errorf("%s: fit at %d = %.0f, counted %d", run.Name, p.N, got, p.EstCycles)
			}
		}
		if f.Slope < 0.5 || f.Slope > 2.5 {
			t.Errorf("%s: exponent %v", run.Name, f.Slope)
		}
	}
}

func TestSweepFormats(t *testing.T) {
	args := append([]string{"sweep", "many", "--n", "100,200"}, small...)
	out := mustKpsim(t, args...)
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 100 {
			t.Errorf("table line of %d columns: %q", len(l), l)
		}
	}
	if !strings.Contains(out, "log-log slope") || !strings.Contains(out, "version:") {
		t.Errorf("table lacks fits or meta:\n%s", out)
	}
	bench, errs, code := runKpsim(append(args, "--format", "bench")...)
	if code != 0 || !strings.Contains(bench, "BenchmarkMany/n=100/patches=none/phase=total") || !strings.Contains(bench, "BenchmarkMany/n=200/patches=series/phase=total") {
		t.Errorf("bench: exit %d %s\n%.500s", code, errs, bench)
	}
	csvOut, _, code := runKpsim(append(args, "--format", "csv", "--plot-linear", "--plot", filepath.Join(t.TempDir(), "p.png"))...)
	if code != 0 || !strings.HasPrefix(csvOut, "run,patches,n,phase") {
		t.Errorf("csv: exit %d %.200s", code, csvOut)
	}
}

func TestSweepRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "many"}, "--n: required"},
		{[]string{"sweep", "many", "--n", "100"}, "at least two"},
		{[]string{"sweep", "many", "--n", "100:50:10"}, "--n"},
		{[]string{"sweep", "kallsyms", "--n", "1,2"}, "no probe count"},
		{[]string{"sweep"}, "missing scenario"},
		{[]string{"sweep", "many", "--n", "1,2", "--probes", "x"}, "--probes"},
		{[]string{"sweep", "many", "--n", "1,2", "--plot-linear"}, "--plot-linear: applies with --plot only"},
		{[]string{"sweep", "many", "--n", "1,2", "--plot", filepath.Join(dir, "p.pdf")}, "--plot: want a .svg or .png"},
		{[]string{"sweep", "many", "--n", "1,2", "--plot", filepath.Join(dir, "p.svg"), "--plot-phase", "nope"}, "--plot-phase"},
		{[]string{"sweep", "many", "--n", "1,2", "--format", "xml"}, "--format"},
		{[]string{"sweep", "many", "--n", "1,2", "--targets", "all-functions"}, "--n: applies to --targets generated only"},
		{[]string{"sweep", "many", "--n", "1,2", "--out", dir}, "is a directory"},
		{[]string{"sweep", "many", "--n", "1,2", "--no-such-flag"}, "no-such-flag"},
	} {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", tc.args, code, errs, tc.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused sweeps left files: %v", ents)
	}
}

// TestSweepVias: --vias sweeps every run through each front door, one
// curve per run and door.
func TestSweepVias(t *testing.T) {
	out := mustKpsim(t, append([]string{"sweep", "many", "--n", "100,200", "--traced", "--vias", "register_kprobe,kprobe_events", "--format", "json"}, small...)...)
	var sw sweepJSON
	if err := json.Unmarshal([]byte(out), &sw); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range sw.Runs {
		names = append(names, r.Name)
	}
	if strings.Join(names, " ") != "none@register_kprobe series@register_kprobe none@kprobe_events series@kprobe_events" {
		t.Errorf("runs %v", names)
	}
	for _, r := range sw.Runs {
		if len(r.Points) != 2 || r.Points[1].EstCycles <= r.Points[0].EstCycles {
			t.Errorf("%s: points %+v", r.Name, r.Points)
		}
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--vias", "register_kprobe", "--via", "perf_kprobe"}},
		{[]string{"--vias", "register_kprobe", "--via", "register_kprobe"}},
		{[]string{"--vias", "tracefs"}},
	} {
		_, errs, code := runKpsim(append(append([]string{"sweep", "many", "--n", "1,2"}, tc.args...), small...)...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--") {
			t.Errorf("%v: exit %d %q", tc.args, code, errs)
		}
	}
}
