package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/scenarios"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// plotSweep is a two-run sweep whose totals span 1e5..2e6 cycles, the
// range where gonum's LogTicks label 100000 beside 1e+06.
func plotSweep() *scenarios.Sweep {
	ns := []int{1000, 2000, 4000, 8000}
	s := &scenarios.Sweep{Scenario: "many", Via: "register_kprobe", Ns: ns,
		Meta: &scenarios.Meta{
			Kpsim:  scenarios.Version{Version: "(devel)", Revision: "0123456789abcdef", Go: "go1.26"},
			Kernel: scenarios.KernelInfo{Source: "synthetic", Profile: "reference", Generation: "7.3", Modules: []string{"kvm"}},
			Costs:  scenarios.CostInfo{Regime: "built-in cold profile"},
		}}
	for i, run := range []struct {
		name    string
		patches []string
		ys      []int64
	}{
		{"none", nil, []int64{150_000, 350_000, 800_000, 1_900_000}},
		{"series", []string{"kprobe-tree", "iter-can-probe"}, []int64{100_000, 200_000, 400_000, 800_000}},
	} {
		r := &scenarios.SweepRun{Name: run.name, Patches: run.patches, Fits: map[string]scenarios.GrowthFit{"total": {Slope: 1 + float64(i)/10}}}
		for j, n := range ns {
			r.Points = append(r.Points, scenarios.SweepPoint{N: n, EstCycles: run.ys[j], Registered: n, Targets: n})
		}
		s.Runs = append(s.Runs, r)
	}
	return s
}

var svgText = regexp.MustCompile(`(?s)<text x="([-0-9.]+)" y="([-0-9.]+)"[^>]*>([^<]*)</text>`)

// TestPlotLegendOutsideData: the legend is drawn to the right of the data
// area (every legend entry right of the last x tick label, which sits at
// the data area's right edge), in the SVG as drawn and in the layout of
// both formats.
func TestPlotLegendOutsideData(t *testing.T) {
	s := plotSweep()
	svg, err := Plot(s, PlotOptions{Format: "svg"})
	if err != nil {
		t.Fatal(err)
	}
	xOf := map[string]float64{}
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		xOf[m[3]] = x
	}
	last, ok := xOf["8k"]
	if !ok {
		t.Fatalf("no x tick 8k in the SVG's text: %v", xOf)
	}
	for _, entry := range []string{"none (exponent 1.00)", "series (exponent 1.10)"} {
		x, ok := xOf[entry]
		if !ok || x <= last {
			t.Errorf("legend entry %q at x=%v (found %v), want right of the data area (last tick at %v)", entry, x, ok, last)
		}
	}
	for _, format := range []string{"svg", "png"} {
		_, lay, err := plotLayout(s, PlotOptions{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]struct{ Min, Max [2]float64 }{"legend": rect(lay.Legend), "caption": rect(lay.Caption)} {
			d := rect(lay.Data)
			if r.Min[0] < d.Max[0] && d.Min[0] < r.Max[0] && r.Min[1] < d.Max[1] && d.Min[1] < r.Max[1] {
				t.Errorf("%s: %s %v intersects the data area %v", format, name, r, d)
			}
		}
	}
}

// TestPlotTickLabels: the y ticks of a 1e5..2e6 range are in one notation
// (SI suffixes), never 1e+06 beside 100000.
func TestPlotTickLabels(t *testing.T) {
	si := regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[kMGT]?$`)
	svg, err := Plot(plotSweep(), PlotOptions{Format: "svg"})
	if err != nil {
		t.Fatal(err)
	}
	xTick := map[string]bool{}
	for _, n := range plotSweep().Ns {
		xTick[shortN(n)] = true
	}
	var labels []string
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		// The y axis's labels: left of the data, not an N of the x axis.
		if x, _ := strconv.ParseFloat(m[1], 64); x < 60 && m[3] != "" && !strings.Contains(m[3], " ") && !xTick[m[3]] {
			labels = append(labels, m[3])
		}
	}
	if len(labels) < 2 {
		t.Fatalf("y labels %q: want at least two", labels)
	}
	for _, l := range labels {
		if !si.MatchString(l) {
			t.Errorf("y tick label %q is not in SI notation (labels %q)", l, labels)
		}
	}
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{1e5, 2e6, []string{"100k", "1M"}},
		{2.5e8, 5e9, []string{"300M", "500M", "1G", "2G", "3G"}}, // within about one decade: 2, 3, 5 labelled too
		{0.5, 40, []string{"1", "10"}},
	} {
		got := map[string]bool{}
		for _, tk := range (siTicks{plot.LogTicks{Prec: -1}}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got[tk.Label] = true
				if !si.MatchString(tk.Label) {
					t.Errorf("%g..%g: label %q", tc.lo, tc.hi, tk.Label)
				}
			}
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("%g..%g: labels %v lack %q", tc.lo, tc.hi, got, w)
			}
		}
	}
}

// TestPlotCaption: the caption under the plot names the kernel and its
// generation, the weights, each run's switches and the kpsim build.
func TestPlotCaption(t *testing.T) {
	svg, err := Plot(plotSweep(), PlotOptions{Format: "svg"})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		text.WriteString(m[3] + " ")
	}
	for _, want := range []string{"synthetic image (profile reference)", "generation 7.3", "weights: built-in cold profile",
		"none = no switch", "series = kprobe-tree, iter-can-probe", "kpsim (devel) 0123456789ab go1.26", "cycles, all contexts"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the SVG's text lacks %q:\n%s", want, text.String())
		}
	}
}

func rect(r vg.Rectangle) struct{ Min, Max [2]float64 } {
	return struct{ Min, Max [2]float64 }{[2]float64{float64(r.Min.X), float64(r.Min.Y)}, [2]float64{float64(r.Max.X), float64(r.Max.Y)}}
}

func ExamplePlotCaption() {
	for _, line := range PlotCaption(plotSweep()) {
		fmt.Println(line)
	}
	// Output:
	// kernel: synthetic image (profile reference), generation 7.3, 1 module. weights: built-in cold profile.
	// switches (via register_kprobe): none = no switch; series = kprobe-tree, iter-can-probe.
	// made by kpsim (devel) 0123456789ab go1.26.
}

// TestPlotCaptionDoors: a sweep over doors names each switch set once,
// and the caption names the runs whose curve is not drawn, and why.
func TestPlotCaptionDoors(t *testing.T) {
	s := plotSweep()
	for _, r := range s.Runs {
		r.Name += "@register_kprobe"
	}
	for _, name := range []string{"none@kprobe_events", "series@kprobe_events"} {
		set, _, _ := strings.Cut(name, "@")
		r := &scenarios.SweepRun{Name: name, NoFit: "attached no probe at any N"}
		if set == "series" {
			r.Patches = s.Runs[1].Patches
		}
		for _, n := range s.Ns {
			r.Points = append(r.Points, scenarios.SweepPoint{N: n, EstCycles: 1000, Targets: n})
		}
		s.Runs = append(s.Runs, r)
	}
	got := strings.Join(PlotCaption(s), "\n")
	for _, want := range []string{
		"switches (via register_kprobe): none = no switch; series = kprobe-tree, iter-can-probe.",
		"not drawn (attached no probe at any N): none@kprobe_events, series@kprobe_events.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("caption lacks %q:\n%s", want, got)
		}
	}
}
