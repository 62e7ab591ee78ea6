package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

func TestRunBPFBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "session", "--n", "0"}, "--n"},
		{[]string{"run", "session", "--kconfig", "KPROBES=y"}, "FPROBE"},
		{[]string{"run", "session", "--bpf-kernel", "5.15"}, "--bpf-kernel"},
		// --bpf-kernel only asserts the image's generation: the old 6.10
		// model is named by its generation, a contradiction is refused.
		{[]string{"run", "session", "--bpf-kernel", "6.10"}, "--kernel-version 6.12"},
		{[]string{"run", "multi", "--bpf-kernel", "6.12"}, "contradicts the image's generation 6.1"},
		{[]string{"run", "session", "--bpf-kernel", "7.3"}, "contradicts the image's generation 6.1"},
		{[]string{"run", "session", "--patches", "ftrace-single-lookup,ftrace-single-lookup-v1"}, "alternatives"},
		{[]string{"run", "session", "--possible-cpus", "0"}, "--possible-cpus"},
		{[]string{"run", "crossover", "--n", "0"}, "--n"},
		{[]string{"run", "crossover", "--n", "2000000"}, "--n"},
		{[]string{"run", "crossover", "--n", "1,x"}, "--n"},
		{[]string{"run", "multi", "--pattern", ""}, "empty pattern"},
		{[]string{"run", "multi", "--n", "-1"}, "--n"},
		{[]string{"run", "tracing-multi", "--variants", "nope"}, "--variants"},
		// 6.1 has no tracing multi link: refused, naming the generation.
		{[]string{"run", "tracing-multi", "--n", "3"}, "generation 6.1"},
		{[]string{"run", "tracing-multi", "--nr-args", "7"}, "--nr-args"},
		{[]string{"run", "session", "--out", "/nonexistent/dir/x.json"}, "--out"},
		{[]string{"run", "crossover", "--format", "csv"}, "--format"},
		// The cost flags of run many, on every BPF command.
		{[]string{"run", "session", "--cost-regime", "tepid"}, "--cost-regime"},
		{[]string{"run", "multi", "--cost-regime", "warm"}, "--cost-regime"},
		{[]string{"run", "crossover", "--cost-regime", "Hot"}, "--cost-regime"},
		{[]string{"run", "tracing-multi", "--cost-regime", ""}, "--cost-regime"},
		{[]string{"run", "session", "--costs", "/nonexistent/x.costs"}, "--costs"},
	} {
		args := append(tc.args, small...)
		_, errs, code := runKpsim(args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %s", tc.args, code, errs, tc.want)
		}
	}
}

// run tracing-multi on 7.3: every component per function, the kallsyms
// share over the complete total, what the total includes.
func TestRunTracingMulti73(t *testing.T) {
	args := append([]string{"run", "tracing-multi", "--n", "5", "--variants", "baseline", "--kernel-version", "7.3"}, smallSizes...)
	out := mustKpsim(t, args...)
	for _, w := range []string{"total includes:", "not modelled: none", "trampoline JIT", "text pokes", "kallsyms share", "%", "trampolines 5"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
}

// A pattern matching nothing and an invalid target are per-attach results.
func TestRunMultiNoMatchIsAResult(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "multi", "--pattern", "zzz_no_such_fn*", "--n", "5", "--patches", "none", "--allow-refusals"}, small...)...)
	if !strings.Contains(out, "-ENOENT") {
		t.Errorf("no -ENOENT result:\n%s", out)
	}
}

func TestRunSessionFprobeOff(t *testing.T) {
	// kprobe.multi links on CONFIG_FPROBE=n: the -EOPNOTSUPP stub, the
	// override recorded.
	out := mustKpsim(t, append([]string{"run", "multi", "--n", "3", "--kconfig", "FPROBE=n", "--patches", "none", "--allow-refusals"}, small...)...)
	if !strings.Contains(out, "-EOPNOTSUPP") || !strings.Contains(out, "FPROBE=n") {
		t.Errorf("want -EOPNOTSUPP and the override recorded:\n%s", out)
	}
	// kprobe.session on the synthetic image's generation, 6.1: 6.1.192's
	// link_create has no BPF_TRACE_KPROBE_SESSION and refuses it with
	// -EINVAL before the CONFIG_FPROBE stub; --bpf-kernel 6.1 agrees with
	// the image.
	out = mustKpsim(t, append([]string{"run", "session", "--n", "3", "--kconfig", "FPROBE=n", "--bpf-kernel", "6.1", "--patches", "libbpf-exact-syms", "--allow-refusals"}, small...)...)
	if !strings.Contains(out, "-EINVAL=3") || !strings.Contains(out, "generation 6.1") {
		t.Errorf("want 3 -EINVAL on generation 6.1:\n%s", out)
	}
}

func FuzzParseKList(f *testing.F) {
	for _, s := range []string{"1,10,100", "max", "0", "1048577", "5,max,7", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ks, err := parseKList(s)
		if err != nil {
			return
		}
		for _, k := range ks {
			if k != scenarios.KMax && (k <= 0 || k > 1<<20) {
				t.Fatalf("%q: accepted K = %d", s, k)
			}
		}
	})
}

// small612 is the small synthetic image of generation 6.12: kprobe.session
// links attach, and ftrace_lookup_symbols walks the whole table for each.
var small612 = append([]string{"--kernel-version", "6.12"}, smallSizes...)

