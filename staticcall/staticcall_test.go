package staticcall

import (
	"errors"
	"math/bits"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

var (
	defOnce sync.Once
	defK    *image.Kernel
	defErr  error
)

func defaultImage(t testing.TB) *image.Kernel {
	defOnce.Do(func() { defK, _, defErr = synth.Generate(synth.DefaultConfig()) })
	if defErr != nil {
		t.Fatal(defErr)
	}
	return defK
}

func smallImage(t testing.TB, seed uint64) *image.Kernel {
	c := synth.DefaultConfig()
	c.Seed = seed
	c.Functions, c.InitFunctions = 2000, 100
	c.JumpEntries, c.JumpKeys = 1000, 300
	c.StaticCallSites, c.StaticCallKeys = 300, 20
	c.BugEntries, c.Blacklist = 600, 30
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 5, 3, 20, 3
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 2, 60, 4
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 40, 10, 10
	k, _, err := synth.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type fataler interface {
	Fatalf(format string, args ...any)
}

var forms = []struct {
	name  string
	sw    sim.Switches
	fault bool
	late  bool
}{
	{"linear", 0, false, true},
	{"indexed", sim.Switches(0).With(sim.StaticCallIndex), false, true},
	{"indexed-allocfail", sim.Switches(0).With(sim.StaticCallIndex), true, true},
	{"indexed-before-lateinit", sim.Switches(0).With(sim.StaticCallIndex), false, false},
}

func tables(t fataler, k *image.Kernel, st *boot.State) []*Table {
	var out []*Table
	for _, f := range forms {
		var faults *sim.Faults
		if f.fault {
			faults = &sim.Faults{}
			faults.Set(FaultIndexAlloc, 0)
		}
		tb, err := New(k, f.sw, faults, func() boot.State { return *st })
		if err != nil {
			t.Fatalf("%v", err)
		}
		if f.late {
			if err := tb.LateInit(nil); err != nil {
				t.Fatalf("%v", err)
			}
		}
		out = append(out, tb)
	}
	return out
}

// oracle: any live site whose 5 bytes meet [start, end].
func oracle(k *image.Kernel, st boot.State, start, end uint64) bool {
	hit := func(ss []image.StaticCallSite, init bool) bool {
		for _, s := range ss {
			if (init || !s.Init) && s.Addr <= end && s.Addr+5 > start {
				return true
			}
		}
		return false
	}
	if hit(k.StaticCallSites, st.InitSitesCount()) {
		return true
	}
	for _, m := range k.Modules {
		if m.State != image.ModuleUnformed && m.Contains(start) {
			return m.State != image.ModuleGoing && hit(m.StaticCallSites, m.State == image.ModuleComing)
		}
	}
	return false
}

func check(t fataler, k *image.Kernel, tbs []*Table, st boot.State, start, end uint64) {
	want := oracle(k, st, start, end)
	for i, tb := range tbs {
		got, err := tb.TextReserved(nil, start, end)
		if err != nil || got != want {
			t.Fatalf("%s %v [%#x,%#x]: got %v/%v, oracle %v", forms[i].name, st, start, end, got, err, want)
		}
	}
}

func allSites(k *image.Kernel) []image.StaticCallSite {
	ss := append([]image.StaticCallSite(nil), k.StaticCallSites...)
	for _, m := range k.Modules {
		ss = append(ss, m.StaticCallSites...)
	}
	return ss
}

func TestEquivalence(t *testing.T) {
	sample := 8
	if raceEnabled {
		sample = 200
	}
	for _, k := range []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)} {
		var st boot.State
		tbs := tables(t, k, &st)
		for _, st = range []boot.State{boot.Booting, boot.FreeingInitmem, boot.Running} {
			fs := k.Functions()
			for i, f := range fs {
				if len(fs) < 5000 || i%(sample*20) == 0 {
					check(t, k, tbs, st, f.Addr, f.Addr)
				}
			}
			for j, s := range allSites(k) {
				if len(k.StaticCallSites) > 1000 && j%sample != 0 {
					continue
				}
				for _, q := range [][2]int64{{0, 0}, {4, 4}, {-1, -1}, {5, 5}, {-4, -1}, {5, 9}, {-40, 40}} {
					check(t, k, tbs, st, s.Addr+uint64(q[0]), s.Addr+uint64(q[1]))
				}
			}
		}
	}
}

func TestEquivalenceModuleStates(t *testing.T) {
	k := smallImage(t, 9) // private: module states change
	m := k.Modules[1]
	st := boot.Running
	tbs := tables(t, k, &st)
	for _, ms := range []image.ModuleState{image.ModuleLive, image.ModuleComing, image.ModuleGoing, image.ModuleUnformed} {
		m.State = ms
		for _, s := range m.StaticCallSites {
			check(t, k, tbs, st, s.Addr, s.Addr+1)
		}
	}
}

func TestEquivalenceRapid(t *testing.T) {
	k := smallImage(t, 3)
	ss := allSites(k)
	rapid.Check(t, func(rt *rapid.T) {
		st := rapid.SampledFrom([]boot.State{boot.Booting, boot.Running}).Draw(rt, "state")
		s := ss[rapid.IntRange(0, len(ss)-1).Draw(rt, "site")]
		start := s.Addr + uint64(rapid.IntRange(-30, 30).Draw(rt, "off"))
		end := start + uint64(rapid.IntRange(0, 100).Draw(rt, "len"))
		check(rt, k, tables(rt, k, &st), st, start, end)
	})
}

