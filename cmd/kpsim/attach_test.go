package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepZeroAttach: a sweep through a front door that refuses every
// generated (notrace) target warns on stderr with the cause and the
// remedy, flags the run in the table, exits 3 (0 with --allow-refusals),
// and leaves that run out of the fits, the per-probe column and the plot.
func TestSweepZeroAttach(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		allow bool
		code  int
	}{{false, 3}, {true, 0}} {
		plot := filepath.Join(dir, "p.svg")
		args := append([]string{"sweep", "many", "--n", "20,40", "--vias", "register_kprobe,perf_kprobe", "--patches", "none", "--plot", plot}, small...)
		if tc.allow {
			args = append(args, "--allow-refusals")
		}
		out, stderr, code := runKpsim(args...)
		if code != tc.code {
			t.Errorf("allow=%v: exit %d, want %d: %s", tc.allow, code, tc.code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "kpsim sweep: warning: none@perf_kprobe at N=20,40 (figures of N=40): attached none of its 40 targets via perf_kprobe") ||
			!strings.Contains(lines[0], "within_notrace_func") || !strings.Contains(lines[0], "use --traced or --targets traceable") {
			t.Errorf("allow=%v: stderr %q, want one warning naming notrace and --traced", tc.allow, stderr)
		}
		for _, want := range []string{
			" WARNING none@perf_kprobe at N=20,40 (figures of N=40): attached none",
			" none@perf_kprobe: no fit, no exponent, no plotted curve: it attached no probe at any N",
			"none@perf_kprobe         0/20 (20, 0)  0/40 (40, 0)",
			"none@register_kprobe     20/20  40/40",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("allow=%v: the table lacks %q:\n%s", tc.allow, want, out)
			}
		}
		b, err := os.ReadFile(plot)
		if err != nil {
			t.Fatalf("allow=%v: %v", tc.allow, err)
		}
		d := plotData(t, string(b))
		var drawn, missing []string
		for _, c := range d.Curves {
			if len(c.Points) > 0 {
				drawn = append(drawn, c.Name)
			} else if c.Missing != "" {
				missing = append(missing, c.Name)
			}
		}
		if strings.Join(drawn, ",") != "none@register_kprobe" || strings.Join(missing, ",") != "none@perf_kprobe" {
			t.Errorf("allow=%v: plot draws %v, misses %v; want only none@register_kprobe drawn", tc.allow, drawn, missing)
		}
		os.Remove(plot)
	}
	// The JSON: the empty run has no fits and names its omitted Ns.
	out, _, code := runKpsim(append([]string{"sweep", "many", "--n", "20,40", "--vias", "perf_kprobe", "--patches", "none", "--format", "json", "--allow-refusals"}, small...)...)
	if code != 0 {
		t.Fatalf("json: exit %d", code)
	}
	var sw struct {
		Runs []struct {
			Name    string         `json:"name"`
			Fits    map[string]any `json:"fits"`
			Omitted []int          `json:"omitted_n"`
			NoFit   string         `json:"no_fit"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &sw); err != nil {
		t.Fatal(err)
	}
	if len(sw.Runs) != 1 || len(sw.Runs[0].Fits) != 0 || len(sw.Runs[0].Omitted) != 2 || sw.Runs[0].NoFit == "" {
		t.Errorf("json runs: %+v, want no fits, omitted 20,40 and a no_fit reason", sw.Runs)
	}
}

// plotCurves is what the plot's metadata says of each curve.
type plotCurves struct {
	Curves []struct {
		Name    string       `json:"name"`
		Points  [][2]float64 `json:"points"`
		Missing string       `json:"missing"`
	} `json:"curves"`
}

func plotData(t *testing.T, svg string) plotCurves {
	t.Helper()
	const open = `<metadata id="kpsim-plot-data">`
	i, j := strings.Index(svg, open), strings.Index(svg, "</metadata>")
	if i < 0 || j < i {
		t.Fatal("no plot metadata in the SVG")
	}
	raw := strings.NewReplacer("&lt;", "<", "&amp;", "&").Replace(svg[i+len(open) : j])
	var d plotCurves
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestKprobeEventsUnattempted: a refused line of a kprobe_events write
// drops the rest of that write (as the kernel does); the run warns,
// names --lines-per-write 1 and exits 3. With one line per write every
// line is attempted, and a partial refusal is normal: exit 0, no warning.
// With --enable none (the default) the report notes that nothing is armed.
func TestKprobeEventsUnattempted(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	if err := os.WriteFile(list, []byte("kprobe_many_func_1\nno_such_function_xyz\nkprobe_many_func_2\nkprobe_many_func_3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := append([]string{"run", "many", "--targets", list, "--via", "kprobe_events", "--patches", "none", "--probe-targets", "10", "--probe-targets-traced"}, small...)
	out, stderr, code := runKpsim(base...)
	want := "kpsim run many: warning: none: left 2 of its 4 targets unattempted via kprobe_events: the first refused line of a write() to kprobe_events drops the rest of that write"
	if code != 3 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "use --lines-per-write 1") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 3 and one line %q...", code, stderr, want)
	}
	if !strings.Contains(out, "1 registered of 4 targets") || !strings.Contains(out, " WARNING none: left 2 of its 4 targets unattempted") {
		t.Errorf("the report does not flag the run:\n%s", out)
	}
	// The other default of the door: the events stay disabled, so nothing
	// is armed or optimized; the report says so (a note, not a warning).
	const note = " note: --enable none (the default): the events are registered but never enabled"
	if !strings.Contains(out, note) {
		t.Errorf("the report does not say the events were never enabled:\n%s", out)
	}
	out, stderr, code = runKpsim(append(base, "--lines-per-write", "1", "--enable", "each")...)
	if code != 0 || stderr != "" || strings.Contains(out, note) {
		t.Errorf("--lines-per-write 1 --enable each: exit %d, stderr %q; want 0, nothing and no note", code, stderr)
	}
}

// TestBPFAllFailedHint: run session and run multi on a kernel without
// CONFIG_FPROBE fail every attach -EOPNOTSUPP: the warning names the
// config and --kconfig FPROBE=y, exit 3 (0 with --allow-refusals).
func TestBPFAllFailedHint(t *testing.T) {
	at73 := small73
	for _, tc := range []struct {
		args  []string
		image []string
		code  int
	}{
		{[]string{"run", "session", "--n", "2"}, at73, 3},
		{[]string{"run", "multi", "--n", "2"}, small, 3},
		{[]string{"run", "session", "--n", "2", "--allow-refusals"}, at73, 0},
	} {
		args := append(append(tc.args, "--patches", "none", "--kconfig", "FPROBE=n"), tc.image...)
		out, stderr, code := runKpsim(args...)
		if code != tc.code || !strings.Contains(stderr, "warning: none") || !strings.Contains(stderr, "-EOPNOTSUPP") ||
			!strings.Contains(stderr, "use --kconfig FPROBE=y") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one warning naming --kconfig FPROBE=y", tc.args, code, stderr, tc.code)
		}
		if !strings.Contains(out, " WARNING none") {
			t.Errorf("%v: the table does not flag the run:\n%s", tc.args, out)
		}
	}
}

// TestBatchReportOneBatch: --batch-report K with no more targets than K
// is refused (one batch is one point: no fit of a + b·N); when refusals
// leave one batch of accepted probes the report says no fit exists.
func TestBatchReportOneBatch(t *testing.T) {
	_, stderr, code := runKpsim(append([]string{"run", "many", "--n", "20", "--batch-report", "20", "--patches", "none"}, small...)...)
	if code != 2 || !strings.Contains(stderr, "--batch-report 20: the run has 20 targets") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("K = N: exit %d, stderr %q; want 2 and one line", code, stderr)
	}
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	if err := os.WriteFile(list, []byte("kprobe_many_func_1\nno_such_function_xyz\nkprobe_many_func_2\nkprobe_many_func_3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runKpsim(append([]string{"run", "many", "--targets", list, "--via", "register_kprobe", "--batch-report", "3", "--patches", "none", "--probe-targets", "10"}, small...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "growth (none, attach pass, batches of 3): no fit: the pass accepted 3 probes, one batch") || strings.Contains(out, "cycles/probe c(N) =") {
		t.Errorf("one batch: want no fit, got:\n%s", out)
	}
}
