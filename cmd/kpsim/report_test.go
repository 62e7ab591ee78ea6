package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
)

type reportJSON struct {
	Schema int `json:"schema_version"`
	Meta   struct {
		Kpsim struct {
			Module, Version, Go string
		} `json:"kpsim"`
		Kernel struct {
			Source, Profile, Path, SHA256 string
			Flags                         map[string]string
			Modules                       []string
			TextSHA256                    string `json:"text_sha256"`
		} `json:"kernel"`
		Costs struct {
			File, SHA256 string
			Overrides    int
		} `json:"costs"`
		Faults string `json:"faults"`
		CPU    string `json:"cpu_assumed"`
		Host   string `json:"host_cpu"`
	} `json:"meta"`
	Runs []struct {
		Name      string
		EstCycles json.Number `json:"est_cycles"`
		Phases    []struct {
			Name      string
			EstCycles json.Number `json:"est_cycles"`
		}
	}
}

func runJSON(t *testing.T, args ...string) (reportJSON, string) {
	t.Helper()
	out, errs, code := runKpsim(append(append([]string{"run", "many", "--format", "json"}, args...), smallRun...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var r reportJSON
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r, out
}

// TestReportSelfDescribing: two reports made with a different profile,
// cost file or fault set never look the same, and each says which.
func TestReportSelfDescribing(t *testing.T) {
	dir := t.TempDir()
	costs := filepath.Join(dir, "costs.txt")
	os.WriteFile(costs, []byte("kprobe.hash.visit 9\n"), 0o644)
	sum := sha256.Sum256([]byte("kprobe.hash.visit 9\n"))

	base, baseOut := runJSON(t)
	if base.Schema != scenarios.SchemaVersion || base.Meta.Kpsim.Module != "github.com/kpsim/kpsim" || base.Meta.Kpsim.Go == "" {
		t.Errorf("schema %d, version %+v", base.Schema, base.Meta.Kpsim)
	}
	k := base.Meta.Kernel
	if k.Source != "synthetic" || k.Profile != "reference" || k.Flags["functions"] != "3000" || k.Flags["modules"] != "2" || len(k.Modules) != 2 || len(k.TextSHA256) != 64 {
		t.Errorf("kernel %+v", k)
	}
	if _, ok := k.Flags["seed"]; ok {
		t.Error("a default flag (--seed) listed as non-default")
	}
	if base.Meta.CPU == "" || base.Meta.Host == "" || base.Meta.Costs.File != "" {
		t.Errorf("meta %+v", base.Meta)
	}

	withCosts, costsOut := runJSON(t, "--costs", costs)
	if withCosts.Meta.Costs.File != costs || withCosts.Meta.Costs.SHA256 != hex.EncodeToString(sum[:]) || withCosts.Meta.Costs.Overrides != 1 {
		t.Errorf("costs %+v", withCosts.Meta.Costs)
	}
	withFaults, faultsOut := runJSON(t, "--faults", "kprobe.aggr.alloc")
	if withFaults.Meta.Faults != "kprobe.aggr.alloc" {
		t.Errorf("faults %q", withFaults.Meta.Faults)
	}
	prof, profOut := runJSON(t, "--profile", "debian-6.1")
	if prof.Meta.Kernel.Profile != "debian-6.1" {
		t.Errorf("profile %q", prof.Meta.Kernel.Profile)
	}
	outs := []string{baseOut, costsOut, faultsOut, profOut}
	for i := range outs {
		for j := i + 1; j < len(outs); j++ {
			if header(outs[i]) == header(outs[j]) {
				t.Errorf("reports %d and %d have the same meta", i, j)
			}
		}
	}
	// The table headers differ too.
	tables := map[string]bool{}
	for _, extra := range [][]string{nil, {"--costs", costs}, {"--faults", "kprobe.aggr.alloc"}, {"--profile", "debian-6.1"}} {
		out := mustKpsim(t, append(append([]string{"run", "many", "--patches", "none"}, extra...), smallRun...)...)
		h := out[:strings.Index(out, " params:")]
		if tables[h] {
			t.Errorf("%v: table header the same as another's:\n%s", extra, h)
		}
		tables[h] = true
	}
}

func header(out string) string {
	var m struct{ Meta json.RawMessage }
	json.Unmarshal([]byte(out), &m)
	return string(m.Meta)
}

// TestReportJSONPhases: every run lists every phase in scenarios.PhaseNames()
// order, with integer cycles.
func TestReportJSONPhases(t *testing.T) {
	r, _ := runJSON(t, "--patches", "none", "--patches", "series")
	want := scenarios.PhaseNames()
	for _, run := range r.Runs {
		if len(run.Phases) != len(want) {
			t.Fatalf("run %s: %d phases, want %d", run.Name, len(run.Phases), len(want))
		}
		for i, p := range run.Phases {
			if p.Name != want[i] {
				t.Errorf("run %s phase %d is %s, want %s", run.Name, i, p.Name, want[i])
			}
			if strings.ContainsAny(p.EstCycles.String(), ".eE") {
				t.Errorf("run %s phase %s: cycles %s not an integer", run.Name, p.Name, p.EstCycles)
			}
		}
		if strings.ContainsAny(run.EstCycles.String(), ".eE") {
			t.Errorf("run %s: cycles %s not an integer", run.Name, run.EstCycles)
		}
	}
}

// TestReportTableWidth: the table fits 100 columns, keeps its per-phase
// table with many runs (in groups), and ablation --detail shows series/run.
func TestReportTableWidth(t *testing.T) {
	for _, args := range [][]string{{}, {"--ablation", "--detail", "--batch-report", "100"}, {"--image-probes", "200", "--mixed", "--via", "register_kprobe"}} {
		out, errs, code := runKpsim(append(append([]string{"run", "many"}, args...), smallRun...)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, errs)
		}
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > report.TableWidth {
				t.Errorf("%v: line %d is %d columns: %q", args, i+1, n, l)
			}
		}
		if !strings.Contains(out, "by phase") || !strings.Contains(out, "safety.jump_label") {
			t.Errorf("%v: no per-phase table", args)
		}
		if len(args) > 0 && args[0] == "--ablation" {
			if !strings.Contains(out, "(runs 1-") || !strings.Contains(out, "series/run") {
				t.Errorf("ablation: per-phase table not grouped or no series/run column")
			}
			// Every run appears in the phase tables.
			if strings.Count(out, "estimated cycles and kernel time by phase") < 3 {
				t.Errorf("ablation: %d phase-table groups", strings.Count(out, "estimated cycles and kernel time by phase"))
			}
		}
	}
}

