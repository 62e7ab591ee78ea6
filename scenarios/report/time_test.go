package report_test

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
	"github.com/kpsim/kpsim/sim"
	"golang.org/x/perf/benchfmt"
)

// render writes r with every run many writer, by format.
func render(t *testing.T, r *scenarios.ManyReport, detail bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, write := range map[string]func(io.Writer) error{
		"table": func(w io.Writer) error { return report.TableWith(w, r, report.TableOptions{Detail: detail}) },
		"json":  func(w io.Writer) error { return report.JSON(w, r) },
		"csv":   func(w io.Writer) error { return report.CSV(w, r, noWeights{}) },
		"bench": func(w io.Writer) error { return report.Bench(w, r) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = b.String()
	}
	return out
}

type noWeights struct{}

func (noWeights) WeightByName(string) float64 { return 1 }

// TestKernelTime: every form gives the estimated kernel time beside the
// cycles, at the report's clock (the reference 2.6 GHz when the weights
// name none, or --ghz), and names the clock and its source.
func TestKernelTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		clock scenarios.Clock
		want  map[string][]string
	}{
		{"reference", scenarios.Clock{}, map[string][]string{
			// none: task 11,400,000 cycles / 2.6 GHz = 4.38 ms; system 12,000,000 = 4.62 ms.
			"table": {" clock:   est. kernel time = estimated cycles / 2.6 GHz: the registered weights' reference machine", "  4.38 ms ", "task time (est.)", "system time (est.)", "4.62 ms"},
			"json":  {`"task_est_kernel_ns": 4384615`, `"est_kernel_ns": 4615385`},
			"csv":   {",est_cycles,est_kernel_ns,sim_wall_ns,", ",12000000,4615385,5000000,"},
			"bench": {"4.384615e+06 task-est-kernel-ns/op", "clock-ghz: 2.6"},
		}},
		{"ghz", scenarios.Clock{GHz: 2, Source: "--ghz"}, map[string][]string{
			"table": {" clock:   est. kernel time = estimated cycles / 2 GHz: --ghz", "  5.70 ms ", "6.00 ms"},
			"json":  {`"task_est_kernel_ns": 5700000`, `"est_kernel_ns": 6000000`, `"ghz": 2`},
			"csv":   {",12000000,6000000,5000000,"},
			"bench": {"5.7e+06 task-est-kernel-ns/op", "clock-ghz: 2"},
		}},
	} {
		r := fixture()
		r.Meta.Costs.Clock = tc.clock
		out := render(t, r, false)
		for form, wants := range tc.want {
			for _, w := range wants {
				if !strings.Contains(out[form], w) {
					t.Errorf("%s %s: no %q in:\n%s", tc.name, form, w, out[form])
				}
			}
		}
	}
}

// TestSimWallLabel: kpsim's own run time is "sim wall" in every table
// (never a bare "wall" a reader could take for the kernel's), and a time
// too short to resolve does not print as 0s.
func TestSimWallLabel(t *testing.T) {
	r := fixture()
	r.Runs[2].WallNS = 0
	table := render(t, r, false)["table"]
	bpf := &scenarios.BPFReport{Scenario: "session", Kernel: "synthetic", Params: map[string]any{"programs": 2},
		Runs: []*scenarios.BPFRunReport{{Name: "none", Attaches: 2, OK: 1, Errors: map[string]int{"-EOPNOTSUPP": 1}, Paths: map[string]int{"fprobe": 1}, Digest: strings.Repeat("d", 64), WallNS: 0}}}
	var bt strings.Builder
	if err := report.BPFTable(&bt, bpf); err != nil {
		t.Fatal(err)
	}
	bare := regexp.MustCompile(`(^|[^m] )wall\b|\(wall\)| 0s\b`)
	for name, s := range map[string]string{"many": table, "bpf": bt.String()} {
		if !strings.Contains(s, "sim wall") {
			t.Errorf("%s: no \"sim wall\" in:\n%s", name, s)
		}
		for _, l := range strings.Split(s, "\n") {
			if bare.MatchString(l) {
				t.Errorf("%s: kpsim's run time not labelled sim wall, or printed as 0s: %q", name, l)
			}
		}
	}
	for _, w := range []string{" none/run (sim wall) ", "<1µs"} {
		if !strings.Contains(table, w) {
			t.Errorf("many: no %q in:\n%s", w, table)
		}
	}
	if !strings.Contains(bt.String(), "sim wall <1µs") {
		t.Errorf("bpf: a zero sim wall is not <1µs:\n%s", bt.String())
	}
}