func TestCounts(t *testing.T) {
	k := defaultImage(t)
	S := len(k.StaticCallSites)
	addr := k.Functions()[1000].Addr
	if oracle(k, boot.Running, addr, addr) {
		t.Fatal("probe address is reserved")
	}
	window := 0
	for _, s := range k.StaticCallSites {
		if s.Addr+4 >= addr && s.Addr <= addr {
			window++
		}
	}
	st := boot.Running
	tbs := tables(t, k, &st)
	c := sim.NewCounters(false)
	tbs[0].TextReserved(c, addr, addr)
	if n := c.Total(OpScanSite); n != uint64(S) {
		t.Errorf("linear: %d sites visited, want S = %d", n, S)
	}
	c = sim.NewCounters(false)
	tbs[1].TextReserved(c, addr, addr)
	if n, max := c.Total(OpIndexProbe), uint64(bits.Len(uint(S))); n > max || n+1 < max {
		t.Errorf("indexed: %d probes, want about %d", n, max)
	}
	if n := c.Total(OpIndexSite); n != uint64(window)+1 {
		t.Errorf("indexed: %d window sites, want %d", n, window+1)
	}
	if c.Total(OpScanSite) != 0 {
		t.Error("indexed form scanned the core table")
	}
}

// TestModuleLookupCounts: __static_call_mod_text_reserved looks the module
// up twice (start, then end for its WARN_ON_ONCE), on a core address as on
// a module one, and takes one module reference only for a module address.
func TestModuleLookupCounts(t *testing.T) {
	k := defaultImage(t)
	st := boot.Running
	tb := tables(t, k, &st)[0]
	for _, tc := range []struct {
		name string
		addr uint64
		gets uint64
	}{{"core", k.Functions()[1000].Addr, 0}, {"module", k.Modules[0].Text.Start, 1}} {
		c := sim.NewCounters(false)
		tb.TextReserved(c, tc.addr, tc.addr)
		if c.Total(OpModuleLookup) != 2 || c.Total(OpModuleGet) != tc.gets {
			t.Errorf("%s: %d module lookups (want 2), %d gets (want %d)", tc.name, c.Total(OpModuleLookup), c.Total(OpModuleGet), tc.gets)
		}
	}
}

func TestIndexAndErrors(t *testing.T) {
	k := smallImage(t, 4)
	idx := sim.Switches(0).With(sim.StaticCallIndex)
	tb, _ := New(k, idx, nil, nil)
	if _, err := tb.Index(); !errors.Is(err, ErrNotLateInit) {
		t.Fatal(err)
	}
	c := sim.NewCounters(false)
	tb.LateInit(c)
	x, err := tb.Index()
	if err != nil || x.Bytes() != int64(8*len(k.StaticCallSites)) || x.Len() != len(k.StaticCallSites) {
		t.Fatal(x, err)
	}
	for i := 1; i < x.Len(); i++ {
		if x.Addr(i) <= x.Addr(i-1) {
			t.Fatal("index not in address order")
		}
	}
	if c.Total(OpIndexFill) != uint64(x.Len()) {
		t.Error("fill not counted")
	}
	off, _ := New(k, 0, nil, nil)
	off.LateInit(nil)
	if _, err := off.Index(); !errors.Is(err, ErrIndexOff) {
		t.Fatal(err)
	}
	f, _ := sim.ParseFaults("static_call.index.alloc")
	fl, _ := New(k, idx, f, nil)
	fl.LateInit(nil)
	if _, err := fl.Index(); !errors.Is(err, ErrIndexAlloc) {
		t.Fatal(err)
	}
	o4, _ := New(k, idx, nil, nil)
	if err := o4.SetIndexEntryBytes(IndexOffset); err != nil {
		t.Fatal(err)
	}
	o4.LateInit(nil)
	if x, _ := o4.Index(); x.Bytes() != int64(4*len(k.StaticCallSites)) {
		t.Error("4-byte layout")
	}

	bad := *k
	bad.StaticCallSites = append([]image.StaticCallSite(nil), k.StaticCallSites...)
	n := len(bad.StaticCallSites)
	bad.StaticCallSites[0], bad.StaticCallSites[n-1] = bad.StaticCallSites[n-1], bad.StaticCallSites[0]
	b1, _ := New(&bad, idx, nil, nil)
	if err := b1.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("unsorted: %v", err)
	}
	ov := *k
	s0 := k.StaticCallSites[0]
	s0.Addr += 2
	ov.StaticCallSites = append([]image.StaticCallSite{k.StaticCallSites[0], s0}, k.StaticCallSites[1:]...)
	b2, _ := New(&ov, idx, nil, nil)
	if err := b2.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("overlap: %v", err)
	}
	if _, err := New(nil, 0, nil, nil); err == nil {
		t.Fatal("nil image")
	}
}

func benchCheck(b *testing.B, sw sim.Switches) {
	k := defaultImage(b)
	fs := k.Functions()
	tb, _ := New(k, sw, nil, nil)
	tb.LateInit(nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := fs[(i*977)%len(fs)].Addr
		tb.TextReserved(nil, a, a)
	}
}

// One static_call_text_reserved check on the default image.
func BenchmarkTextReservedLinear(b *testing.B) { benchCheck(b, 0) }
func BenchmarkTextReservedIndexed(b *testing.B) {
	benchCheck(b, sim.Switches(0).With(sim.StaticCallIndex))
}

// Building the P1 index.
func BenchmarkLateInitIndex(b *testing.B) {
	k := defaultImage(b)
	for i := 0; i < b.N; i++ {
		tb, _ := New(k, sim.Switches(0).With(sim.StaticCallIndex), nil, nil)
		tb.LateInit(nil)
	}
}
