package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
	"github.com/kpsim/kpsim/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixture is a small hand-made report: two runs that decided alike, a
// third that did not, counts in two phases, kernel memory and a growth
// fit. Made by hand, so that the goldens depend on the renderers alone.
func fixture() *scenarios.ManyReport {
	lookup, arm := "name_lookup", "arm" // two of the many scenario's phases
	run := func(name string, cyc float64, digest string, reasons map[string]int) *scenarios.RunResult {
		r := &scenarios.RunResult{RunOutcome: scenarios.RunOutcome{Name: name, Registered: 3, Optimized: 2, NotTried: 1,
			Rejected: map[string]int{"EINVAL": 1}, Reasons: reasons, Digest: digest, WhyDigest: strings.Repeat("e", 64),
			Ops: map[string]uint64{"kprobe.hash.walk": 40, "rhashtable.insert": 3}, TotalOps: 1234567},
			EstCycles: cyc, TaskCycles: cyc * 0.95, WallNS: 5e6, RetainedBytes: 3 << 20,
			KernelMem: map[string]int64{"kprobe.table.bytes": 512, "kprobe.rhashtable.peak_bytes": 0}}
		r.Phases = []scenarios.PhaseResult{
			{Name: lookup, Ops: 1000000, EstCycles: cyc * 0.75, TaskCycles: cyc * 0.75, WallNS: 4e6, Counts: map[string]uint64{"kallsyms.visit": 1000000}},
			{Name: arm, Ops: 234567, EstCycles: cyc * 0.25, TaskCycles: cyc * 0.2, WallNS: 1e6, Counts: map[string]uint64{"text_poke": 234567}},
		}
		// A fifth of arming is other CPUs' IPI handling.
		r.Phases[0].Contexts[sim.Task] = cyc * 0.75
		r.Phases[1].Contexts[sim.Task], r.Phases[1].Contexts[sim.OtherCPU] = cyc*0.2, cyc*0.05
		r.Contexts[sim.Task], r.Contexts[sim.OtherCPU] = cyc*0.95, cyc*0.05
		if name != "none" {
			r.Patches = []string{"kprobe-rhashtable"}
		}
		r.Results = []scenarios.ProbeResult{{Addr: 0xffffffff81000000}, {Addr: 0xffffffff81000040, Code: 22}}
		return r
	}
	reasons := map[string]int{"optimized": 2, "not optimized: jump target": 1, "refused: blacklisted": 1}
	series := run("series", 9.5e6, strings.Repeat("a", 64), reasons)
	series.Growth = []*scenarios.Growth{{Pass: "attach", K: 100, Fit: scenarios.Fit{A: 900, B: 0.25, R2: 0.99, NMax: 300, Share: 0.08, Growth: 1.1},
		Phases: map[string]scenarios.Fit{lookup: {A: 500, B: 0.2, R2: 0.98, NMax: 300, Share: 0.1}}}}
	return &scenarios.ManyReport{Scenario: "many", Kernel: "synthetic", CPU: "none", N: 3, Weights: "built-in", Via: "register_kprobes",
		Params: map[string]any{"probes": 3, "seed": 1},
		Meta:   &scenarios.Meta{Kpsim: scenarios.Version{Version: "(test)", Go: "go"}, Faults: "", CPU: "a CPU", Host: "a host"},
		Runs: []*scenarios.RunResult{
			run("none", 1.2e7, strings.Repeat("a", 64), reasons),
			series,
			run("kprobe-rhashtable", 1.1e7, strings.Repeat("b", 64), map[string]int{"optimized": 3}),
		}}
}

// TestGolden: the table, design table and bench forms of the fixture are
// the golden files (go test -run TestGolden -update rewrites them).
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(io.Writer, *scenarios.ManyReport) error
	}{
		{"table", report.Table},
		{"designs", report.DesignTable},
		{"bench", report.Bench},
	} {
		var buf bytes.Buffer
		if err := tc.write(&buf, fixture()); err != nil {
			t.Fatal(err)
		}
		path := "testdata/" + tc.name + ".golden"
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s differs from %s (go test -run TestGolden -update rewrites it):\n%s", tc.name, path, buf.String())
		}
		for _, l := range strings.Split(buf.String(), "\n") {
			if tc.name == "table" && utf8.RuneCountInString(l) > report.TableWidth { // columns: "µs" is two
				t.Errorf("table line wider than %d: %q", report.TableWidth, l)
			}
		}
	}
}

