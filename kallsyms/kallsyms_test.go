package kallsyms

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

var (
	once sync.Once
	img  *image.Kernel
)

func testImage(t testing.TB) *image.Kernel {
	once.Do(func() {
		cfg := synth.DefaultConfig()
		cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 8000, 2000, 500, 400, 1000, 100
		k, _, err := synth.Generate(cfg)
		if err != nil {
			panic(err)
		}
		img = k
	})
	return img
}

// oracle: brute force over the symbol list.
func oracleSizeOffset(k *image.Kernel, addr uint64) (size, off uint64) {
	var start uint64
	for _, s := range k.Symbols {
		if s.Addr <= addr {
			start = s.Addr
		}
	}
	end := uint64(0)
	for _, s := range k.Symbols {
		if s.Addr > start {
			end = s.Addr
			break
		}
	}
	return end - start, addr - start
}

func TestLookupSizeOffsetMatchesOracle(t *testing.T) {
	k := testImage(t)
	r := NewSorted(k)
	rng := rand.New(rand.NewPCG(1, 1))
	core := k.CoreText()
	for i := 0; i < 2000; i++ {
		addr := core.Start + uint64(rng.IntN(len(core.Bytes)))
		size, off, ok := r.LookupSizeOffset(nil, addr)
		ws, wo := oracleSizeOffset(k, addr)
		if !ok || size != ws || off != wo {
			t.Fatalf("%#x: got (%d, %d, %v), want (%d, %d)", addr, size, off, ok, ws, wo)
		}
	}
}

func TestLookupNameFirstDuplicate(t *testing.T) {
	k := testImage(t)
	r := NewSorted(k)
	first := map[string]uint64{}
	for _, s := range k.Symbols {
		if _, ok := first[s.Name]; !ok {
			first[s.Name] = s.Addr
		}
	}
	dups := 0
	for name, addr := range first {
		if len(k.SymbolsByName(name)) > 1 {
			dups++
		}
		got, ok := r.LookupName(nil, name)
		if !ok || got != addr {
			t.Fatalf("LookupName(%q) = %#x, %v; want %#x", name, got, ok, addr)
		}
	}
	if dups == 0 {
		t.Fatal("the test image has no duplicate names")
	}
	if _, ok := r.LookupName(nil, ""); ok {
		t.Error("empty name found")
	}
	if _, ok := r.LookupName(nil, "no_such_symbol_anywhere"); ok {
		t.Error("unknown name found")
	}
}

func TestModules(t *testing.T) {
	k := testImage(t)
	r := NewSorted(k)
	m := k.Modules[0]
	sym := m.Symbols[len(m.Symbols)/2]
	for sym.Type != 't' && sym.Type != 'T' {
		sym = m.Symbols[0]
	}
	addr, ok := r.LookupName(nil, sym.Name)
	if !ok || addr != sym.Addr {
		t.Fatalf("module name lookup: %#x %v", addr, ok)
	}
	name, ok := r.LookupSymbolName(nil, sym.Addr+1)
	if !ok || name != sym.Name {
		t.Fatalf("LookupSymbolName in module = %q %v", name, ok)
	}
	if _, _, ok := r.LookupSizeOffset(nil, 0x1000); ok {
		t.Error("an address outside every image resolved")
	}
}

// TestCounts: a name lookup probes at most ceil(log2 N)+1 names plus its
// duplicates; an address lookup at most ceil(log2 N) table entries.
func TestCounts(t *testing.T) {
	k := testImage(t)
	r := NewSorted(k)
	n := len(r.syms)
	bound := uint64(math.Ceil(math.Log2(float64(n)))) + 1
	c := sim.NewCounters(false)
	for _, s := range k.Functions()[:500] {
		snap := c.Snapshot()
		r.LookupName(c, s.Name)
		d := c.Since(snap)
		if d[OpNameProbe] > bound+uint64(len(k.SymbolsByName(s.Name))) {
			t.Fatalf("LookupName(%q): %d probes, bound %d", s.Name, d[OpNameProbe], bound)
		}
		snap = c.Snapshot()
		r.LookupSizeOffset(c, s.Addr+1)
		d = c.Since(snap)
		if d[OpAddrProbe] > bound || d[OpAddrProbe] < bound-2 {
			t.Fatalf("LookupSizeOffset: %d bsearch steps for %d symbols", d[OpAddrProbe], n)
		}
	}
}

func ExampleSorted() {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules = 1000, 0, 0
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 100, 20, 20, 50, 10
	k, _, _ := synth.Generate(cfg)
	r := NewSorted(k)
	addr, _ := r.LookupName(nil, "kprobe_int3_handler")
	size, off, _ := r.LookupSizeOffset(nil, addr+4)
	name, _ := r.LookupSymbolName(nil, addr+4)
	fmt.Println(name, off, size == k.SymbolsByName("kprobe_int3_handler")[0].Size || size%16 == 0)
	// Output: kprobe_int3_handler 4 true
}
