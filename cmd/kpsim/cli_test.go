package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// completions runs kpsim __complete ARGS and returns the completions
// (their first tab-separated field).
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	out, errs, code := runKpsim(append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d %s", args, code, errs)
	}
	var c []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		c = append(c, strings.SplitN(l, "\t", 2)[0])
	}
	return c
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		args      []string
		want, not []string
	}{
		{[]string{"run", "many", "--pat"}, []string{"--patches"}, []string{"--n"}},
		{[]string{"run", "many", "--"}, []string{"--n", "--via", "--kernel", "--functions", "--jobs"}, []string{"--single"}},
		{[]string{"run", "many", "--patches", "ser"}, []string{"series"}, []string{"none"}},
		{[]string{"run", "many", "--patches", "none,kprobe-t"}, []string{"none,kprobe-tree"}, nil},
		{[]string{"run", "many", "--patches=iter-can-pro"}, []string{"--patches=iter-can-probe"}, nil},
		{[]string{"run", "many", "--via", ""}, []string{"register_kprobes", "register_kprobe", "kprobe_events", "perf_kprobe"}, nil},
		{[]string{"run", "many", "--format", ""}, []string{"table", "json", "csv", "bench"}, nil},
		{[]string{"explain", "--format", ""}, []string{"table", "json"}, []string{"text"}},
		{[]string{"run", "many", "--profile", ""}, []string{"reference", "debian-6.1"}, nil},
		{[]string{"image", "--kernel-version", ""}, []string{"6.1", "6.12", "7.3"}, nil},
		{[]string{"run", "many", "--cpu", ""}, []string{"host", "none"}, nil},
		{[]string{"soak", "--"}, []string{"--jobs"}, []string{"--workers"}},
		{[]string{"run", "multi", "--"}, []string{"--n"}, []string{"--k"}},
		{[]string{"sweep", "many", "--v"}, []string{"--vias", "--via"}, nil},
		{[]string{"run", ""}, []string{"many", "session", "tracing-multi"}, nil},
		{[]string{""}, []string{"run", "explain", "completion"}, nil},
	}
	for _, tc := range tests {
		got := completions(t, tc.args...)
		set := map[string]bool{}
		for _, c := range got {
			set[c] = true
		}
		for _, w := range tc.want {
			if !set[w] {
				t.Errorf("__complete %q: no %q in %q", tc.args, w, got)
			}
		}
		for _, w := range tc.not {
			if set[w] {
				t.Errorf("__complete %q: %q listed", tc.args, w)
			}
		}
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _, code := runKpsim("completion", sh)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, %d bytes", sh, code, len(out))
		}
	}
}

func TestDeprecatedSpellings(t *testing.T) {
	tests := []struct {
		args []string
		note string // the deprecation line
		want string // what shows the old spelling took effect
		code int
	}{
		{[]string{"image", "-kernel", "/nonexistent/vmlinuz"}, "kpsim: -kernel is deprecated, write --kernel\n", "--kernel:", 2},
		{[]string{"run", "many", "-n", "0"}, "kpsim: -n is deprecated, write --n\n", "--n", 2},
		{[]string{"image", "-format=xml"}, "kpsim: -format is deprecated, write --format\n", "--format: want table or json", 2},
		{[]string{"soak", "--workers", "2", "--replay", "x"}, "kpsim: --workers is deprecated, write --jobs\n", "--jobs: does not apply to --replay", 2},
		{[]string{"soak", "--workers=-1"}, "kpsim: --workers is deprecated, write --jobs\n", "--jobs: must not be negative", 2},
		{[]string{"run", "multi", "--k", "-1"}, "kpsim: --k is deprecated, write --n\n", "--n: want 0..", 2},
		{[]string{"run", "crossover", "--k", "1,x"}, "kpsim: --k is deprecated, write --n\n", "--n: \"x\" is not a number", 2},
		{[]string{"run", "tracing-multi", "--k", "-1"}, "kpsim: --k is deprecated, write --n\n", "--n: want 0..", 2},
		{[]string{"run", "session", "--programs", "0"}, "kpsim: --programs is deprecated, write --n\n", "--n: want 1..", 2},
		{[]string{"run", "kallsyms", "--iters", "0"}, "kpsim: --iters is deprecated, write --n\n", "--n: must be at least 1", 2},
		{[]string{"sweep", "many", "--n", "1,2", "--vias", "perf_kprobe", "--single"}, "kpsim: --single is deprecated, write --via register_kprobe\n", "--via: conflicts with --vias", 2},
		{[]string{"run", "many", "--single", "--lines-per-write", "3"}, "kpsim: --single is deprecated, write --via register_kprobe\n", "--lines-per-write: applies to --via kprobe_events only", 2},
		{[]string{"explain", "--format", "text"}, "kpsim: --format text is deprecated, write --format table\n", "missing TARGET", 2},
		{[]string{"explain", "--format=text", "--help"}, "kpsim: --format text is deprecated, write --format table\n", "", 0},
		{[]string{"-version"}, "kpsim: -version is deprecated, write --version\n", "", 0},
		{[]string{"-help"}, "kpsim: -help is deprecated, write --help\n", "", 0},
		{[]string{"run", "many", "-help"}, "kpsim: -help is deprecated, write --help\n", "", 0},
		{[]string{"image", "-no-ibt", "-format", "xml"}, "kpsim: -no-ibt is deprecated, write --no-ibt\nkpsim: -format is deprecated, write --format\n", "--format: want table", 2},
	}
	for _, tc := range tests {
		_, errs, code := runKpsim(tc.args...)
		if code != tc.code || !strings.HasPrefix(errs, tc.note) || strings.Count(errs, tc.note) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d, %q then %q", tc.args, code, errs, tc.code, tc.note, tc.want)
		}
	}
}

func TestBothSpellingsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"soak", "--workers", "2", "--jobs", "2"},
		{"soak", "--jobs", "2", "-workers", "2"},
		{"run", "multi", "--k", "3", "--n", "3"},
		{"run", "session", "--n", "3", "--programs", "3"},
		{"run", "kallsyms", "--iters", "3", "--n", "3"},
		{"run", "many", "--single", "--via", "register_kprobe"},
		{"run", "many", "--via", "perf_kprobe", "--single"},
	} {
		_, errs, code := runKpsim(args...)
		if code != 2 || !strings.Contains(errs, "given together") || !strings.Contains(errs, "deprecated spelling") {
			t.Errorf("%q: exit %d %q", args, code, errs)
		}
	}
}

// TestHelpEveryCommand: every command's --help exits 0 and lists every
// flag the command completes, and kpsim help CMD prints the same.
func TestHelpEveryCommand(t *testing.T) {
	var paths [][]string
	for _, c := range commands {
		acts, ok := actions[c.name]
		switch {
		case c.name == "run":
		case ok:
			for _, a := range acts {
				paths = append(paths, []string{c.name, a})
			}
		default:
			paths = append(paths, []string{c.name})
		}
	}
	for _, sc := range scenarioTable {
		paths = append(paths, []string{"run", sc.name})
	}
	for _, p := range paths {
		out, errs, code := runKpsim(append(p, "--help")...)
		if code != 0 || errs != "" || !strings.Contains(out, "usage: kpsim "+p[0]) || !strings.Contains(out, "Flags:") {
			t.Errorf("%v --help: exit %d %q\n%s", p, code, errs, out)
			continue
		}
		flags := completions(t, append(p, "--")...)
		for _, f := range flags {
			if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"[") && !strings.Contains(out, "  "+f+"\n") {
				t.Errorf("%v --help: no %s", p, f)
			}
		}
		via, _, code := runKpsim(append([]string{"help"}, p...)...)
		if code != 0 || via != out {
			t.Errorf("kpsim help %v differs from --help (exit %d)", p, code)
		}
	}
	out, _, code := runKpsim("--help")
	if code != 0 || !strings.Contains(out, "completion") || !strings.Contains(out, "explain") {
		t.Errorf("kpsim --help: exit %d\n%s", code, out)
	}
	if out, _, code := runKpsim("--version"); code != 0 || !strings.Contains(out, "module github.com/kpsim/kpsim") {
		t.Errorf("kpsim --version: exit %d %q", code, out)
	}
}

func TestCLIEdges(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.txt")
	if err := os.WriteFile(long, []byte(strings.Repeat("a", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	costs := filepath.Join(dir, "costs.txt")
	if err := os.WriteFile(costs, []byte("# weights\n"+strings.Repeat("b", 2<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "many", "--targets", long}, long + ":1: line longer than 1 MiB"},
		{[]string{"run", "many", "--costs", costs}, costs + ":2: line longer than 1 MiB"},
		{[]string{"run", "many", "--n", "10", "--modules", "ext4"}, "--modules ext4: module names need --kernel"},
		{[]string{"image", "--modules", "ext\x01\xff"}, `--modules ext\x01\xff:`},
		{[]string{"image", "--jump-mix", "nop2=200"}, "--jump-mix"},
		{[]string{"image", "--jump-mix", "nop2=50,nop5=20"}, "sum to 70"},
		{[]string{"image", "--jump-mix", "nop2=50,nop2=50"}, "given twice"},
		{[]string{"run", "many", "--patches", "iter-can-probe"}, "requires kprobe-tree"},
		{[]string{"explain", "--patches", "series", "--patches", "none", "vfs_read"}, "given twice"},
	}
	for _, tc := range tests {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "bufio") || strings.Contains(errs, `did you mean "iter-can-probe"`) {
			t.Errorf("%q: exit %d %q, want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
		if !utf8.ValidString(errs) || strings.IndexFunc(strings.TrimSuffix(errs, "\n"), func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
			t.Errorf("%q: non-printable bytes in %q", tc.args, errs)
		}
	}
	if s := didYouMean("iter-can-probe", []string{"iter-can-probe", "iter-can-optimize"}); s != "" {
		t.Errorf("didYouMean suggests the token itself: %q", s)
	}
	if s := didYouMean("iter-can-prob", []string{"iter-can-probe"}); s != `; did you mean "iter-can-probe"?` {
		t.Errorf("didYouMean %q", s)
	}
	out, _, _ := runKpsim("run", "many", "--help")
	if strings.Contains(out, "modules-dir make") || !strings.Contains(out, "--modules-dir string") {
		t.Errorf("--modules-dir help:\n%s", out)
	}
	if got := oneLine("a\x00b\xffc\td\ne"); got != `a\x00b\xffc\td; e` {
		t.Errorf("oneLine %q", got)
	}
}