// TestJSONShape: a run's JSON keys are in the documented order (schema
// version scenarios.SchemaVersion), every phase is listed, and cycles are
// integers.
func TestJSONShape(t *testing.T) {
	var buf bytes.Buffer
	if err := report.JSON(&buf, fixture()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}

	// The keys of runs[1] (a run with growth) in order.
	dec := json.NewDecoder(bytes.NewReader(doc.Runs[1]))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var got []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	want := "name patches registered optimized on_ftrace rejected reasons not_attempted decisions_digest reasons_digest ops total_ops targets est_cycles task_est_cycles est_cycles_by_context est_kernel_ns task_est_kernel_ns wall_ns sim_retained_bytes phases kernel_bytes growth"
	if strings.Join(got, " ") != want {
		t.Errorf("run keys:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	var run struct {
		EstCycles json.Number `json:"est_cycles"`
		Phases    []struct {
			Name string `json:"name"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(doc.Runs[1], &run); err != nil {
		t.Fatal(err)
	}
	if run.EstCycles != "9500000" || len(run.Phases) != len(scenarios.PhaseNames()) {
		t.Errorf("est_cycles %s (want 9500000), %d phases (want %d)", run.EstCycles, len(run.Phases), len(scenarios.PhaseNames()))
	}
}

// TestScopeLines: run session / run multi and run crossover tables say
// what their totals include, lack and leave out.
func TestScopeLines(t *testing.T) {
	var b strings.Builder
	rep := &scenarios.BPFReport{Scenario: "multi", Kernel: "synthetic", Includes: []string{"inc1", "inc2"}, NotModelled: []string{"nm1"}, Excluded: []string{"ex1"}}
	if err := report.BPFTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	cr := &scenarios.CrossoverReport{Kernel: "synthetic", Includes: []string{"inc1", "inc2"}, Excluded: []string{"ex1"}}
	if err := report.CrossoverTable(&b, cr); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{" total includes: inc1; inc2\n not modelled: nm1\n excluded by scope: ex1\n", " total includes: inc1; inc2\n not modelled: none\n excluded by scope: ex1\n"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("no %q in:\n%s", w, b.String())
		}
	}
}

// TestTracingMultiTableShare: run tracing-multi's table and JSON give the
// kallsyms share only over a complete total; with a component not
// modelled they name it and print no share.
func TestTracingMultiTableShare(t *testing.T) {
	share := 0.25
	row := func(withShare bool) scenarios.TracingMultiRow {
		r := scenarios.TracingMultiRow{Variant: "baseline", K: 4, TotalCyc: 400, PerFunc: 100, KallsymsCyc: 100,
			Components: []scenarios.TracingMultiComponent{
				{Name: "kallsyms_lookup_name", Cycles: 100, PerFunc: 25},
				{Name: "trampoline JIT", Cycles: 300, PerFunc: 75},
			}}
		if withShare {
			r.Share = &share
		}
		return r
	}
	for _, tc := range []struct {
		name        string
		notModelled []string
		share       bool
		want, never []string
	}{
		{"complete", nil, true, []string{"not modelled: none", "25.0%", "total includes: a; b"}, nil},
		{"partial", []string{"the JIT"}, false, []string{"not modelled: the JIT", "no kallsyms share"}, []string{"25.0%"}},
	} {
		rep := &scenarios.TracingMultiReport{Kernel: "synthetic", Generation: "7.3", K: 4, NrArgs: 3,
			Includes: []string{"a", "b"}, NotModelled: tc.notModelled, Rows: []scenarios.TracingMultiRow{row(tc.share)}}
		var b strings.Builder
		if err := report.TracingMultiTable(&b, rep); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: table lacks %q:\n%s", tc.name, w, b.String())
			}
		}
		for _, w := range tc.never {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: table has %q:\n%s", tc.name, w, b.String())
			}
		}
		js, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(js), `"kallsyms_share"`); got != tc.share {
			t.Errorf("%s: JSON kallsyms_share present %v, want %v: %s", tc.name, got, tc.share, js)
		}
		if !strings.Contains(string(js), `"total_includes"`) || !strings.Contains(string(js), `"not_modelled"`) {
			t.Errorf("%s: JSON lacks total_includes/not_modelled: %s", tc.name, js)
		}
	}
}
