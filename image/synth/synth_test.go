package synth

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

var (
	defOnce  sync.Once
	defK     *image.Kernel
	defTruth *Truth
	defErr   error
)

// defaultImage generates the default image once per test binary.
func defaultImage(t testing.TB) (*image.Kernel, *Truth) {
	defOnce.Do(func() { defK, defTruth, defErr = Generate(DefaultConfig()) })
	if defErr != nil {
		t.Fatal(defErr)
	}
	return defK, defTruth
}

// digest hashes every byte and table entry of an image.
func digest(k *image.Kernel) [32]byte {
	h := sha256.New()
	w := func(v ...any) {
		for _, x := range v {
			switch x := x.(type) {
			case string:
				h.Write([]byte(x))
				h.Write([]byte{0})
			case bool:
				if x {
					h.Write([]byte{1})
				} else {
					h.Write([]byte{0})
				}
			default:
				binary.Write(h, binary.LittleEndian, x)
			}
		}
	}
	// The tables vmlinux and a module both have.
	tables := func(syms []image.Symbol, jumps []image.JumpEntry, scs []image.StaticCallSite, bugs []image.BugEntry) {
		for _, s := range syms {
			w(s.Name, s.Addr, s.Size, uint8(s.Type))
		}
		for _, j := range jumps {
			w(j.Code, j.Target, j.Key, j.Branch, j.Init)
		}
		for _, s := range scs {
			w(s.Addr, s.Key, s.Tail, s.Init)
		}
		for _, b := range bugs {
			w(b.Addr, b.File, b.Line, b.Flags)
		}
	}
	regs := append([]*image.Region{}, k.Regions...)
	for _, m := range k.Modules {
		w(m.Name, uint8(m.State))
		regs = append(regs, m.Text)
		if m.Init != nil {
			regs = append(regs, m.Init)
		}
		tables(m.Symbols, m.JumpEntries, m.StaticCallSites, m.BugEntries)
		w(m.Blacklist, m.McountLocs)
	}
	for _, r := range regs {
		w(r.Name, r.Start)
		h.Write(r.Bytes)
	}
	tables(k.Symbols, k.JumpEntries, k.StaticCallSites, k.BugEntries)
	for _, e := range k.ExTable {
		w(e.Insn, e.Fixup)
	}
	for _, r := range k.Ranges {
		w(r.Name, r.Start, r.End)
	}
	w(k.Blacklist, k.McountLocs)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func TestDeterministic(t *testing.T) {
	k1, _ := defaultImage(t)
	k2, _, err := Generate(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if digest(k1) != digest(k2) {
		t.Fatal("the same seed gave different images")
	}
	cfg := DefaultConfig()
	cfg.Seed = 2
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.BugEntries, cfg.StaticCallSites = 3000, 1000, 300, 500, 200
	k3, _, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if digest(k3) == digest(k1) {
		t.Fatal("a different seed and shape gave the same image")
	}
}

func TestDefaultShape(t *testing.T) {
	k, truth := defaultImage(t)
	cfg := DefaultConfig()
	s := k.Summarize()
	if s.Functions < cfg.Functions+cfg.InitFunctions {
		t.Errorf("functions = %d, want at least %d", s.Functions, cfg.Functions+cfg.InitFunctions)
	}
	checks := []struct {
		name      string
		got, want int
	}{
		{"jump entries", s.JumpEntries, cfg.JumpEntries},
		{"static-call sites", s.StaticCallSites, cfg.StaticCallSites},
		{"bug entries", s.BugEntries, cfg.BugEntries},
		{"blacklist", s.BlacklistEntries, cfg.Blacklist},
		{"modules", s.Modules, cfg.Modules},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	// A realistic size spread: small functions dominate, a long tail.
	var sizes []int
	for _, f := range truth.Funcs {
		if f.Zone == ZoneMain {
			sizes = append(sizes, int(f.Size))
		}
	}
	sort.Ints(sizes)
	med, p99, max := sizes[len(sizes)/2], sizes[len(sizes)*99/100], sizes[len(sizes)-1]
	if med > 200 || p99 < 4*med || max < 20*med {
		t.Errorf("size spread median %d p99 %d max %d is not kernel-like", med, p99, max)
	}
	// Every blacklist range and kind of site is present.
	for _, name := range image.BlacklistRangeNames {
		if _, ok := k.Range(name); !ok {
			t.Errorf("range %s missing", name)
		}
	}
	var kinds [4]int
	for _, j := range k.JumpEntries {
		b := k.Text(j.Code, 5)
		switch {
		case b[0] == 0x66:
			kinds[0]++
		case b[0] == 0x0f:
			kinds[1]++
		case b[0] == 0xeb:
			kinds[2]++
		case b[0] == 0xe9:
			kinds[3]++
		}
	}
	for i, n := range kinds {
		if n == 0 {
			t.Errorf("no %s jump-label site", jumpKindNames[i])
		}
	}
	var loops, init int
	for _, f := range truth.Funcs {
		if f.LoopToEntry {
			loops++
		}
	}
	for _, j := range k.JumpEntries {
		if j.Init {
			init++
		}
	}
	if loops == 0 || init == 0 || len(k.ExTable) == 0 {
		t.Errorf("loops-to-entry %d, init jump sites %d, extable %d: each must be present", loops, init, len(k.ExTable))
	}
}

// TestRoundTrip: decoding recovers exactly the instruction boundaries the
// generator emitted, for every function of the default image.
func TestRoundTrip(t *testing.T) {
	k, truth := defaultImage(t)
	cfg := DefaultConfig()
	cfg.ProbeTargets = 200
	k2, truth2, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	check := func(k *image.Kernel, truth *Truth) {
		for _, f := range truth.Funcs {
			code := k.Text(f.Addr, int(f.Size))
			if len(code) != int(f.Size) {
				t.Fatalf("%s: text has %d bytes, want %d", f.Name, len(code), f.Size)
			}
			i := 0
			for off := 0; off < len(code); i++ {
				if i >= len(f.Insns) || int(f.Insns[i]) != off {
					if bad++; bad < 10 {
						t.Errorf("%s: decoder boundary %d, generator's %v", f.Name, off, f.Insns[min(i, len(f.Insns)-1)])
					}
					break
				}
				insn, err := x86.Decode(nil, code[off:])
				if err != nil {
					if bad++; bad < 10 {
						t.Errorf("%s+%#x: % x: %v", f.Name, off, code[off:min(off+15, len(code))], err)
					}
					break
				}
				off += insn.Len
			}
			if i != len(f.Insns) {
				if bad++; bad < 10 {
					t.Errorf("%s: decoded %d instructions, generator emitted %d", f.Name, i, len(f.Insns))
				}
			}
		}
	}
	check(k, truth)
	// The probe targets appended to a second image (the rest of it is the
	// default image again, already checked).
	targets := &Truth{}
	for _, f := range truth2.Funcs {
		if f.Zone == ZoneProbeTarget {
			targets.Funcs = append(targets.Funcs, f)
		}
	}
	if len(targets.Funcs) != cfg.ProbeTargets {
		t.Fatalf("%d probe targets in the truth, want %d", len(targets.Funcs), cfg.ProbeTargets)
	}
	// Placed in link order inside .text (ProbeTargetsAt), not after it.
	if err := k2.Validate(); err != nil {
		t.Fatal(err)
	}
	core := k2.CoreText()
	frac := float64(targets.Funcs[0].Addr-core.Start) / float64(len(core.Bytes))
	if frac < cfg.ProbeTargetsAt/2 || frac > cfg.ProbeTargetsAt*2 {
		t.Errorf("first target at %.2f of .text, want about %.2f", frac, cfg.ProbeTargetsAt)
	}
	check(k2, targets)
	if bad > 0 {
		t.Fatalf("%d functions disagree", bad)
	}
}

// TestSitesDecodeAsClaimed: every table entry points at an instruction
// boundary holding what the table says.
func TestSitesDecodeAsClaimed(t *testing.T) {
	k, truth := defaultImage(t)
	bound := map[uint64]bool{}
	for _, f := range truth.Funcs {
		for _, o := range f.Insns {
			bound[f.Addr+uint64(o)] = true
		}
	}
	byAddr := map[uint64]string{}
	keyName := map[uint64]string{}
	all := append([]image.Symbol{}, k.Symbols...)
	for _, m := range k.Modules {
		all = append(all, m.Symbols...)
	}
	for _, s := range all {
		if s.IsText() && s.Size > 0 {
			byAddr[s.Addr] = s.Name
		}
		keyName[s.Addr] = s.Name
	}
	fentry := k.SymbolsByName("__fentry__")[0].Addr

	jumps := append([]image.JumpEntry{}, k.JumpEntries...)
	statics := append([]image.StaticCallSite{}, k.StaticCallSites...)
	bugs := append([]image.BugEntry{}, k.BugEntries...)
	mcount := append([]uint64{}, k.McountLocs...)
	for _, m := range k.Modules {
		jumps = append(jumps, m.JumpEntries...)
		statics = append(statics, m.StaticCallSites...)
		bugs = append(bugs, m.BugEntries...)
		mcount = append(mcount, m.McountLocs...)
	}
	for _, j := range jumps {
		code := k.Text(j.Code, 15)
		if !bound[j.Code] {
			t.Fatalf("jump entry %#x is not an instruction boundary", j.Code)
		}
		n, err := x86.JumpEntrySize(nil, code)
		nd, errd := x86.JumpEntrySizeDecode(nil, code)
		if err != nil || errd != nil || n != nd {
			t.Fatalf("jump entry %#x: opcode size %d (%v), decoded %d (%v)", j.Code, n, err, nd, errd)
		}
		insn, _ := x86.Decode(nil, code)
		if insn.Kind == x86.KindJmp && insn.Target(j.Code) != j.Target {
			t.Fatalf("jump entry %#x jumps to %#x, table says %#x", j.Code, insn.Target(j.Code), j.Target)
		}
		if !bound[j.Target] {
			t.Fatalf("jump entry %#x targets %#x, not an instruction boundary", j.Code, j.Target)
		}
	}
	for _, s := range statics {
		insn, err := x86.Decode(nil, k.Text(s.Addr, 15))
		want := x86.KindCall
		if s.Tail {
			want = x86.KindJmp
		}
		if err != nil || insn.Kind != want || insn.Len != 5 || !bound[s.Addr] {
			t.Fatalf("static-call site %#x: %v kind %v len %d", s.Addr, err, insn.Kind, insn.Len)
		}
		tramp, key := byAddr[insn.Target(s.Addr)], keyName[s.Key]
		if !strings.HasPrefix(tramp, "__SCT__") || "__SCK__"+strings.TrimPrefix(tramp, "__SCT__") != key {
			t.Fatalf("static-call site %#x calls %q, its key is %q", s.Addr, tramp, key)
		}
	}
	for _, b := range bugs {
		insn, err := x86.Decode(nil, k.Text(b.Addr, 15))
		if err != nil || insn.Kind != x86.KindUD || insn.Len != 2 || !bound[b.Addr] {
			t.Fatalf("bug entry %#x is not a ud2 at a boundary (%v)", b.Addr, err)
		}
	}
	for _, a := range mcount {
		insn, err := x86.Decode(nil, k.Text(a, 15))
		if err != nil || insn.Kind != x86.KindCall || insn.Target(a) != fentry || !bound[a] {
			t.Fatalf("mcount location %#x is not a call to __fentry__", a)
		}
	}
	for _, e := range k.ExTable {
		if !bound[e.Insn] || !bound[e.Fixup] {
			t.Fatalf("exception entry %#x -> %#x not at boundaries", e.Insn, e.Fixup)
		}
	}
	for _, a := range k.Blacklist {
		if _, ok := byAddr[a]; !ok {
			t.Fatalf("blacklist entry %#x is not a function start", a)
		}
	}
}

func TestBadConfig(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		flag string
	}{
		{"negative count", func(c *Config) { c.JumpEntries = -1 }, "jump-entries"},
		{"no functions", func(c *Config) { c.Functions = 0 }, "functions"},
		{"too many sites", func(c *Config) { c.Functions = 600; c.JumpEntries = 100000 }, "jump-entries"},
		{"too many bug sites", func(c *Config) { c.Functions = 600; c.JumpEntries = 0; c.JumpKeys = 0; c.BugEntries = 100000 }, "bug-entries"},
		{"keys without sites", func(c *Config) { c.JumpEntries = 10; c.JumpKeys = 100000 }, "jump-keys"},
		{"percent", func(c *Config) { c.TracedPercent = 101 }, "traced-percent"},
		{"blacklist", func(c *Config) { c.Functions = 600; c.Blacklist = 5000 }, "blacklist"},
		{"sizes", func(c *Config) { c.MinSize = 8 }, "min-size"},
		{"nan sigma", func(c *Config) { c.SizeSigma = math.NaN() }, "size-sigma"},
		{"nan percent", func(c *Config) { c.TracedPercent = math.NaN() }, "traced-percent"},
		{"module sites", func(c *Config) { c.ModuleFunctions = 2; c.ModuleJumpEntries = 5000 }, "module-jump-entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Functions = 2000
			cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 500, 100, 100, 300, 50
			tc.mod(&cfg)
			_, _, err := Generate(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Flag != tc.flag {
				t.Fatalf("err = %v, want a ConfigError naming --%s", err, tc.flag)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
	for _, bad := range []string{"nop3=5", "nop2", "nop2=-1", "nop2=NaN", "nop5=Inf"} {
		if _, err := ParseJumpMix(bad); err == nil {
			t.Errorf("ParseJumpMix(%q) accepted", bad)
		}
	}
}

func TestAddProbeTargets(t *testing.T) {
	for _, tc := range []struct{ ibt, traced, patched bool }{{true, false, true}, {true, true, true}, {false, false, false}} {
		t.Run(fmt.Sprintf("ibt=%v,traced=%v,patched=%v", tc.ibt, tc.traced, tc.patched), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 2000, 300, 100, 50, 200, 50
			cfg.IBT, cfg.ReturnsPatched = tc.ibt, tc.patched
			k, truth, err := Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := len(k.McountLocs)
			syms, err := AddProbeTargets(k, truth, 1000, tc.traced, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Validate(); err != nil {
				t.Fatal(err)
			}
			etext := k.SymbolsByName("_etext")[0].Addr
			if last := syms[len(syms)-1]; etext < last.Addr+last.Size || k.CoreText().End() < last.Addr+last.Size {
				t.Errorf("_etext %#x / core end %#x do not cover the last target", etext, k.CoreText().End())
			}
			if got := len(k.McountLocs) - before; (got == 1000) != tc.traced {
				t.Errorf("traced=%v added %d mcount locations", tc.traced, got)
			}
			if f := k.LookupFunction(syms[10].Addr + 3); f == nil || f.Name != ProbeTargetName(10) {
				t.Errorf("LookupFunction inside target 10 = %v", f)
			}
			if _, err := AddProbeTargets(k, truth, 10, false, 1); err == nil {
				t.Error("adding the targets twice was accepted")
			}
		})
	}
}

func TestKernelSortSorts(t *testing.T) {
	for n := 0; n < 200; n++ {
		keys := make([]int, n)
		for i := range keys {
			keys[i] = (i * 7919) % 13
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		lib.KernelSort(n, func(a, b int) int { return keys[a] - keys[b] }, func(a, b int) {
			keys[a], keys[b] = keys[b], keys[a]
			idx[a], idx[b] = idx[b], idx[a]
		})
		if !sort.IntsAreSorted(keys) {
			t.Fatalf("n=%d: not sorted: %v", n, keys)
		}
		seen := map[int]bool{}
		for _, i := range idx {
			seen[i] = true
		}
		if len(seen) != n {
			t.Fatalf("n=%d: not a permutation", n)
		}
	}
}

func BenchmarkGenerateDefault(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, _, err := Generate(DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDefaultText(b *testing.B) { benchDecodeText(b, x86.Decode) }

// BenchmarkDecodeKernelDefaultText: the kernel decoder model alone, as the
// kprobes paths use it.
func BenchmarkDecodeKernelDefaultText(b *testing.B) { benchDecodeText(b, x86.DecodeKernel) }

func benchDecodeText(b *testing.B, decode func(*sim.Counters, []byte) (x86.Insn, error)) {
	k, truth := defaultImage(b)
	b.ResetTimer()
	var n int
	for i := 0; i < b.N; i++ {
		n = 0
		for _, f := range truth.Funcs {
			code := k.Text(f.Addr, int(f.Size))
			for off := 0; off < len(code); n++ {
				insn, err := decode(nil, code[off:])
				if err != nil {
					b.Fatal(err)
				}
				off += insn.Len
			}
		}
	}
	b.ReportMetric(float64(n), "insns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/insn")
}

func ExampleGenerate() {
	cfg := DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules = 1000, 0, 0
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 200, 50, 40, 100, 20
	cfg.ProbeTargets = 10
	k, _, err := Generate(cfg)
	if err != nil {
		panic(err)
	}
	s := k.Summarize()
	fmt.Println(s.JumpEntries, s.StaticCallSites, s.BugEntries, s.BlacklistEntries)
	fmt.Println(k.SymbolsByName(ProbeTargetName(9))[0].Size)
	// Output:
	// 200 40 100 20
	// 20
}

// TestDecodeKernelAgrees: the kernel-only decoder the kprobes paths use
// gives the same length and fields as the full decoder on generated text
// (every 5th function of the default image).
func TestDecodeKernelAgrees(t *testing.T) {
	k, truth := defaultImage(t)
	for fi, f := range truth.Funcs {
		if fi%5 != 0 {
			continue
		}
		code := k.Text(f.Addr, int(f.Size))
		for _, o := range f.Insns {
			full, err1 := x86.Decode(nil, code[o:])
			kern, err2 := x86.DecodeKernel(nil, code[o:])
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("%s+%d: Decode err %v, DecodeKernel err %v", f.Name, o, err1, err2)
			}
			full.Op, full.Mnemonic = 0, ""
			if full.Kind == x86.KindNop {
				full.Kind = kern.Kind // NOP naming needs x86asm
			}
			if full != kern {
				t.Fatalf("%s+%d: Decode %+v, DecodeKernel %+v", f.Name, o, full, kern)
			}
		}
	}
}

func FuzzParseJumpMix(f *testing.F) {
	f.Add("nop2=35,nop5=40,jmp8=10,jmp32=15")
	f.Add("nop5=1")
	f.Add("nop2=-1")
	f.Add("nop2=NaN")
	f.Add("jmp8=+Inf")
	f.Fuzz(func(t *testing.T, s string) {
		mix, err := ParseJumpMix(s)
		if err != nil {
			return
		}
		for _, v := range mix {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%q: accepted share %v", s, v)
			}
		}
		if back, err := ParseJumpMix(FormatJumpMix(mix)); err != nil || back != mix {
			t.Fatalf("%q: %v does not round-trip (%v)", s, mix, err)
		}
	})
}
