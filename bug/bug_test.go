package bug

import (
	"errors"
	"math/bits"
	"sync"
	"testing"

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
	c.StaticCallSites, c.StaticCallKeys = 200, 20
	c.BugEntries, c.Blacklist = 600, 30
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 5, 3, 20, 3
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 3, 60, 4
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 40, 6, 15
	k, _, err := synth.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func forms(t testing.TB, k *image.Kernel) []*Table {
	idx := sim.Switches(0).With(sim.BugIndex)
	f, _ := sim.ParseFaults("bug.index.alloc")
	var out []*Table
	for _, c := range []struct {
		sw   sim.Switches
		f    *sim.Faults
		late bool
	}{{0, nil, true}, {idx, nil, true}, {idx, f, true}, {idx, nil, false}} {
		tb, err := New(k, c.sw, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if c.late {
			if err := tb.LateInit(nil); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, tb)
	}
	return out
}

// oracle: the first entry in find_bug's order (core, then modules newest first).
func oracle(k *image.Kernel, addr uint64) *image.BugEntry {
	for i := range k.BugEntries {
		if k.BugEntries[i].Addr == addr {
			return &k.BugEntries[i]
		}
	}
	for m := len(k.Modules) - 1; m >= 0; m-- {
		for i := range k.Modules[m].BugEntries {
			if k.Modules[m].BugEntries[i].Addr == addr {
				return &k.Modules[m].BugEntries[i]
			}
		}
	}
	return nil
}

func addrs(k *image.Kernel, every int) []uint64 {
	var out []uint64
	for i, b := range k.BugEntries {
		if i%every == 0 {
			out = append(out, b.Addr, b.Addr-1, b.Addr+1, b.Addr+2)
		}
	}
	for _, m := range k.Modules {
		for _, b := range m.BugEntries {
			out = append(out, b.Addr, b.Addr+1)
		}
	}
	for i, f := range k.Functions() {
		if i%every == 0 {
			out = append(out, f.Addr)
		}
	}
	return out
}

func TestEquivalence(t *testing.T) {
	every := 3
	if raceEnabled {
		every = 60
	}
	for _, k := range []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)} {
		tbs := forms(t, k)
		for _, a := range addrs(k, every) {
			want := oracle(k, a)
			for i, tb := range tbs {
				if got := tb.FindBug(nil, a); got != want {
					t.Fatalf("form %d at %#x: got %v, want %v", i, a, got, want)
				}
			}
		}
	}
}

func TestEquivalenceRapid(t *testing.T) {
	k := smallImage(t, 3)
	tbs := forms(t, k)
	rapid.Check(t, func(rt *rapid.T) {
		b := k.BugEntries[rapid.IntRange(0, len(k.BugEntries)-1).Draw(rt, "bug")]
		a := b.Addr + uint64(rapid.IntRange(-3, 3).Draw(rt, "off"))
		want := oracle(k, a)
		for i, tb := range tbs {
			if got := tb.FindBug(nil, a); got != want {
				rt.Fatalf("form %d at %#x", i, a)
			}
		}
	})
}

// TestCounts: a miss walks the whole core table, every module and every
// module entry; the indexed form makes about log2(B)+1 probes instead.
func TestCounts(t *testing.T) {
	k := defaultImage(t)
	B := len(k.BugEntries)
	var modB int
	for _, m := range k.Modules {
		modB += len(m.BugEntries)
	}
	addr := k.Functions()[500].Addr
	if oracle(k, addr) != nil {
		t.Fatal("function entry is a bug address")
	}
	tbs := forms(t, k)
	c := sim.NewCounters(false)
	tbs[0].FindBug(c, addr)
	if n := c.Total(OpScanEntry); n != uint64(B+modB) {
		t.Errorf("linear: %d entries, want %d core + %d module", n, B, modB)
	}
	if n := c.Total(OpModuleVisit); n != uint64(len(k.Modules)) {
		t.Errorf("linear: %d modules visited, want %d", n, len(k.Modules))
	}
	c = sim.NewCounters(false)
	tbs[1].FindBug(c, addr)
	if n, max := c.Total(OpIndexProbe), uint64(bits.Len(uint(B))); n > max || n+1 < max {
		t.Errorf("indexed: %d probes, want about %d", n, max)
	}
	if n := c.Total(OpScanEntry); n != uint64(modB) {
		t.Errorf("indexed: %d entries scanned, want the %d module entries", n, modB)
	}
	// Newest module first: an entry of the newest module costs only its own scan.
	newest := k.Modules[len(k.Modules)-1]
	c = sim.NewCounters(false)
	tbs[0].FindBug(c, newest.BugEntries[0].Addr)
	if n := c.Total(OpModuleVisit); n != 1 {
		t.Errorf("newest module's entry: %d modules visited, want 1", n)
	}
}

func TestIndexAndErrors(t *testing.T) {
	k := smallImage(t, 4)
	idx := sim.Switches(0).With(sim.BugIndex)
	tb, _ := New(k, idx, nil)
	if _, err := tb.Index(); !errors.Is(err, ErrNotLateInit) {
		t.Fatal(err)
	}
	c := sim.NewCounters(false)
	tb.LateInit(c)
	x, err := tb.Index()
	if err != nil || x.Len() != len(k.BugEntries) || x.Bytes() != int64(8*x.Len()) || x.EntryBytes() != 8 {
		t.Fatal(x, err)
	}
	off, _ := New(k, 0, nil)
	off.LateInit(nil)
	if _, err := off.Index(); !errors.Is(err, ErrIndexOff) {
		t.Fatal(err)
	}
	f, _ := sim.ParseFaults("bug.index.alloc")
	fl, _ := New(k, idx, f)
	fl.LateInit(nil)
	if _, err := fl.Index(); !errors.Is(err, ErrIndexAlloc) || fl.Indexed() {
		t.Fatal(err)
	}
	dup := *k
	dup.BugEntries = append(append([]image.BugEntry(nil), k.BugEntries...), k.BugEntries[3])
	d, _ := New(&dup, idx, nil)
	if err := d.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("duplicate: %v", err)
	}
	if got := d.FindBug(nil, k.BugEntries[3].Addr); got == nil {
		t.Fatal("linear fallback after failed build")
	}
	if err := d.SetIndexEntryBytes(4); err == nil {
		t.Fatal("layout after late init")
	}
	if EntryBytes(image.Config{BugVerbose: true}) != 12 || EntryBytes(image.Config{}) != 8 {
		t.Fatal("entry size")
	}
	if _, err := New(nil, 0, nil); err == nil {
		t.Fatal("nil image")
	}
}

func benchFind(b *testing.B, sw sim.Switches) {
	k := defaultImage(b)
	fs := k.Functions()
	tb, _ := New(k, sw, nil)
	tb.LateInit(nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb.FindBug(nil, fs[(i*977)%len(fs)].Addr)
	}
}

// One find_bug miss on the default image.
func BenchmarkFindBugLinear(b *testing.B)  { benchFind(b, 0) }
func BenchmarkFindBugIndexed(b *testing.B) { benchFind(b, sim.Switches(0).With(sim.BugIndex)) }

// Building the bug index.
func BenchmarkLateInitIndex(b *testing.B) {
	k := defaultImage(b)
	for i := 0; i < b.N; i++ {
		tb, _ := New(k, sim.Switches(0).With(sim.BugIndex), nil)
		tb.LateInit(nil)
	}
}
