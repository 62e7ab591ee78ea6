package blacklist

import (
	"errors"
	"github.com/kpsim/kpsim/kallsyms"
	"math/bits"
	"strings"
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
	c.BugEntries, c.Blacklist = 600, 40
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 5, 3, 20, 3
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 2, 60, 4
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 40, 6, 10
	c.ClonePercent = 10
	k, _, err := synth.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type fataler interface {
	Fatalf(format string, args ...any)
}

var formNames = []string{"linear", "indexed", "indexed-allocfail", "indexed-before-lateinit"}

func forms(t fataler, k *image.Kernel) []*List {
	idx := sim.Switches(0).With(sim.BlacklistIndex)
	f, _ := sim.ParseFaults("kprobe_blacklist.index.alloc")
	ks := kallsyms.NewSorted(k)
	var out []*List
	for i, c := range []struct {
		sw   sim.Switches
		f    *sim.Faults
		late bool
	}{{0, nil, true}, {idx, nil, true}, {idx, f, true}, {idx, nil, false}} {
		l, err := New(nil, k, c.sw, c.f, ks)
		if err != nil || l.PopulateError() != nil {
			t.Fatalf("form %d: %v %v", i, err, l.PopulateError())
		}
		if c.late {
			if err := l.LateInit(nil); err != nil {
				t.Fatalf("%v", err)
			}
		}
		out = append(out, l)
	}
	return out
}

// oracle: within_kprobe_blacklist from the list contents and symbol names,
// without walks or indexes.
func oracle(l *List, addr uint64) bool {
	in := func(a uint64) bool {
		if l.haveKprobes && l.kprobesText.Contains(a) {
			return true
		}
		for _, e := range l.entries {
			if a >= e.Start && a < e.End {
				return true
			}
		}
		return false
	}
	if in(addr) {
		return true
	}
	name, ok := l.syms.LookupSymbolName(nil, addr)
	if !ok || !strings.Contains(name, ".") {
		return false
	}
	base, ok := l.syms.LookupName(nil, name[:strings.IndexByte(name, '.')])
	return ok && in(base)
}

func queries(k *image.Kernel, l *List, every int) []uint64 {
	var qs []uint64
	for i, f := range k.Functions() {
		if i%every == 0 {
			qs = append(qs, f.Addr, f.Addr+4, f.Addr+f.Size-1)
		}
	}
	for i, e := range l.entries {
		if i%every == 0 || e.Module != nil {
			qs = append(qs, e.Start, e.End-1, e.End, e.Start-1)
		}
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			qs = append(qs, s.Addr, s.Addr+1)
		}
	}
	for _, r := range k.Ranges {
		qs = append(qs, r.Start, r.End-1, r.End)
	}
	return qs
}

func checkAll(t fataler, k *image.Kernel, ls []*List, qs []uint64) {
	for _, a := range qs {
		want := oracle(ls[0], a)
		for i, l := range ls {
			if got := l.WithinKprobeBlacklist(nil, a); got != want {
				t.Fatalf("%s at %#x: got %v, oracle %v", formNames[i], a, got, want)
			}
		}
	}
}

func TestEquivalence(t *testing.T) {
	every := 5
	if raceEnabled {
		every = 50
	}
	for _, k := range []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)} {
		ls := forms(t, k)
		checkAll(t, k, ls, queries(k, ls[0], every))
	}
}

func TestEquivalenceRapid(t *testing.T) {
	k := smallImage(t, 3)
	ls := forms(t, k)
	fs := k.Functions()
	rapid.Check(t, func(rt *rapid.T) {
		f := fs[rapid.IntRange(0, len(fs)-1).Draw(rt, "fn")]
		a := f.Addr + uint64(rapid.IntRange(-8, int(f.Size)+8).Draw(rt, "off"))
		checkAll(rt, k, ls, []uint64{a})
	})
}