// TestBenchUnits: the bench output parses with benchfmt; the estimated
// kernel time is a unit of its own (est-kernel-ns/op, tidied to
// est-kernel-sec/op) and kpsim's run time is sim-sec/op: no value is in
// sec/op (ns/op), which benchstat would show as the benchmark's time.
func TestBenchUnits(t *testing.T) {
	rd := benchfmt.NewReader(strings.NewReader(render(t, fixture(), false)["bench"]), "bench")
	units, exact := map[string]bool{}, map[string]bool{}
	results := 0
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			results++
			for _, v := range rec.Values {
				units[v.Unit] = true
				units[v.OrigUnit] = true
			}
		case *benchfmt.UnitMetadata:
			if rec.Key == "assume" && rec.Value == "exact" {
				exact[rec.Unit] = true
			}
		case *benchfmt.SyntaxError:
			t.Errorf("bench: %v", rec)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if results == 0 {
		t.Fatal("no results parsed")
	}
	for _, u := range []string{"sec/op", "ns/op"} {
		if units[u] {
			t.Errorf("a value in %s: benchstat takes it for the benchmark's own time", u)
		}
	}
	for _, u := range []string{"sim-sec/op", "est-kernel-ns/op", "est-kernel-sec/op", "task-est-kernel-sec/op", "task-est-cycles/op"} {
		if !units[u] {
			t.Errorf("no value in %s (units %v)", u, units)
		}
	}
	for _, u := range []string{"est-kernel-sec/op", "task-est-kernel-sec/op", "est-cycles/op"} {
		if !exact[u] {
			t.Errorf("%s is not assume=exact (exact: %v)", u, exact)
		}
	}
	if exact["sim-sec/op"] {
		t.Error("sim-sec/op marked exact: kpsim's run time is noisy")
	}
}

// ablationFixture is an --ablation report: none, series and every
// ablation run, by hand. kprobe-tree alone costs nothing in arm (a zero
// beside none's), and series-kprobe-tree decides differently.
func ablationFixture() *scenarios.ManyReport {
	r := fixture()
	none, series := r.Runs[0], r.Runs[1]
	r.Runs = r.Runs[:2]
	for i, s := range scenarios.AblationSpecs() {
		run := *series
		run.RunOutcome.Name = s.Name
		run.Phases = append([]scenarios.PhaseResult(nil), series.Phases...)
		run.Growth = nil
		run.TaskCycles = none.TaskCycles - float64(i)*1000
		switch s.Name {
		case "kprobe-tree":
			run.Phases[1].TaskCycles, run.Phases[1].EstCycles = 0, 0
		case "trace-event-index":
			run.TaskCycles = 0
		case "series-kprobe-tree":
			run.RunOutcome.Digest = strings.Repeat("c", 64)
		}
		if strings.HasPrefix(s.Name, "series") {
			run.TaskCycles = series.TaskCycles + float64(i)*1000
		}
		if s.Name == "trace-event-index" {
			run.TaskCycles = 0
		}
		r.Runs = append(r.Runs, &run)
	}
	return r
}

