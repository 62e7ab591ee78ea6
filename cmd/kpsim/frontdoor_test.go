package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTargetsBadInput: a malformed list, an empty one, a directory, a bad
// offset and flags that do not apply are one-line usage errors (exit 2)
// and leave no output file behind.
func TestTargetsBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad", "vfs_read\nfoo bar baz\n")
	empty := write("empty", "# nothing\n\n")
	neg := write("neg", "vfs_read-4\n")
	nonnum := write("nonnum", "vfs_read+abc\n")
	good := write("good", "kprobe_many_func_1\n")
	out := filepath.Join(dir, "report")
	probes := filepath.Join(dir, "probes")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--targets", bad}, bad + ":2: want SYM[+OFF]"},
		{[]string{"--targets", empty}, empty + ": no targets"},
		{[]string{"--targets", dir}, dir + ": is a directory"},
		{[]string{"--targets", neg}, neg + ":1: negative offset"},
		{[]string{"--targets", nonnum}, nonnum + `:1: bad offset "abc"`},
		{[]string{"--targets", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--targets", good, "--n", "10"}, "--n: applies to --targets generated only"},
		{[]string{"--offset", "5"}, "--offset: applies with --placement offset only"},
		{[]string{"--placement", "offset", "--offset", "-1"}, "--offset: must not be negative"},
		{[]string{"--placement", "offset", "--offset", "x"}, "invalid argument"},
		{[]string{"--enable", "each"}, "--enable each: only kprobe_events"},
		{[]string{"--via", "kprobe_events", "--enable", "sometimes"}, "--enable: want none, each or group"},
		{[]string{"--via", "ioctl"}, "--via: want"},
		{[]string{"--lines-per-write", "5"}, "--lines-per-write: applies to --via kprobe_events only"},
		{[]string{"--by-address"}, "--by-address: applies to --targets all-functions only"},
		{[]string{"--mixed"}, "--mixed: needs --image-probes"},
		{[]string{"--order", "random"}, "--order: want file, sorted or shuffle"},
	} {
		args := append([]string{"run", "many", "--out", out, "--probes", probes}, tc.args...)
		args = append(args, small...)
		stdout, stderr, code := runKpsim(args...)
		if code != 2 || !strings.Contains(stderr, tc.msg) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and one line containing %q", tc.args, code, stderr, tc.msg)
		}
		for _, p := range []string{out, probes} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("%v: %s was written", tc.args, p)
			}
		}
	}
}

// TestTargetsPerProbeResults: unknown symbols and offsets past a function
// are per-probe results, not fatal; the --probes file lists each.
func TestTargetsPerProbeResults(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	body := "kprobe_many_func_1\nno_such_function_xyz\nkprobe_many_func_2+100000\nkprobe_many_func_3+1\n"
	if err := os.WriteFile(list, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	probes := filepath.Join(dir, "probes.tsv")
	for _, via := range []string{"register_kprobe", "kprobe_events", "perf_kprobe"} {
		args := append([]string{"run", "many", "--targets", list, "--via", via, "--probes", probes, "--patches", "none",
			"--probe-targets", "10", "--probe-targets-traced"}, small...)
		if via == "kprobe_events" {
			args = append(args, "--lines-per-write", "1")
		}
		_, stderr, code := runKpsim(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", via, code, stderr)
		}
		b, err := os.ReadFile(probes)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[0], "run\ttarget\t") {
			t.Fatalf("%s: probes file:\n%s", via, b)
		}
		want := []string{"0", "ENOENT", "", ""}
		for i, l := range lines[1:] {
			f := strings.Split(l, "\t")
			if want[i] != "" && f[5] != want[i] {
				t.Errorf("%s line %d: result %s, want %s (%s)", via, i+1, f[5], want[i], l)
			}
			if f[5] != "0" && f[7] == "-" {
				t.Errorf("%s line %d: a refusal without a reason: %s", via, i+1, l)
			}
		}
	}
}

// TestExplainVia: explain through tracefs and perf leads with the front
// door's own steps; --verify confirms the trail under every switch set.
func TestExplainVia(t *testing.T) {
	for _, tc := range []struct {
		via, first, state string
	}{
		{"kprobe_events", "trace_kprobe_create(\"p kprobe_many_func_3+5\")", "optimized"},
		{"perf_kprobe", "perf_event_open(type=kprobe, config1=\"kprobe_many_func_3\", config2=0x5", "optimized"},
		{"register_kprobe", "register_kprobe(symbol_name=\"kprobe_many_func_3\", offset=5)", "optimized"},
	} {
		args := append([]string{"explain", "kprobe_many_func_3+5", "--via", tc.via, "--n", "10", "--traced", "--verify"}, small...)
		out, stderr, code := runKpsim(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.via, code, stderr)
		}
		lines := strings.Split(out, "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[2], tc.first) || !strings.Contains(out, "state    "+tc.state) {
			t.Errorf("%s: output:\n%s", tc.via, out)
		}
		if !strings.Contains(out, "verified: the same trail, result, state and reason") {
			t.Errorf("%s: --verify said nothing:\n%s", tc.via, out)
		}
	}
	_, stderr, code := runKpsim(append([]string{"explain", "kprobe_many_func_3", "--via", "perf_kprobe", "--no-enable"}, small...)...)
	if code != 2 || !strings.Contains(stderr, "--no-enable: applies to --via kprobe_events only") {
		t.Errorf("--no-enable with perf: exit %d %q", code, stderr)
	}
}
