package calibrate

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/kallsyms/ktab"
	_ "github.com/kpsim/kpsim/scenarios" // registers every counted op
	"github.com/kpsim/kpsim/sim"
)

// TestEveryOpIsCovered: every registered op is measured by a benchmark
// that exists, documented, or a metric. A new op fails here until it is
// given a benchmark or a reason it cannot have one (ops.go).
func TestEveryOpIsCovered(t *testing.T) {
	if u := UncoveredOps(); len(u) > 0 {
		t.Errorf("ops with no calibration rule (add them to sim/calibrate/ops.go): %s", strings.Join(u, ", "))
	}
	benches := cBenchNames(t)
	benches[GoDecodeBench] = true
	for name, b := range measured {
		if !benches[b.Bench] {
			t.Errorf("op %s: benchmark %q is not reported by any C source", name, b.Bench)
		}
		if documented[name] != "" {
			t.Errorf("op %s is both measured and documented", name)
		}
	}
}

// cBenchNames returns the result names the C sources report.
func cBenchNames(t *testing.T) map[string]bool {
	src, err := Sources()
	if err != nil {
		t.Fatal(err)
	}
	// Every quoted word on a report(, SCAN_BENCH( or IDX_PROBE( line
	// (SORTED_IDX_PROBE( too): a superset of the result names (units too),
	// enough to catch a misspelt binding.
	re := regexp.MustCompile(`"([a-z0-9_]+)"`)
	out := map[string]bool{}
	for _, b := range src {
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, "report(") && !strings.Contains(l, "SCAN_BENCH(") && !strings.Contains(l, "IDX_PROBE(") {
				continue
			}
			for _, m := range re.FindAllStringSubmatch(l, -1) {
				out[m[1]] = true
			}
		}
	}
	if len(out) < 30 {
		t.Fatalf("found only %d benchmark names in the C sources", len(out))
	}
	return out
}

func smallTables(t testing.TB) *ktab.Tables {
	var syms []ktab.Symbol
	addr := uint64(0xffffffff81000000)
	for i := 0; i < 3000; i++ {
		addr += 16 + uint64(i%13)*16
		syms = append(syms, ktab.Symbol{Addr: addr, Type: 'T', Name: fmt.Sprintf("kpsim_fn_%d_%s", i, []string{"read", "write", "open", "ioctl"}[i%4])})
	}
	tb, err := ktab.Build(syms, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func needCC(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) on this machine")
	}
}