// TestPopulate: what 6.1's populate_kprobe_blacklist adds: every
// NOKPROBE_SYMBOL, one entry per distinct symbol address in the kprobes
// text, the noinstr text and the entry text (not irqentry/softirqentry),
// then the modules' _kprobe_blacklist.
func TestPopulate(t *testing.T) {
	k := defaultImage(t)
	distinct := func(r image.Range) int {
		seen := map[uint64]bool{}
		for _, s := range k.Symbols {
			if s.Addr >= r.Start && s.Addr < r.End {
				seen[s.Addr] = true
			}
		}
		return len(seen)
	}
	want := len(k.Blacklist)
	for _, n := range []string{image.RangeKprobesText, image.RangeNoinstrText, image.RangeEntryText} {
		r, ok := k.Range(n)
		if !ok {
			t.Fatalf("default image has no %s", n)
		}
		want += distinct(r)
	}
	coreWant := want
	for _, m := range k.Modules {
		want += len(m.Blacklist)
	}
	c := sim.NewCounters(false)
	l, err := New(c, k, 0, nil, nil)
	if err != nil || l.PopulateError() != nil {
		t.Fatal(err, l.PopulateError())
	}
	if got := len(l.Entries()); got != want {
		t.Fatalf("%d entries, want %d", got, want)
	}
	if c.Total(OpPopulateEntry) != uint64(want) {
		t.Error("populate not counted per entry")
	}
	for i, e := range l.Entries() {
		if (i < coreWant) != (e.Module == nil) {
			t.Fatalf("entry %d: vmlinux entries must precede module entries", i)
		}
		if e.End <= e.Start {
			t.Fatalf("entry %d is empty", i)
		}
	}
	var bytes int64
	for _, nb := range c.Bytes() {
		if nb.Name == "kprobe_blacklist.list.bytes" {
			bytes = nb.Bytes
		}
	}
	if bytes != int64(want*EntryBytes) || l.Bytes() != bytes {
		t.Errorf("list bytes %d, want %d × %d", bytes, want, EntryBytes)
	}
	// irqentry text is not blacklisted in 6.1 (unless NOKPROBE).
	r, _ := k.Range(image.RangeIRQEntryText)
	nok := map[uint64]bool{}
	for _, a := range k.Blacklist {
		nok[a] = true
	}
	for _, s := range k.Symbols {
		if r.Contains(s.Addr) && s.IsText() && s.Size > 0 && !nok[s.Addr] && !strings.Contains(s.Name, ".") {
			if l.WithinKprobeBlacklist(nil, s.Addr) {
				t.Errorf("irqentry function %s is blacklisted", s.Name)
			}
		}
	}
}

// TestDottedName: foo.cold is refused because foo is blacklisted.
func TestDottedName(t *testing.T) {
	k := smallImage(t, 5) // private: a symbol is renamed
	var base image.Symbol
	for _, a := range k.Blacklist {
		if s := k.Symbols[k.SymbolAt(a)]; !strings.Contains(s.Name, ".") {
			base = s // the kernel cuts at the first '.', so the base must have none
			break
		}
	}
	var victim *image.Symbol
	for i := range k.Symbols {
		s := &k.Symbols[i]
		if s.IsText() && s.Size > 0 && s.Addr > base.Addr+base.Size+4096 && !strings.Contains(s.Name, ".") {
			victim = s
			break
		}
	}
	ls := forms(t, k)
	if ls[0].WithinKprobeBlacklist(nil, victim.Addr) && !nokprobe(k, victim.Addr) {
		t.Fatal("victim blacklisted before renaming")
	}
	victim.Name = base.Name + ".cold"
	ls = forms(t, k)
	for i, l := range ls {
		c := sim.NewCounters(false)
		if !l.WithinKprobeBlacklist(c, victim.Addr+1) {
			t.Fatalf("%s: %s not refused although %s is blacklisted", formNames[i], victim.Name, base.Name)
		}
		if c.Total(kallsyms.OpNameProbe) < 2 {
			t.Errorf("%s: name lookups not counted", formNames[i])
		}
	}
	checkAll(t, k, ls, []uint64{victim.Addr, victim.Addr + 1, base.Addr})
}

func nokprobe(k *image.Kernel, a uint64) bool {
	for _, b := range k.Blacklist {
		if b == a {
			return true
		}
	}
	return false
}

// TestCounts: a miss walks every node (K); the index makes about
// log2(ranges)+1 probes and walks only the module entries.
func TestCounts(t *testing.T) {
	k := defaultImage(t)
	ls := forms(t, k)
	var addr uint64
	for _, f := range k.Functions() {
		if !strings.Contains(f.Name, ".") && !oracle(ls[0], f.Addr) {
			addr = f.Addr
			break
		}
	}
	K := len(ls[0].entries)
	c := sim.NewCounters(false)
	ls[0].WithinKprobeBlacklist(c, addr)
	if n := c.Total(OpWalkEntry); n != uint64(K) {
		t.Errorf("linear: %d nodes, want K = %d", n, K)
	}
	if c.Total(OpArchCheck) != 1 || c.Total(kallsyms.OpAddrProbe) == 0 {
		t.Error("arch check / lookup_symbol_name not counted")
	}
	x, err := ls[1].Index()
	if err != nil {
		t.Fatal(err)
	}
	c = sim.NewCounters(false)
	ls[1].WithinKprobeBlacklist(c, addr)
	if n, max := c.Total(OpIndexProbe), uint64(bits.Len(uint(x.Len()))); n > max || n+1 < max {
		t.Errorf("indexed: %d probes, want about %d", n, max)
	}
	if n := c.Total(OpWalkEntry); n != uint64(K-x.Covered()) {
		t.Errorf("indexed: %d nodes walked, want the %d module entries", n, K-x.Covered())
	}
}

