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
	out := mustKpsim(t, append(args, "--format", "bench")...)
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
	if !strings.Contains(out, "# kpsim build: kpsim ") || !strings.Contains(out, "# modelled text sha256: ") {
		t.Errorf("no build lines:\n%.400s", out)
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
			for _, k := range []string{"kernel", "n", "via", "costs", "faults", "cpu"} {
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

// TestRunKallsymsBudget: without --n each timing loop runs for
// --benchtime (passes grown as testing.B grows b.N); the modelled counts
// per call do not depend on the pass count; the report says how it was
// made; --format bench writes benchstat's format.
func TestRunKallsymsBudget(t *testing.T) {
	args := append([]string{"run", "kallsyms", "--variants", "baseline,offset-index", "--format", "json"}, small...)
	out := mustKpsim(t, append(args, "--benchtime", "2ms")...)
	fixed := mustKpsim(t, append(args, "--n", "3")...)
	type rep struct {
		Budget string `json:"time_budget"`
		Meta   struct {
			Kpsim struct{ Go string }
		}
		Runs []struct {
			Name    string
			HitOps  map[string]float64 `json:"hit_ops"`
			MissCyc float64            `json:"miss_est_cycles"`
			Passes  map[string]int
		}
	}
	var b, f rep
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fixed), &f); err != nil {
		t.Fatal(err)
	}
	if b.Budget != "2ms" || f.Budget != "" || b.Meta.Kpsim.Go == "" || len(b.Runs) != 2 {
		t.Fatalf("budget %q / %q, meta %+v, %d runs", b.Budget, f.Budget, b.Meta, len(b.Runs))
	}
	for i, r := range b.Runs {
		for _, m := range []string{"hit", "miss", "sprint", "sprint_no_offset", "walk"} {
			if r.Passes[m] < 1 || f.Runs[i].Passes[m] != 3 && m != "walk" {
				t.Errorf("%s %s: %d passes with the budget, %d fixed", r.Name, m, r.Passes[m], f.Runs[i].Passes[m])
			}
		}
		if r.MissCyc != f.Runs[i].MissCyc || len(r.HitOps) != len(f.Runs[i].HitOps) {
			t.Errorf("%s: counts depend on the pass count", r.Name)
		}
		for k, v := range r.HitOps {
			if f.Runs[i].HitOps[k] != v {
				t.Errorf("%s: hit op %s %v vs %v", r.Name, k, v, f.Runs[i].HitOps[k])
			}
		}
	}
	if _, errs, code := runKpsim(append(args, "--n", "3", "--benchtime", "1ms")...); code != 2 || !strings.Contains(errs, "--benchtime: conflicts with --n") {
		t.Errorf("--n with --benchtime: exit %d %q", code, errs)
	}
	bench, errs, code := runKpsim(append([]string{"run", "kallsyms", "--variants", "baseline", "--n", "2", "--format", "bench"}, small...)...)
	if code != 0 || !strings.Contains(bench, "BenchmarkKallsyms/variant=baseline/lookup=hit 2 ") || !strings.Contains(bench, "Unit est-cycles/op assume=exact") {
		t.Errorf("bench: exit %d %s\n%.800s", code, errs, bench)
	}
}