// TestRunSessionCostRegime: --cost-regime changes run session's cycle
// figures, never its counts or decisions, and the report names the
// regime; the default is cold.
func TestRunSessionCostRegime(t *testing.T) {
	session := func(extra ...string) *scenarios.BPFReport {
		t.Helper()
		args := append([]string{"run", "session", "--n", "3", "--patches", "libbpf-exact-syms", "--format", "json"}, small612...)
		var rep scenarios.BPFReport
		if err := json.Unmarshal([]byte(mustKpsim(t, append(args, extra...)...)), &rep); err != nil {
			t.Fatal(err)
		}
		return &rep
	}
	hot, cold, def := session("--cost-regime", "hot"), session("--cost-regime", "cold"), session()
	for _, tc := range []struct {
		rep  *scenarios.BPFReport
		want string
	}{{hot, "built-in hot profile"}, {cold, "built-in cold profile"}, {def, "built-in cold profile"}} {
		if !strings.HasPrefix(tc.rep.Weights, tc.want) || tc.rep.Costs.Regime != tc.rep.Weights || tc.rep.Costs.File != "" {
			t.Errorf("weights %q, costs %+v: want %q and no cost file", tc.rep.Weights, tc.rep.Costs, tc.want)
		}
	}
	if len(hot.Runs) != 1 || len(cold.Runs) != 1 {
		t.Fatalf("runs: %d hot, %d cold", len(hot.Runs), len(cold.Runs))
	}
	h, c := hot.Runs[0], cold.Runs[0]
	if h.Digest != c.Digest || h.OK != c.OK || h.OK != 3 || !reflect.DeepEqual(h.Errors, c.Errors) || len(h.Stages) != len(c.Stages) {
		t.Fatalf("hot and cold runs decide differently: %+v vs %+v", h, c)
	}
	differ := false
	for i := range h.Stages {
		if !reflect.DeepEqual(h.Stages[i].Ops, c.Stages[i].Ops) {
			t.Errorf("stage %s: counts differ between regimes: %v vs %v", h.Stages[i].Phase, h.Stages[i].Ops, c.Stages[i].Ops)
		}
		differ = differ || h.Stages[i].Cycles != c.Stages[i].Cycles
	}
	if !differ || h.Cycles == c.Cycles {
		t.Errorf("hot and cold give the same cycles (%g): --cost-regime not honoured", h.Cycles)
	}
	if def.Runs[0].Cycles != c.Cycles {
		t.Errorf("default run %g cycles, cold %g: want the cold profile by default", def.Runs[0].Cycles, c.Cycles)
	}
}

// TestRunBPFNamesWeights: every BPF report, table and JSON, names its
// weights (the regime, and a cost file with its SHA-256 when one is
// given) as run many's header does, and a foreign cost file is warned of.
func TestRunBPFNamesWeights(t *testing.T) {
	f := filepath.Join(t.TempDir(), "my.costs")
	body := "#: format: kpsim-costs 1\n#: cpu: Imaginary CPU 9000 @ 9.99GHz\n#: compiler: cc 1\n#: date: 2026-01-02T03:04:05Z\n#: regime: hot\nkallsyms.stream.tok 5 # measured elsewhere\n"
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"session", append([]string{"run", "session", "--n", "2", "--patches", "none"}, small612...)},
		{"multi", append([]string{"run", "multi", "--n", "3", "--patches", "none"}, small...)},
		{"crossover", append([]string{"run", "crossover", "--n", "1,10", "--variants", "baseline"}, small...)},
		{"tracing-multi", append([]string{"run", "tracing-multi", "--n", "10", "--variants", "baseline", "--kernel-version", "7.3"}, smallSizes...)},
	} {
		table := mustKpsim(t, append(tc.args, "--cost-regime", "hot")...)
		if !strings.Contains(table, " weights: built-in hot profile (hot regime, calibrated on") || !strings.Contains(table, " costs:   no cost file") {
			t.Errorf("%s: the table does not name its weights:\n%s", tc.name, table)
		}
		js := mustKpsim(t, append(tc.args, "--cost-regime", "documented", "--format", "json")...)
		var rep struct {
			Weights string             `json:"weights"`
			Costs   scenarios.CostInfo `json:"costs"`
		}
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Weights != "documented defaults" || rep.Costs.Regime != rep.Weights {
			t.Errorf("%s: JSON weights %q costs %+v, want the documented defaults", tc.name, rep.Weights, rep.Costs)
		}
		out, errs, code := runKpsim(append(tc.args, "--costs", f, "--format", "json")...)
		if code != 0 {
			t.Fatalf("%s --costs: exit %d: %s", tc.name, code, errs)
		}
		rep.Weights, rep.Costs = "", scenarios.CostInfo{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.HasPrefix(rep.Weights, f+" (hot regime, calibrated on Imaginary CPU 9000") || rep.Costs.File != f || rep.Costs.SHA256 == "" || rep.Costs.Overrides != 1 {
			t.Errorf("%s --costs: weights %q costs %+v: want the file, its CPU, its SHA-256 and 1 weight set", tc.name, rep.Weights, rep.Costs)
		}
		if local := sim.LocalCPU(); local != "" && (!strings.Contains(errs, "warning") || !strings.Contains(errs, "Imaginary CPU 9000") || !strings.Contains(errs, "kpsim run "+tc.name)) {
			t.Errorf("%s --costs: stderr %q: want the foreign-CPU warning", tc.name, errs)
		}
	}
}