// TestAblationSummary: an --ablation table starts with its summary, one
// line per switch, marks a changed digest loudly, prints no "inf" or
// "0.00x" (a ratio over zero is a dash with its footnote), and has the
// per-phase tables only with Detail; the JSON keeps every run and adds
// the summary.
func TestAblationSummary(t *testing.T) {
	r := ablationFixture()
	bad := regexp.MustCompile(`\binf\b|0\.00x|map\[`)
	for _, detail := range []bool{false, true} {
		out := render(t, r, detail)
		var doc struct {
			Runs     []json.RawMessage          `json:"runs"`
			Ablation *scenarios.AblationSummary `json:"ablation_summary"`
		}
		if err := json.Unmarshal([]byte(out["json"]), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Runs) != len(r.Runs) || doc.Ablation == nil || len(doc.Ablation.Lines) != len(sim.AllSwitches()) || doc.Ablation.DigestsDiffer != 1 {
			t.Fatalf("JSON: %d runs (want %d), summary %+v (%d switches)", len(doc.Runs), len(r.Runs), doc.Ablation, len(sim.AllSwitches()))
		}
		table := out["table"]
		// The summary is the first table: after the header, before any other.
		blocks := strings.Split(table, "\n\n")
		if len(blocks) < 2 || !strings.HasPrefix(blocks[1], " ablation summary") {
			t.Fatalf("detail %v: the first table is not the ablation summary:\n%s", detail, table)
		}
		var lines []string
		for _, l := range strings.Split(blocks[1], "\n") {
			if strings.HasPrefix(l, " vs none, vs series:") {
				break // the notes under the table
			}
			if f := strings.Fields(l); len(f) > 0 && !strings.Contains(l, ":") && f[0] != "switch" && !strings.HasPrefix(l, "   ") {
				lines = append(lines, f[0])
			}
		}
		var want []string
		for _, l := range doc.Ablation.Lines {
			want = append(want, l.Switch)
		}
		if strings.Join(lines, " ") != strings.Join(want, " ") {
			t.Errorf("detail %v: summary lines\n got %v\nwant one per switch %v", detail, lines, want)
		}
		if phase := strings.Contains(table, "estimated cycles and kernel time by phase"); phase != detail {
			t.Errorf("detail %v: per-phase table printed: %v", detail, phase)
		}
		if !strings.Contains(table, "DECISIONS DIFFER in 1 runs: series-kprobe-tree (against series)") {
			t.Errorf("detail %v: the changed digest is not loud:\n%s", detail, table)
		}
		for _, l := range strings.Split(table, "\n") {
			if bad.MatchString(l) {
				t.Errorf("detail %v: %q", detail, l)
			}
		}
		if !strings.Contains(blocks[1], " -: no ratio") {
			t.Errorf("detail %v: a dash without its footnote:\n%s", detail, blocks[1])
		}
		if !detail && strings.Count(table, "\n") > 80 {
			t.Errorf("the summary report is %d lines:\n%s", strings.Count(table, "\n"), table)
		}
	}
	// Its lines: static-call-index alone against none, the series
	// without it against series; trace-event-index alone cost nothing,
	// so none/alone is a dash.
	table := render(t, r, false)["table"]
	for _, re := range []string{
		`(?m)^ static-call-index +[-+]?\S+% +\S+x += none +without it +[-+]\S+% += series$`,
		`(?m)^ kprobe-tree +\S+% +\S+x += none +without it +[-+]\S+% +DIFFERENT$`,
		`(?m)^ trace-event-index +-100\.0% +- += none +-$`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("no line %s in:\n%s", re, table)
		}
	}
}

// TestNoMapLiterals: no report prints a Go map literal (params,
// errors, paths): maps print as sorted key=value lists.
func TestNoMapLiterals(t *testing.T) {
	outs := render(t, ablationFixture(), true)
	bpf := &scenarios.BPFReport{Scenario: "multi", Kernel: "synthetic", Params: map[string]any{"functions": 0, "pattern": "", "nested": map[string]int{"b": 2, "a": 1}},
		Runs: []*scenarios.BPFRunReport{{Name: "none", Attaches: 50, Errors: map[string]int{"-EOPNOTSUPP": 50}, Paths: map[string]int{}, Digest: strings.Repeat("d", 64)}}}
	var b strings.Builder
	if err := report.BPFTable(&b, bpf); err != nil {
		t.Fatal(err)
	}
	outs["bpf"] = b.String()
	for name, s := range outs {
		if strings.Contains(s, "map[") {
			t.Errorf("%s: a Go map literal:\n%s", name, s)
		}
	}
	for _, w := range []string{`params:   functions=0 nested={a=1 b=2} pattern=""`, "errors -EOPNOTSUPP=50 paths none"} {
		if !strings.Contains(outs["bpf"], w) {
			t.Errorf("bpf: no %q in:\n%s", w, outs["bpf"])
		}
	}
}
