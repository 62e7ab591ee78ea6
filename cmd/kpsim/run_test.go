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
