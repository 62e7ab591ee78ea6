package main

import (
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

// TestRunManyBench: --format bench is Go benchmark format benchstat reads:
// exact units, configuration keys, one result per run and phase, and the
// same figures as the JSON report.
func TestRunManyBench(t *testing.T) {
	args := append([]string{"run", "many", "--patches", "none", "--patches", "series"}, smallRun...)
	out, errs, code := runKpsim(append(args, "--format", "bench")...)
	if code != 0 {
		t.Fatal(errs)
	}
	js, _, _ := runKpsim(append(args, "--format", "json")...)
	var rep struct {
		Runs []struct {
			Name      string
			TotalOps  uint64 `json:"total_ops"`
			EstCycles int64  `json:"est_cycles"`
			Phases    []struct {
				Name      string
				Ops       uint64
				EstCycles int64 `json:"est_cycles"`
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{}
	for _, r := range rep.Runs {
		want["Many/patches="+r.Name+"/phase=total"] = [2]float64{float64(r.TotalOps), float64(r.EstCycles)}
		for _, p := range r.Phases {
			want["Many/patches="+r.Name+"/phase="+p.Name] = [2]float64{float64(p.Ops), float64(p.EstCycles)}
		}
	}
	rd := benchfmt.NewReader(strings.NewReader(out), "bench.txt")
	exact := map[string]bool{}
	results := 0
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.UnitMetadata:
			if rec.Key == "assume" && rec.Value == "exact" {
				exact[rec.Unit] = true
			}
		case *benchfmt.SyntaxError:
			t.Fatal(rec)
		case *benchfmt.Result:
			results++
			for _, k := range []string{"kernel", "n", "via", "kpsim", "costs", "faults", "cpu", "text-sha256"} {
				if rec.GetConfig(k) == "" {
					t.Errorf("%s: no config key %s", rec.Name, k)
				}
			}
			w, ok := want[rec.Name.String()]
			if !ok {
				t.Errorf("unexpected result %s", rec.Name)
				continue
			}
			ops, _ := rec.Value("ops/op")
			cyc, _ := rec.Value("est-cycles/op")
			if ops != w[0] || cyc != w[1] {
				t.Errorf("%s: %v ops %v cycles, JSON says %v", rec.Name, ops, cyc, w)
			}
		}
	}
	for _, u := range []string{"ops/op", "est-cycles/op", "registered/op"} {
		if !exact[u] {
			t.Errorf("unit %s lacks assume=exact", u)
		}
	}
	if results < 2*10 {
		t.Errorf("%d results", results)
	}
}
