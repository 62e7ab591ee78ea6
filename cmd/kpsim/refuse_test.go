package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusals: a flag that would be ignored is one line naming it and
// why, exit 2.
func TestRefusals(t *testing.T) {
	zero := writeFile(t, "kallsyms", "0000000000000000 T startup_64\n0000000000000000 t do_one_initcall\n0000000000000000 T _etext\n")
	symbols := writeFile(t, "System.map", smallMap)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "many", "--kernel", "/nonexistent/vmlinuz", "--functions", "100"}, "--functions: shapes the synthetic image only; --kernel /nonexistent/vmlinuz"},
		{[]string{"run", "many", "--kernel", "/nonexistent/vmlinuz", "--ibt=false"}, "--ibt: shapes the synthetic image only"},
		{[]string{"run", "many", "--kernel", "/nonexistent/vmlinuz", "--profile", "debian-6.1"}, "--profile: shapes the synthetic image only"},
		{[]string{"image", "--kernel", "/nonexistent/vmlinuz", "--module-functions", "3"}, "--module-functions: shapes the synthetic image only"},
		{[]string{"decode", "--kernel", "/nonexistent/vmlinuz", "--jump-entries", "3"}, "--jump-entries: shapes the synthetic image only"},
		{[]string{"run", "kallsyms", "--symbols", symbols, "--functions", "100"}, "--functions: shapes the synthetic image only; --symbols"},
		{[]string{"run", "kallsyms", "--symbols", symbols, "--kernel", "/nonexistent/vmlinuz"}, "--kernel: conflicts with --symbols"},
		{[]string{"run", "kallsyms", "--symbols", zero}, "every address is 0"},
		{[]string{"kallsyms", "dump", "--symbols", zero}, "every address is 0"},
		{[]string{"calibrate", "--quick", "--out", filepath.Join(t.TempDir(), "w.json"), "--symbols", zero}, "every address is 0"},
		{[]string{"run", "many", "--patches", "seris"}, `did you mean "series"?`},
		{[]string{"run", "many", "--patches", "series,kprobe-tre"}, `did you mean "kprobe-tree"?`},
		{[]string{"swep"}, `did you mean "sweep"?`},
		{[]string{"run", "many", "--patchs", "none"}, `did you mean "--patches"?`},
		{[]string{"run", "many", "--ablaton"}, `did you mean "--ablation"?`},
	} {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestRealKernelFlagsAccepted: the flags that shape what is added to a
// real kernel are not refused (the load fails on the missing file after).
func TestRealKernelFlagsAccepted(t *testing.T) {
	_, errs, code := runKpsim("run", "many", "--kernel", "/nonexistent/vmlinuz", "--seed", "3", "--sample-functions", "100", "--returns-patched")
	if code != 2 || !strings.Contains(errs, "--kernel:") || strings.Contains(errs, "shapes the synthetic") {
		t.Errorf("exit %d, stderr %q; want the load's error, not a refusal", code, errs)
	}
}

func TestVersion(t *testing.T) {
	for _, a := range []string{"--version", "version"} {
		out, _, code := runKpsim(a)
		if code != 0 || !strings.HasPrefix(out, "kpsim ") || !strings.Contains(out, "module github.com/kpsim/kpsim") {
			t.Errorf("%s: exit %d, %q", a, code, out)
		}
	}
}

// TestAblationNamesAsPatches: every --ablation run can be rerun alone.
func TestAblationNamesAsPatches(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "many", "--patches", "series-kprobe-tree", "--patches", "kprobe-tree+iter-can-probe"}, smallRun...)...)
	if !strings.Contains(out, "series-kprobe-tree") || !strings.Contains(out, "kprobe-tree+iter-can-probe") {
		t.Errorf("runs not named as asked:\n%.600s", out)
	}
}

// TestKallsymsDefaultsAgree: kallsyms dump and run kallsyms build with the
// same flags by default (the pinned kernel's), and --X=false drops one.
func TestKallsymsDefaultsAgree(t *testing.T) {
	p := writeFile(t, "System.map", smallMap)
	def, _, _ := runKpsim("kallsyms", "dump", "--symbols", p)
	all, _, _ := runKpsim("kallsyms", "dump", "--symbols", p, "--all-symbols", "--absolute-percpu", "--base-relative")
	none, _, _ := runKpsim("kallsyms", "dump", "--symbols", p, "--all-symbols=false", "--absolute-percpu=false", "--base-relative=false")
	if def != all || def == none {
		t.Errorf("dump defaults are not the pinned kernel's flags")
	}
	noX, _, _ := runKpsim("kallsyms", "dump", "--symbols", p, "--no-all-symbols", "--no-absolute-percpu", "--no-base-relative")
	if noX != none {
		t.Errorf("--no-X is not --X=false")
	}
	if kallsymsDefaults.AllSymbols != true || !kallsymsDefaults.AbsolutePercpu || !kallsymsDefaults.BaseRelative {
		t.Errorf("defaults %+v", kallsymsDefaults)
	}
}

func TestGroupedHelp(t *testing.T) {
	out, _, code := runKpsim("run", "many", "--help")
	if code != 0 {
		t.Fatal(code)
	}
	i, j, k := strings.Index(out, "Flags:"), strings.Index(out, "Kernel flags"), strings.Index(out, "Synthetic-image flags")
	if i < 0 || j < i || k < j {
		t.Fatalf("help not grouped:\n%s", out)
	}
	if s := out[i:j]; !strings.Contains(s, "  --patches ") || strings.Contains(s, "  --functions ") {
		t.Errorf("scenario group wrong:\n%s", s)
	}
	if s := out[k:]; !strings.Contains(s, "--functions") || !strings.Contains(s, "--jump-entries") {
		t.Errorf("synthetic group wrong")
	}
	if s := out[j:k]; !strings.Contains(s, "--kernel") || !strings.Contains(s, "--seed") {
		t.Errorf("kernel group wrong")
	}
}