// TestReportCSV: phases, totals, outcomes by errno, wall time, digests.
func TestReportCSV(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "many", "--format", "csv", "--image-probes", "200", "--mixed", "--via", "register_kprobe"}, smallRun...)...)
	rows, err := csv.NewReader(bytes.NewReader([]byte(out))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, h := range rows[0] {
		idx[h] = i
	}
	for _, c := range []string{"run", "phase", "counter", "count", "est_cycles", "est_kernel_ns", "sim_wall_ns", "registered", "rejected_EINVAL", "decisions_digest", "kpsim", "kernel", "kernel_sha256", "costs", "faults"} {
		if _, ok := idx[c]; !ok {
			t.Errorf("no column %s in %v", c, rows[0])
		}
	}
	phases := map[string]bool{}
	totals := 0
	for _, r := range rows[1:] {
		phases[r[idx["phase"]]] = true
		if r[idx["phase"]] == "total" {
			totals++
			if r[idx["wall_ns"]] == "0" || r[idx["rejected_EINVAL"]] == "0" {
				t.Errorf("total row %v", r)
			}
		}
		if strings.Contains(r[idx["est_cycles"]], ".") {
			t.Errorf("cycles %s not an integer", r[idx["est_cycles"]])
		}
	}
	if totals != 2 || len(phases) != len(scenarios.PhaseNames())+1 {
		t.Errorf("%d total rows, %d phases", totals, len(phases))
	}
}
