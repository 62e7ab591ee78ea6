package blacklist

import (
	"math/bits"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

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
	ls := resvtest.Unwrapped[*List](t, check, k)
	if ls[0].WithinKprobeBlacklist(nil, victim.Addr) && !nokprobe(k, victim.Addr) {
		t.Fatal("victim blacklisted before renaming")
	}
	victim.Name = base.Name + ".cold"
	fs, ts := check.Tables(t, k)
	for i, tb := range ts {
		c := sim.NewCounters(false)
		if !resvtest.Unwrap[*List](tb).WithinKprobeBlacklist(c, victim.Addr+1) {
			t.Fatalf("%s: %s not refused although %s is blacklisted", fs[i].Name, victim.Name, base.Name)
		}
		if c.Total(kallsyms.OpNameProbe) < 2 {
			t.Errorf("%s: name lookups not counted", fs[i].Name)
		}
	}
	for _, a := range []uint64{victim.Addr, victim.Addr + 1, base.Addr} {
		check.AskAll(t, fs, ts, oracle(resvtest.Unwrap[*List](ts[0]), a), a)
	}
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
	ls := resvtest.Unwrapped[*List](t, check, k)
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
	c := sim.NewCounters(false)
	l.LateInit(c)
	x, err := l.Index()
	if err != nil || x.Bytes() != int64(x.Len()*IndexEntryBytes) || x.Len() == 0 || x.Len() > x.Covered() {
		t.Fatal(x, err)
	}
	off, _ := New(nil, k, 0, nil, nil)
	off.LateInit(nil)
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
