package scenarios

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// TestTracingMultiTotals: run tracing-multi's components sum to its
// total, every component the kernel runs per function is there (the
// kallsyms lookup is one of eight, not the whole), and the kallsyms share
// is given over that complete total; before 7.3 the run is refused.
func TestTracingMultiTotals(t *testing.T) {
	k := fixture.Generate(t, smallImage(11))
	variants := []kallsyms.Variant{kallsyms.AllVariants()[0]}
	costs := sim.DefaultCosts()
	for _, gen := range []image.Generation{image.Gen61, image.Gen612} {
		k.Config.Gen = gen
		if _, err := RunTracingMulti(k, 8, 3, variants, costs, 1); !errors.Is(err, ErrNoTracingMulti) {
			t.Errorf("%s: err %v, want ErrNoTracingMulti", gen, err)
		}
	}
	k.Config.Gen = image.Gen73
	for _, K := range []int{8, 1 << 20} {
		rep, err := RunTracingMulti(k, K, 3, variants, costs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete() || len(rep.Includes) == 0 || rep.K > K || rep.KRequested != K {
			t.Errorf("K=%d: complete %v, includes %d, k %d of %d", K, rep.Complete(), len(rep.Includes), rep.K, rep.KRequested)
		}
		r := rep.Rows[0]
		if len(r.Components) != 8 {
			t.Fatalf("K=%d: %d components, want 8", K, len(r.Components))
		}
		sum := 0.0
		for _, c := range r.Components {
			if c.Cycles <= 0 {
				t.Errorf("K=%d: component %s costs %v", K, c.Name, c.Cycles)
			}
			if math.Abs(c.PerFunc*float64(r.K)-c.Cycles) > 1e-6*c.Cycles {
				t.Errorf("K=%d: %s per function %v × %d != %v", K, c.Name, c.PerFunc, r.K, c.Cycles)
			}
			sum += c.Cycles
		}
		if math.Abs(sum-r.TotalCyc) > 1e-9*r.TotalCyc || r.Share == nil || math.Abs(*r.Share-r.KallsymsCyc/r.TotalCyc) > 1e-12 {
			t.Errorf("K=%d: components sum %v, total %v, share %v", K, sum, r.TotalCyc, r.Share)
		}
		if r.Trampolines != r.K || r.Sites != r.K || r.JITInsns != 2*r.K*bpf.TrampolineInsns(3) {
			t.Errorf("K=%d: trampolines %d, sites %d, JIT insns %d", K, r.Trampolines, r.Sites, r.JITInsns)
		}
	}
}

// TestTotalScope: run session and run multi say what their totals
// include and lack: the fgraph subops only for 7.3's session links,
// pairs only with --pairs; the text-poke batches are counted whatever
// the sites (one every 256), so they are never missing.
func TestTotalScope(t *testing.T) {
	has := func(l []string, s string) bool {
		for _, x := range l {
			if strings.Contains(x, s) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		scenario    string
		gen         image.Generation
		pairs       bool
		subops, per bool
	}{
		{"session", image.Gen61, false, false, false},
		{"session", image.Gen73, true, true, true},
		{"multi", image.Gen73, false, false, false},
		{"multi", image.Gen612, false, false, false},
	} {
		inc, nm, ex := TotalScope(tc.scenario, tc.gen, tc.pairs)
		if len(inc) == 0 || len(ex) == 0 || has(nm, "batch") || has(nm, "subops") != tc.subops || has(inc, "pairs:") != tc.per {
			t.Errorf("%+v: includes %q, not modelled %q", tc, inc, nm)
		}
	}
	// The reports carry them (JSON and table read the same fields).
	k := fixture.Generate(t, smallImage(11))
	k.Config.Gen = image.Gen73
	rep, err := RunMulti(k, SessionOptions{BPF: DefaultBPFOptions(), Functions: 300, Runs: []RunSpec{{Name: "none"}}}, sim.DefaultCosts())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Includes) == 0 || has(rep.NotModelled, "batch") {
		t.Errorf("run multi K=300: includes %q, not modelled %q", rep.Includes, rep.NotModelled)
	}
	cr, err := RunCrossover(k, []int{10}, []kallsyms.Variant{kallsyms.AllVariants()[0]}, sim.DefaultCosts(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Includes) != 2 || !has(cr.Excluded, "sort_r") {
		t.Errorf("crossover: includes %q, excluded %q", cr.Includes, cr.Excluded)
	}
}
