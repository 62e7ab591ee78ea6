package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var smallRun = append([]string{"--n", "300"}, small...)

func TestRunManyJSON(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "many", "--format", "json", "--patches", "none", "--patches", "series,bug-index"}, smallRun...)...)
	var rep struct {
		Scenario string `json:"scenario"`
		Kernel   string `json:"kernel"`
		N        int    `json:"n"`
		Runs     []map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Scenario != "many" || rep.N != 300 || rep.Kernel == "" || len(rep.Runs) != 2 {
		t.Fatalf("report header %+v", rep)
	}
	for _, r := range rep.Runs {
		for _, k := range []string{"name", "patches", "registered", "optimized", "rejected", "decisions_digest", "ops", "total_ops", "est_cycles", "wall_ns", "sim_retained_bytes"} {
			if _, ok := r[k]; !ok {
				t.Errorf("run lacks %q", k)
			}
		}
	}
	if string(rep.Runs[0]["decisions_digest"]) != string(rep.Runs[1]["decisions_digest"]) {
		t.Error("none and series+bug-index decided differently")
	}
	if string(rep.Runs[1]["name"]) != `"series+bug-index"` && !strings.Contains(string(rep.Runs[1]["name"]), "bug-index") {
		t.Errorf("run name %s does not say what it holds", rep.Runs[1]["name"])
	}
}

func TestRunManyCSVToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	mustKpsim(t, append([]string{"run", "many", "--format", "csv", "--out", path}, smallRun...)...)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0][:5], ",") != "run,patches,phase,counter,count" || len(rows) < 20 {
		t.Fatalf("csv header %v, %d rows", rows[0], len(rows))
	}
	runs := map[string]bool{}
	for _, r := range rows[1:] {
		runs[r[0]] = true
	}
	if !runs["none"] || !runs["series"] {
		t.Errorf("csv runs %v", runs)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".out.csv.tmp*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestRunManyBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "many", "--patches", "nope"}, "unknown patch switch"},
		{[]string{"run", "many", "--patches", "iter-can-probe"}, "requires kprobe-tree"},
		{[]string{"run", "many", "--n", "0"}, "--n"},
		{[]string{"run", "many", "--n", "-5"}, "--n"},
		{[]string{"run", "many", "--format", "xml"}, "--format"},
		{[]string{"run", "many", "--placement", "middle"}, "--placement"},
		{[]string{"run", "many", "--faults", "no.such.point"}, "--faults"},
		{[]string{"run", "many", "--out", filepath.Join(dir, "missing", "x.json")}, "--out"},
		{[]string{"run", "many", "--out", dir}, "--out"},
		{[]string{"run", "many", "--costs", filepath.Join(dir, "nope.txt")}, "--costs"},
		{[]string{"run", "many", "--sensitivity", "--format", "csv"}, "--sensitivity"},
		{[]string{"run", "many", "--sensitivity", "--format", "bench"}, "--sensitivity"},
		{[]string{"run", "many", "--sensitivity", "--patches", "series"}, "--sensitivity"},
		{[]string{"run", "nosuch"}, "unknown scenario"},
		{[]string{"run"}, "missing scenario"},
	}
	for _, tc := range tests {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line naming %q", tc.args, code, errs, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad runs left files: %v", entries)
	}
}

// TestRunManyTaskAndSensitivity: the table's headline is the task's
// cycles, the optimizer's are outside it, and --sensitivity adds its
// table (text) and every priced weight (JSON).
func TestRunManyTaskAndSensitivity(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "many", "--sensitivity"}, smallRun...)...)
	for _, want := range []string{"task cycles", "optimizer (kworker)", "system total", "none/run (task)",
		"where series's cycles go", "sensitivity of none/series (task cycles)", "Every weight anywhere in its range at once"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	js := mustKpsim(t, append([]string{"run", "many", "--sensitivity", "--format", "json"}, smallRun...)...)
	var rep struct {
		Runs []struct {
			Est       int64            `json:"est_cycles"`
			Task      int64            `json:"task_est_cycles"`
			ByContext map[string]int64 `json:"est_cycles_by_context"`
			TopOps    []struct {
				Op     string `json:"op"`
				Source string `json:"weight_source"`
			} `json:"top_ops"`
		}
		Sensitivity struct {
			Ratio float64 `json:"ratio"`
			Low   float64 `json:"joint_low"`
			High  float64 `json:"joint_high"`
			Rows  []struct {
				Op string `json:"op"`
			} `json:"rows"`
		} `json:"sensitivity"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		if r.Task <= 0 || r.Task >= r.Est || r.ByContext["task"] != r.Task || r.ByContext["kworker"] <= 0 {
			t.Errorf("run cycles: est %d task %d by context %v", r.Est, r.Task, r.ByContext)
		}
		if len(r.TopOps) == 0 || r.TopOps[0].Source == "" {
			t.Errorf("top ops %+v", r.TopOps)
		}
	}
	s := rep.Sensitivity
	if len(s.Rows) == 0 || !(s.Low <= s.Ratio && s.Ratio <= s.High) {
		t.Errorf("sensitivity: ratio %v in %v-%v, %d rows", s.Ratio, s.Low, s.High, len(s.Rows))
	}
}
