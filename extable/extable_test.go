package extable

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

var defaultImage = fixture.DefaultImage

func newDefault(t testing.TB) *Extable {
	e, err := New(defaultImage(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSearch(t *testing.T) {
	k := defaultImage(t)
	e := newDefault(t)
	core := e.Core()
	m := k.Modules[0]
	mt := e.ModuleTable(m.Name)
	if len(core) == 0 || len(mt) == 0 {
		t.Fatal("image needs core and module exception entries")
	}
	logE := uint64(bits.Len(uint(len(core))))
	logM := uint64(bits.Len(uint(len(mt))))
	cases := []struct {
		name              string
		addr              uint64
		hit               bool
		coreMax, modProbe uint64 // bsearch steps: core at most, module at most
		modLookup, bpf    uint64
	}{
		{"first core entry", core[0].Insn, true, logE, 0, 0, 0},
		{"last core entry", core[len(core)-1].Insn, true, logE, 0, 0, 0},
		{"core miss (entry+1)", core[0].Insn + 1, false, logE, 0, 0, 1},
		{"module entry", mt[0].Insn, true, logE, logM, 1, 0},
		{"module miss", mt[0].Insn + 1, false, logE, logM, 1, 1},
		{"below every module: no mod_tree walk", 0x1000, false, logE, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sim.NewCounters(false)
			got := e.Search(c, tc.addr)
			if (got != nil) != tc.hit || (got != nil && got.Insn != tc.addr) {
				t.Fatalf("Search(%#x) = %v, want hit=%v", tc.addr, got, tc.hit)
			}
			if n := c.Total(OpProbe); n > tc.coreMax+tc.modProbe || n == 0 {
				t.Fatalf("%d bsearch steps, want 1..%d", n, tc.coreMax+tc.modProbe)
			}
			if n := c.Total(kallsyms.OpModLookup); n != tc.modLookup {
				t.Fatalf("%d __module_address lookups, want %d", n, tc.modLookup)
			}
			if n := c.Total(OpBPFCheck); n != tc.bpf {
				t.Fatalf("%d BPF checks, want %d", n, tc.bpf)
			}
		})
	}
}

// TestProbeCountsMatchBsearch: a miss costs exactly the steps of
// lib/bsearch.c on a table of that size: between floor(log2 E) and
// floor(log2 E)+1.
func TestProbeCountsMatchBsearch(t *testing.T) {
	e := newDefault(t)
	n := len(e.Core())
	c := sim.NewCounters(false)
	e.SearchKernel(c, e.Core()[n/3].Insn+1)
	if got, lg := c.Total(OpProbe), uint64(bits.Len(uint(n))); got < lg-1 || got > lg {
		t.Fatalf("miss over %d entries: %d steps, want %d or %d", n, got, lg-1, lg)
	}
}

func TestSearchProperty(t *testing.T) {
	k := defaultImage(t)
	e := newDefault(t)
	all := map[uint64]bool{}
	for _, x := range e.Core() {
		all[x.Insn] = true
	}
	for _, m := range k.Modules {
		for _, x := range e.ModuleTable(m.Name) {
			all[x.Insn] = true
		}
	}
	var insns []uint64
	for a := range all {
		insns = append(insns, a)
	}
	rapid.Check(t, func(rt *rapid.T) {
		a := rapid.SampledFrom(insns).Draw(rt, "insn") + uint64(rapid.IntRange(-3, 3).Draw(rt, "d"))
		got := e.Search(nil, a)
		if (got != nil) != all[a] {
			rt.Fatalf("Search(%#x) hit=%v, oracle %v", a, got != nil, all[a])
		}
	})
}

// TestTrimInit: once a module's init is done, its init-text entries at
// the ends of the sorted table are no longer found.
func TestTrimInit(t *testing.T) {
	k := defaultImage(t)
	for _, m := range k.Modules {
		if m.Init == nil {
			continue
		}
		var initInsn uint64
		for _, x := range m.ExTable {
			if m.Init.Contains(x.Insn) {
				initInsn = x.Insn
			}
		}
		if initInsn == 0 {
			continue
		}
		e := newDefault(t)
		if e.Search(nil, initInsn) == nil {
			t.Fatal("init entry not found before trim_init_extable")
		}
		e.FreeModuleInit(m, m.Init)
		if e.Search(nil, initInsn) != nil {
			t.Fatal("init entry found after trim_init_extable")
		}
		return
	}
	t.Skip("no module exception entry in init text")
}

func TestSortsUnsortedCore(t *testing.T) {
	k := &image.Kernel{ExTable: []image.ExEntry{{Insn: 30}, {Insn: 10}, {Insn: 20}}}
	e, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []uint64{10, 20, 30} {
		if e.Search(nil, a) == nil {
			t.Fatalf("%d not found after sort_main_extable", a)
		}
	}
	if e.Bytes() != 3*EntryBytes {
		t.Fatalf("bytes %d", e.Bytes())
	}
}

func ExampleExtable_Search() {
	k := &image.Kernel{ExTable: []image.ExEntry{{Insn: 0xffffffff81000010, Fixup: 0xffffffff81000100}}}
	e, _ := New(k)
	c := sim.NewCounters(false)
	x := e.Search(c, 0xffffffff81000010)
	fmt.Printf("fixup %#x, steps %d\n", x.Fixup, c.Total(OpProbe))
	e.Search(c, 0xffffffff81000011)
	fmt.Println("bpf checks:", c.Total(OpBPFCheck))
	// Output:
	// fixup 0xffffffff81000100, steps 1
	// bpf checks: 1
}

func BenchmarkSearch(b *testing.B) {
	e := newDefault(b)
	core := e.Core()
	c := sim.NewCounters(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Search(c, core[i%len(core)].Insn+uint64(i&1))
	}
}