// TestCompile: the generated C compiles with the system compiler.
func TestCompile(t *testing.T) {
	needCC(t)
	bin, ver, err := Compile("cc", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if bin == "" || ver == "" {
		t.Fatalf("Compile = %q, %q", bin, ver)
	}
}

// TestQuickCalibrationIsACostFile runs both regimes with tiny sizes and
// the data structures' self-checks, writes both cost files and reads them
// back as kpsim run --costs does.
func TestQuickCalibrationIsACostFile(t *testing.T) {
	needCC(t)
	res, err := Run(Options{CC: "cc", Quick: true, Check: true, Tables: smallTables(t), TablesName: "test table"})
	if err != nil {
		t.Fatal(err)
	}
	for _, regime := range Regimes {
		var buf bytes.Buffer
		if err := WriteCostFile(&buf, res, regime); err != nil {
			t.Fatal(err)
		}
		ct, err := sim.ParseCosts("quick."+regime, bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s: the written file does not parse: %v\n%s", regime, err, buf.String())
		}
		if ct.Meta.Regime != regime || ct.Meta.CPU == "" || ct.Meta.Compiler == "" || ct.Meta.Date == "" || ct.Meta.Clock == "" || ct.Meta.Format != FormatVersion {
			t.Errorf("%s: header %+v", regime, ct.Meta)
		}
		for i, o := range sim.Ops() {
			op := sim.OpAt(i)
			kind, bench := Classify(o)
			switch kind {
			case Measured:
				if !strings.HasPrefix(ct.Note(op), "measured: "+bench+" ("+regime+")") || ct.Source(op) == "default" {
					t.Errorf("%s: op %s not measured by %s: source %s note %q", regime, o.Name, bench, ct.Source(op), ct.Note(op))
				}
			case Documented:
				if !strings.HasPrefix(ct.Note(op), "documented:") || ct.Weight(op) != o.Cycles {
					t.Errorf("%s: documented op %s: %g %q", regime, o.Name, ct.Weight(op), ct.Note(op))
				}
			case Metric:
				if ct.Source(op) != "default" {
					t.Errorf("%s: metric %s given a weight", regime, o.Name)
				}
			default:
				t.Errorf("%s: op %s uncovered", regime, o.Name)
			}
		}
	}
	if res.Measures["hot"]["hlist_visit"].Params == "" || res.Measures["cold"][GoDecodeBench].Samples == 0 {
		t.Errorf("missing results: %+v", res.Measures["hot"]["hlist_visit"])
	}
	// ks_stream_tok walks the whole table in order in both regimes (a
	// stream is one access pattern): every record's tokens, the same
	// table-derived figures in hot and cold.
	hot, cold := res.Measures["hot"]["ks_stream_tok"], res.Measures["cold"]["ks_stream_tok"]
	tokens := func(p string) string { return p[:strings.Index(p, ";")] }
	if hot.Samples == 0 || cold.Samples == 0 || !strings.Contains(hot.Params, "whole table in order, syms=3000 ") || !strings.Contains(hot.Params, ";") || tokens(hot.Params) != tokens(cold.Params) {
		t.Errorf("ks_stream_tok: hot %+v, cold %+v: want the whole 3000-record table walked alike in both regimes", hot, cold)
	}
}

func TestNoCompiler(t *testing.T) {
	_, err := Run(Options{CC: "/nonexistent/kpsim-no-cc", Quick: true, Tables: smallTables(t)})
	if !errors.Is(err, ErrNoCompiler) || !strings.Contains(err.Error(), "/nonexistent/kpsim-no-cc") {
		t.Fatalf("err = %v, want ErrNoCompiler naming the compiler", err)
	}
}

func TestParseOutput(t *testing.T) {
	good := "C clock rdtsc\nC tsc_mhz 2600.0\nR hlist_visit cold 9.5 9.1 12 15 node | nodes=20000\nC done\n"
	ms, hdr, err := ParseOutput(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if m := ms["hlist_visit"]; m.Median != 9.5 || m.Min != 9.1 || m.Max != 12 || m.Samples != 15 || m.Unit != "node" || m.Params != "nodes=20000" || hdr["clock"] != "rdtsc" {
		t.Errorf("parsed %+v %v", m, hdr)
	}
	for _, tc := range []struct{ name, in, err string }{
		{"early end", "C clock rdtsc\nR a hot 1 1 1 3 x | \n", "ended early"},
		{"malformed", "R a hot 1 1\nC done\n", "line 1 malformed"},
		{"negative", "R a hot -1 1 1 3 x | \nC done\n", "not a finite"},
		{"nan", "R a hot nan 1 1 3 x | \nC done\n", "not a finite"},
		{"stray", "hello\nC done\n", "line 1 unexpected"},
	} {
		if _, _, err := ParseOutput(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
		}
	}
}

func FuzzParseOutput(f *testing.F) {
	f.Add("C clock rdtsc\nR a hot 1 1 1 3 x | y\nC done\n")
	f.Add("R a cold 1e3 0 inf 3 x |\nC done\n")
	f.Fuzz(func(t *testing.T, in string) {
		ms, _, err := ParseOutput(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.Median < 0 || m.Median != m.Median || m.Median > 1e12 {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}

// TestBuiltinProfiles: the committed profiles parse, say where they were
// measured, and give every measured op a calibrated weight.
func TestBuiltinProfiles(t *testing.T) {
	for _, regime := range Regimes {
		ct, err := Builtin(regime)
		if err != nil {
			t.Fatal(err)
		}
		if ct.Meta.Regime != regime || ct.Meta.CPU == "" || ct.Meta.Compiler == "" || ct.Meta.Date == "" {
			t.Errorf("%s profile header: %+v", regime, ct.Meta)
		}
		if ct.Meta.Extra["quick"] != "false" {
			t.Errorf("%s profile is a quick run", regime)
		}
		for i, o := range sim.Ops() {
			k, _ := Classify(o)
			if k == Measured && ct.Source(sim.OpAt(i)) == "default" {
				t.Errorf("%s profile has no weight for measured op %s: rerun kpsim calibrate --regime both and commit profiles/", regime, o.Name)
			}
			// A documented weight is the registered one, whatever copy
			// of it the profile carries from its calibration day.
			if k == Documented && (ct.Weight(sim.OpAt(i)) != o.Cycles || ct.Source(sim.OpAt(i)) != "default") {
				t.Errorf("%s profile: documented op %s weighs %g (%s), registered %g", regime, o.Name, ct.Weight(sim.OpAt(i)), ct.Source(sim.OpAt(i)), o.Cycles)
			}
		}
	}
	if _, err := Builtin("tepid"); err == nil {
		t.Error("Builtin(tepid) accepted")
	}
	if d, _ := Builtin("documented"); d.Weight(sim.OpAt(0)) != sim.DefaultCosts().Weight(sim.OpAt(0)) {
		t.Error("documented is not the defaults")
	}
}
