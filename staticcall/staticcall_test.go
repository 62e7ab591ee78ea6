package staticcall

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

func TestEquivalenceModuleStates(t *testing.T) {
	k := smallImage(t, 9) // private: module states change
	m := k.Modules[1]
	forms, tbs := check.Tables(t, k)
	for _, ms := range []image.ModuleState{image.ModuleLive, image.ModuleComing, image.ModuleGoing, image.ModuleUnformed} {
		m.State = ms
		for _, s := range m.StaticCallSites {
			check.AskAll(t, forms, tbs, oracle(k, boot.Running, s.Addr, s.Addr+1), query{St: boot.Running, Start: s.Addr, End: s.Addr + 1})
		}
	}
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
	linear, _ := New(k, 0, nil, nil)
	indexed, _ := New(k, sim.Switches(0).With(sim.StaticCallIndex), nil, nil)
	if err := indexed.LateInit(nil); err != nil {
		t.Fatal(err)
	}
	c := sim.NewCounters(false)
	linear.TextReserved(c, addr, addr)
	if n := c.Total(OpScanSite); n != uint64(S) {
		t.Errorf("linear: %d sites visited, want S = %d", n, S)
	}
	c = sim.NewCounters(false)
	indexed.TextReserved(c, addr, addr)
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
	tb, _ := New(k, 0, nil, nil)
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
