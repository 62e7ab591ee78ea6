package main

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
)

// TestGHzFlagRefused: --ghz takes a clock above 0 and finite, and says
// so in one line, exit 2, on every command that has it.
func TestGHzFlagRefused(t *testing.T) {
	for _, cmd := range [][]string{{"run", "many", "--n", "10"}, {"run", "session", "--n", "2"}} {
		for _, v := range []string{"0", "-2.6", "NaN", "Inf", "-Inf", "x"} {
			args := append(append([]string(nil), cmd...), "--ghz", v)
			out, errs, code := runKpsim(append(args, small...)...)
			want := "--ghz: want a clock frequency in GHz above 0, got "
			if v == "x" {
				want = `invalid argument "x" for "--ghz" flag`
			}
			if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, out, errs, want)
			}
		}
	}
}

// TestKernelTimeClock: run many and run session convert cycles to
// kernel time at one clock: the built-in cold profile's (2600 MHz, its
// clock header), or --ghz; the report says which.
func TestKernelTimeClock(t *testing.T) {
	type clock struct {
		GHz    float64 `json:"ghz"`
		Source string  `json:"source"`
	}
	for _, tc := range []struct {
		ghz    []string
		want   float64
		source string
	}{
		{nil, 2.6, "built-in cold profile's measured times were converted at (its clock header: ns x 2600 MHz"},
		{[]string{"--ghz", "2"}, 2, "--ghz"},
	} {
		out := mustKpsim(t, append(append([]string{"run", "many", "--n", "40", "--format", "json"}, tc.ghz...), small...)...)
		var many struct {
			Meta struct {
				Costs struct {
					Clock clock `json:"clock"`
				} `json:"costs"`
			} `json:"meta"`
			Runs []struct {
				Task   int64 `json:"task_est_cycles"`
				TaskNS int64 `json:"task_est_kernel_ns"`
				Phases []struct {
					Est   int64 `json:"est_cycles"`
					EstNS int64 `json:"est_kernel_ns"`
				} `json:"phases"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &many); err != nil {
			t.Fatal(err)
		}
		c := many.Meta.Costs.Clock
		if c.GHz != tc.want || !strings.Contains(c.Source, tc.source) {
			t.Errorf("%v: clock %+v, want %v GHz from %q", tc.ghz, c, tc.want, tc.source)
		}
		for _, r := range many.Runs {
			// ns come from the unrounded cycles: within 1 ns of the integer cycles'.
			if want := float64(r.Task) / tc.want; r.Task == 0 || math.Abs(float64(r.TaskNS)-want) > 1 {
				t.Errorf("%v: task %d cycles, %d ns, want %.0f", tc.ghz, r.Task, r.TaskNS, want)
			}
			for _, p := range r.Phases {
				if want := float64(p.Est) / tc.want; math.Abs(float64(p.EstNS)-want) > 1 {
					t.Errorf("%v: phase %d cycles, %d ns, want %.0f", tc.ghz, p.Est, p.EstNS, want)
				}
			}
		}
		// 7.3: its sessions attach (6.1 has no kprobe.session link).
		out = mustKpsim(t, append(append([]string{"run", "session", "--n", "3", "--format", "json"}, tc.ghz...), small73...)...)
		var sess struct {
			Costs struct {
				Clock clock `json:"clock"`
			} `json:"costs"`
			Runs []struct {
				Cycles float64 `json:"est_cycles"`
				MS     float64 `json:"est_ms"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &sess); err != nil {
			t.Fatal(err)
		}
		if sess.Costs.Clock != c {
			t.Errorf("%v: run session's clock %+v, run many's %+v", tc.ghz, sess.Costs.Clock, c)
		}
		for _, r := range sess.Runs {
			if r.Cycles == 0 || math.Abs(r.MS-r.Cycles/tc.want/1e6) > 1e-9 {
				t.Errorf("%v: session %v cycles, %v ms, want cycles / %v GHz", tc.ghz, r.Cycles, r.MS, tc.want)
			}
		}
		table := mustKpsim(t, append(append([]string{"run", "session", "--n", "3"}, tc.ghz...), small73...)...)
		if !strings.Contains(table, " ms: est. kernel time = estimated cycles / ") || strings.Contains(table, "2.6e6") {
			t.Errorf("%v: run session's table does not name its clock:\n%s", tc.ghz, table)
		}
	}
}

// small73 is small at 7.3, whose BPF sessions attach.
var small73 = append([]string{"--kernel-version", "7.3"}, smallSizes...)

// TestReportOutputsReadable: no command's report prints a Go map
// literal, "inf", "0.00x" or a sim wall of "0s", and the tables label
// kpsim's run time sim wall.
func TestReportOutputsReadable(t *testing.T) {
	bad := regexp.MustCompile(`map\[|\binf\b|\b0\.00x|\bwall 0s|\(wall\)`)
	for _, args := range [][]string{
		{"run", "session", "--n", "3", "--allow-refusals"}, // 6.1: every session attach fails -EINVAL
		{"run", "multi", "--n", "5"},
		{"run", "crossover", "--n", "1,4"},
		{"sweep", "many", "--n", "20,40"},
		{"run", "many", "--n", "40"},
		{"run", "many", "--n", "40", "--format", "csv"},
		{"run", "many", "--n", "40", "--format", "bench"},
		{"run", "many", "--n", "40", "--ablation"},
		{"run", "many", "--n", "40", "--ablation", "--detail"},
	} {
		out := mustKpsim(t, append(append([]string(nil), args...), small...)...)
		for _, l := range strings.Split(out, "\n") {
			if bad.MatchString(l) {
				t.Errorf("%v: %q", args, l)
			}
		}
		if args[len(args)-1] == "bench" && (strings.Contains(out, " sec/op") || strings.Contains(out, " ns/op") || !strings.Contains(out, " sim-sec/op") || !strings.Contains(out, " task-est-kernel-ns/op")) {
			t.Errorf("%v: kpsim's run time in a kernel-time unit, or no est-kernel-ns/op:\n%s", args, out)
		}
		if args[len(args)-1] == "--ablation" {
			if !strings.Contains(out, "\n ablation summary") || strings.Contains(out, "by phase") {
				t.Errorf("%v: no summary first, or the per-phase tables without --detail:\n%s", args, out)
			}
		}
	}
}
