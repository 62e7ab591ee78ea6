package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestCalibrateWithoutCompiler: one line, exit 2, nothing written.
func TestCalibrateWithoutCompiler(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "c.costs")
	for _, args := range [][]string{
		{"calibrate", "--cc", filepath.Join(dir, "no-such-cc"), "--out", out},
		{"calibrate", "--cc", "  "},
	} {
		_, errs, code := runKpsim(args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no C compiler") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errs)
		}
	}
	t.Setenv("CC", filepath.Join(dir, "also-missing"))
	if _, errs, code := runKpsim("calibrate"); code != 2 || !strings.Contains(errs, "also-missing") {
		t.Errorf("$CC missing: exit %d, stderr %q", code, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left files: %v", entries)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--regime", "tepid"}, "--regime"},
		{[]string{"calibrate", "--regime", "both"}, "--out"},
		{[]string{"run", "many", "--cost-regime", "tepid"}, "--cost-regime"},
		{[]string{"run", "kallsyms", "--cost-regime", "tepid"}, "--cost-regime"},
	} {
		if _, errs, code := runKpsim(tc.args...); code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errs)
		}
	}
}

// TestCalibrateQuick: the CLI writes both regimes' files, and run many
// reads one back.
func TestCalibrateQuick(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	if testing.Short() {
		t.Skip("compiles and runs the C benchmarks")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "q")
	mustKpsim(t, append([]string{"calibrate", "--quick", "--regime", "both", "--out", out}, small...)...)
	for _, r := range []string{"hot", "cold"} {
		ct, err := sim.LoadCosts(out + "." + r)
		if err != nil {
			t.Fatal(err)
		}
		if ct.Meta.Regime != r || ct.Meta.CPU != sim.LocalCPU() {
			t.Errorf("%s: header %+v", r, ct.Meta)
		}
	}
	rep, errs, code := runKpsim(append([]string{"run", "many", "--costs", out + ".cold", "--patches", "none"}, smallRun...)...)
	// The file says it is a quick one: used, with one warning naming it.
	if code != 0 || strings.Count(errs, "warning") != 1 || !strings.Contains(errs, "cost file "+out+".cold is a --quick calibration") || !strings.Contains(rep, "weights: "+out+".cold") {
		t.Fatalf("exit %d, stderr %q, report:\n%s", code, errs, rep)
	}
}

// TestCostFileChecks: a cost file that sets no weight is refused (one
// line, exit 2); a --quick calibration's file is used with a warning
// naming it; a full calibration's without one.
func TestCostFileChecks(t *testing.T) {
	dir := t.TempDir()
	cpu := ""
	if local := sim.LocalCPU(); local != "" {
		cpu = "#: cpu: " + local + "\n" // no foreign-CPU warning
	}
	for _, tc := range []struct {
		name, body string
		code       int
		want       string // in stderr ("" : stderr empty)
	}{
		{"empty", "", 2, "no weights"},
		{"comments", "# kpsim cost file\n#: format: kpsim-costs 1\n\n", 2, "no weights"},
		{"quick", cpu + "#: regime: cold\n#: quick: true\nkprobe.hash.visit 3\n", 0, "is a --quick calibration"},
		{"full", cpu + "#: regime: cold\n#: quick: false\nkprobe.hash.visit 3\n", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.name+".costs")
			if err := os.WriteFile(f, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := runKpsim(append([]string{"run", "many", "--costs", f, "--patches", "none"}, smallRun...)...)
			if code != tc.code || (tc.want == "") != (errs == "") || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") > 1 {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.want)
			}
			if tc.want != "" && !strings.Contains(errs, f) {
				t.Errorf("stderr %q does not name %s", errs, f)
			}
		})
	}
}

// TestForeignCostFile: a cost file calibrated on another CPU is used, with
// a warning naming both CPUs.
func TestForeignCostFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "other.costs")
	body := "#: format: kpsim-costs 1\n#: cpu: Imaginary CPU 9000 @ 9.99GHz\n#: regime: cold\nkprobe.hash.visit 99 # measured elsewhere\n"
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	local := sim.LocalCPU()
	if local == "" {
		t.Skip("no CPU model in /proc/cpuinfo")
	}
	out, errs, code := runKpsim(append([]string{"run", "many", "--costs", f, "--patches", "none", "--format", "json"}, smallRun...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "Imaginary CPU 9000") || !strings.Contains(errs, local) || !strings.Contains(errs, "warning") {
		t.Errorf("stderr %q: want one warning naming both CPUs", errs)
	}
	if !strings.Contains(out, `"weights": "`+f) {
		t.Errorf("report does not name the cost file")
	}
}

// TestListShowsBothRegimes: kpsim list prints documented, hot and cold
// weights and the benchmark behind each.
func TestListShowsBothRegimes(t *testing.T) {
	out, _, code := runKpsim("list")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"documented", "hot", "cold", "calibrated by", "hlist_visit", "documented: not measurable from user space", "built-in hot profile", "built-in cold profile"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "kprobe.hash.visit" && f[1] == f[2] && f[2] == f[3] {
			t.Errorf("kprobe.hash.visit: documented, hot and cold all %s: profiles not calibrated?", f[1])
		}
	}
}

// TestRunKallsymsSaysHot: run kallsyms defaults to the hot profile and
// says why.
func TestRunKallsymsSaysHot(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "kallsyms", "--n", "10", "--variants", "baseline"}, small...)...)
	if !strings.Contains(out, "built-in hot profile") || !strings.Contains(out, "repeats its names") {
		t.Errorf("output does not say it is hot and why:\n%s", out)
	}
	out, _, _ = runKpsim(append([]string{"run", "kallsyms", "--n", "10", "--variants", "baseline", "--cost-regime", "cold"}, small...)...)
	if !strings.Contains(out, "built-in cold profile") {
		t.Errorf("--cost-regime cold not reported:\n%s", out)
	}
}

// TestExplainUsesTheColdProfile: explain prices one registration with
// the cold profile by default, and --cost-regime documented gives the
// registered weights.
func TestExplainUsesTheColdProfile(t *testing.T) {
	wantExplain(t, append(append([]string{"explain"}, small...), "kprobe_many_func_7"), "weights: built-in cold profile")
	wantExplain(t, append(append([]string{"explain"}, small...), "kprobe_many_func_7", "--cost-regime", "documented"), "weights: documented defaults")
}
