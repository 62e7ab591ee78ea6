package bug

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

// moduleImage: many modules with bug tables, one module holding two
// entries at one address (the tie the index must resolve as the scan does)
// and one module with none.
func moduleImage(t testing.TB, seed uint64) *image.Kernel {
	c := synth.DefaultConfig()
	c.Seed = seed
	c.Functions, c.InitFunctions = 1500, 50
	c.JumpEntries, c.JumpKeys = 500, 100
	c.StaticCallSites, c.StaticCallKeys = 100, 10
	c.BugEntries, c.Blacklist = 400, 20
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 12, 40, 3
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 10, 4, 25
	k := fixture.Generate(t, c)
	m := k.Modules[3]
	dup := m.BugEntries[len(m.BugEntries)/2]
	dup.Line++
	m.BugEntries = append(m.BugEntries, dup)
	k.Modules[5].BugEntries = nil
	return k
}

// moduleForms: upstream, module-bug-index alone, with the core bug-index,
// with every module's allocation failing, with only the second failing.
func moduleForms(t testing.TB, k *image.Kernel) []*Table {
	mi := sim.Switches(0).With(sim.ModuleBugIndex)
	all, _ := sim.ParseFaults("bug.module_index.alloc")
	second, _ := sim.ParseFaults("bug.module_index.alloc@2")
	var out []*Table
	for _, c := range []struct {
		sw sim.Switches
		f  *sim.Faults
	}{{0, nil}, {mi, nil}, {mi.With(sim.BugIndex), nil}, {mi, all}, {mi, second}} {
		tb, err := New(k, c.sw, c.f)
		if err != nil {
			t.Fatal(err)
		}
		tb.FinalizeModules(nil)
		if err := tb.LateInit(nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, tb)
	}
	return out
}

// TestModuleIndexEquivalence: every form returns the very entry the
// upstream walk returns (core first, then modules newest first, first in
// table order), at every bug address, next to it and at function starts.
func TestModuleIndexEquivalence(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		k := moduleImage(t, seed)
		tbs := moduleForms(t, k)
		if !tbs[1].ModuleIndexed(k.Modules[0]) || tbs[1].ModuleIndexed(k.Modules[5]) || tbs[3].ModuleIndexed(k.Modules[0]) ||
			tbs[4].ModuleIndexed(k.Modules[1]) || !tbs[4].ModuleIndexed(k.Modules[2]) {
			t.Fatal("index presence does not follow the switch and the faults")
		}
		for _, a := range addrs(k, 1) {
			want := oracle(k, a)
			for i, tb := range tbs {
				if got := tb.FindBug(nil, a); got != want {
					t.Fatalf("seed %d form %d at %#x: got %v, want %v", seed, i, a, got, want)
				}
			}
		}
	}
}

func TestModuleIndexRapid(t *testing.T) {
	k := moduleImage(t, 4)
	tbs := moduleForms(t, k)
	rapid.Check(t, func(rt *rapid.T) {
		m := k.Modules[rapid.IntRange(0, len(k.Modules)-1).Draw(rt, "module")]
		var a uint64
		if len(m.BugEntries) > 0 && rapid.Bool().Draw(rt, "bug") {
			a = m.BugEntries[rapid.IntRange(0, len(m.BugEntries)-1).Draw(rt, "entry")].Addr
		} else {
			a = m.Text.Start + uint64(rapid.IntRange(0, len(m.Text.Bytes)-1).Draw(rt, "off"))
		}
		a += uint64(rapid.IntRange(-2, 2).Draw(rt, "delta"))
		want := oracle(k, a)
		for i, tb := range tbs {
			if got := tb.FindBug(nil, a); got != want {
				rt.Fatalf("form %d at %#x: got %v, want %v", i, a, got, want)
			}
		}
	})
}

// TestModuleIndexCounts: a vmlinux address costs one visit and one range
// test per module with an index, no module entry scanned; building charges
// one fill per entry.
func TestModuleIndexCounts(t *testing.T) {
	k := moduleImage(t, 1)
	tb, _ := New(k, sim.Switches(0).With(sim.ModuleBugIndex).With(sim.BugIndex), nil)
	cb := sim.NewCounters(false)
	tb.FinalizeModules(cb)
	if err := tb.LateInit(nil); err != nil {
		t.Fatal(err)
	}
	entries, withIdx := 0, 0
	for _, m := range k.Modules {
		entries += len(m.BugEntries)
		if len(m.BugEntries) > 0 {
			withIdx++
		}
	}
	if got := cb.Total(OpModIndexFill); got != uint64(entries) {
		t.Errorf("fills %d, want one per module entry (%d)", got, entries)
	}
	c := sim.NewCounters(false)
	f := k.Functions()[100]
	if tb.FindBug(c, f.Addr) != nil {
		t.Fatal("a function start is no bug site")
	}
	if c.Total(OpModuleVisit) != uint64(len(k.Modules)) || c.Total(OpModIndexRange) != uint64(withIdx) || c.Total(OpScanEntry) != 0 {
		t.Errorf("counts %s: want %d visits, %d range tests, no scanned entry", c, len(k.Modules), withIdx)
	}
}

// TestModuleIndexFastScan: the simulator's fast path gives the walk's
// counts under the module index too.
func TestModuleIndexFastScan(t *testing.T) {
	k := moduleImage(t, 2)
	var qs []uint64
	for _, f := range k.Functions() {
		qs = append(qs, f.Addr)
	}
	for _, m := range k.Modules {
		for _, b := range m.BugEntries {
			qs = append(qs, b.Addr, b.Addr+1)
		}
		qs = append(qs, m.Text.Start+7)
	}
	second := func() *sim.Faults { f, _ := sim.ParseFaults("bug.module_index.alloc@2"); return f }
	for _, sw := range []sim.Switches{sim.Switches(0).With(sim.ModuleBugIndex), sim.Switches(0).With(sim.ModuleBugIndex).With(sim.BugIndex)} {
		walk, _ := New(k, sw, second())
		fast, _ := New(k, sw, second())
		for _, tb := range []*Table{walk, fast} {
			tb.FinalizeModules(nil)
			_ = tb.LateInit(nil)
		}
		fast.EnableFastScan()
		cw, cf := sim.NewCounters(false), sim.NewCounters(false)
		for _, a := range qs {
			bw, bf := walk.FindBug(cw, a), fast.FindBug(cf, a)
			if bw != bf || !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
				t.Fatalf("%v %#x: walk %v fast %v; counts walk\n%s fast\n%s", sw.Names(), a, bw, bf, cw, cf)
			}
		}
	}
}