func TestIndexAndModules(t *testing.T) {
	k := smallImage(t, 6)
	l, _ := New(nil, k, sim.Switches(0).With(sim.BlacklistIndex), nil, nil)
	if _, err := l.Index(); !errors.Is(err, ErrNotLateInit) {
		t.Fatal(err)
	}
	c := sim.NewCounters(false)
	l.LateInit(c)
	x, err := l.Index()
	if err != nil || x.Bytes() != int64(x.Len()*IndexEntryBytes) || x.Len() == 0 || x.Len() > x.Covered() {
		t.Fatal(x, err)
	}
	off, _ := New(nil, k, 0, nil, nil)
	off.LateInit(nil)
	if _, err := off.Index(); !errors.Is(err, ErrIndexOff) {
		t.Fatal(err)
	}
	f, _ := sim.ParseFaults("kprobe_blacklist.index.alloc")
	fl, _ := New(nil, k, sim.Switches(0).With(sim.BlacklistIndex), f, nil)
	fl.LateInit(nil)
	if _, err := fl.Index(); !errors.Is(err, ErrIndexAlloc) || fl.Indexed() {
		t.Fatal(err)
	}
	// Module unload removes its entries; both forms follow.
	m := k.Modules[0]
	a := m.Blacklist[0]
	if !l.WithinKprobeBlacklist(nil, a) || !off.WithinKprobeBlacklist(nil, a) {
		t.Fatal("module NOKPROBE entry not blacklisted")
	}
	l.RemoveModule(nil, m)
	off.RemoveModule(nil, m)
	if l.WithinKprobeBlacklist(nil, a) || off.WithinKprobeBlacklist(nil, a) {
		t.Fatal("entry kept after module removal")
	}
	l.AddModule(nil, m)
	if !l.WithinKprobeBlacklist(nil, a) {
		t.Fatal("entry not back after module load")
	}
	if _, err := New(nil, nil, 0, nil, nil); err == nil {
		t.Fatal("nil image")
	}
}

func TestKallsyms(t *testing.T) {
	k := smallImage(t, 7)
	ks := kallsyms.NewSorted(k)
	fs := k.Functions()
	for _, f := range fs[100:200] {
		size, off, ok := ks.LookupSizeOffset(nil, f.Addr+1)
		if !ok || off != 1 || size < f.Size {
			t.Fatalf("%s: size %d off %d ok %v (st_size %d)", f.Name, size, off, ok, f.Size)
		}
		if n, ok := ks.LookupSymbolName(nil, f.Addr+1); !ok || n == "" {
			t.Fatalf("%s: name %q", f.Name, n)
		}
		if a, ok := ks.LookupName(nil, f.Name); !ok || a > f.Addr {
			t.Fatalf("%s: LookupName %#x %v", f.Name, a, ok)
		}
	}
	m := k.Modules[0]
	s := m.Symbols[0]
	if n, ok := ks.LookupSymbolName(nil, s.Addr); !ok || n != s.Name {
		t.Fatalf("module symbol: %q %v, want %q", n, ok, s.Name)
	}
	if a, ok := ks.LookupName(nil, s.Name); !ok || a != s.Addr {
		t.Fatalf("module name: %#x %v", a, ok)
	}
	if _, ok := ks.LookupName(nil, ""); ok {
		t.Fatal("empty name found")
	}
	if _, ok := ks.LookupName(nil, "no_such_symbol_anywhere"); ok {
		t.Fatal("unknown name found")
	}
}

func benchCheck(b *testing.B, sw sim.Switches) {
	k := defaultImage(b)
	fs := k.Functions()
	l, _ := New(nil, k, sw, nil, nil)
	l.LateInit(nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.WithinKprobeBlacklist(nil, fs[(i*977)%len(fs)].Addr)
	}
}

// One within_kprobe_blacklist check on the default image.
func BenchmarkWithinLinear(b *testing.B) { benchCheck(b, 0) }
func BenchmarkWithinIndexed(b *testing.B) {
	benchCheck(b, sim.Switches(0).With(sim.BlacklistIndex))
}

// Building the blacklist index.
func BenchmarkLateInitIndex(b *testing.B) {
	k := defaultImage(b)
	ks := kallsyms.NewSorted(k)
	for i := 0; i < b.N; i++ {
		l, _ := New(nil, k, sim.Switches(0).With(sim.BlacklistIndex), nil, ks)
		l.LateInit(nil)
	}
}
