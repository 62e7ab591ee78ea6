package elfload

import (
	"bytes"
	"debug/elf"
	"github.com/kpsim/kpsim/image/bzimage"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/x86"
)

// vmlinuxPath is the real Debian 6.1 vmlinux the tests use
// (KPSIM_VMLINUX overrides).
func vmlinuxPath() string {
	if p := os.Getenv("KPSIM_VMLINUX"); p != "" {
		return p
	}
	return "/work/kernels/vmlinux"
}

var debian struct {
	once   sync.Once
	data   []byte
	k      *image.Kernel
	t      *ktab.Tables
	layout *kallsymsLayout
	l      *loader
	err    error
}

// loadDebian loads the real vmlinux once per test binary, skipping when
// it is absent.
func loadDebian(tb testing.TB) (*image.Kernel, *loader) {
	tb.Helper()
	debian.once.Do(func() {
		d, err := os.ReadFile(vmlinuxPath())
		if err != nil {
			// Fall back to the pinned bzImage `make real-kernel` caches.
			b, berr := os.ReadFile("../../.cache/kernels/vmlinuz-6.1.0-57-amd64")
			if berr != nil {
				debian.err = err
				return
			}
			if d, _, err = bzimage.Decompress("vmlinuz-6.1.0-57-amd64", b); err != nil {
				debian.err = err
				return
			}
		}
		debian.data = d
		debian.k, debian.err = Load(vmlinuxPath(), d)
		if debian.err != nil {
			return
		}
		debian.l = &loader{name: vmlinuxPath(), data: d}
		debian.l.f, _ = elf.NewFile(bytes.NewReader(d))
		for _, p := range debian.l.f.Progs {
			if p.Type == elf.PT_LOAD && p.Filesz > 0 {
				debian.l.progs = append(debian.l.progs, p)
			}
		}
		debian.l.k = debian.k
		debian.l.indexSyms()
		if debian.l.f.Section(".symtab") == nil {
			debian.t, debian.layout, debian.err = readKallsyms(debian.l.f)
		}
	})
	if debian.data == nil {
		tb.Skipf("no vmlinux at %s nor a cached bzImage (run `make real-kernel` or set KPSIM_VMLINUX): %v", vmlinuxPath(), debian.err)
	}
	if debian.err != nil {
		tb.Fatal(debian.err)
	}
	return debian.k, debian.l
}

func TestDebianCounts(t *testing.T) {
	k, l := loadDebian(t)
	s := k.Summarize()
	t.Logf("%s: functions %d (init %d), symbols %d, text bytes %d (core %d, init %d), J %d, S %d, B %d, E %d, K %d, mcount %d",
		s.Name, s.Functions, s.InitFunctions, s.Symbols, s.TextBytes, s.CoreTextBytes, s.InitTextBytes,
		s.JumpEntries, s.StaticCallSites, s.BugEntries, s.ExceptionEntries, s.BlacklistEntries, s.McountLocations)
	t.Logf("config %+v", s.Config)
	for _, r := range k.Ranges {
		t.Logf("range %s [%#x, %#x) %d bytes", r.Name, r.Start, r.End, r.End-r.Start)
	}
	for _, n := range k.Notes {
		t.Logf("note: %s", n)
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, lo int) {
		if got < lo {
			t.Errorf("%s = %d, want >= %d", what, got, lo)
		}
	}
	check("functions", s.Functions, 40000)
	check("init functions", s.InitFunctions, 1000)
	check("core text MB", int(s.CoreTextBytes>>20), 10)
	check("jump entries", s.JumpEntries, 1000)
	check("static-call sites", s.StaticCallSites, 1000)
	check("bug entries", s.BugEntries, 1000)
	check("exception entries", s.ExceptionEntries, 100)
	check("blacklist entries", s.BlacklistEntries, 50)
	check("mcount locations", s.McountLocations, 10000)
	if len(k.Ranges) < 6 {
		t.Errorf("ranges: %d, want 6", len(k.Ranges))
	}
	c := s.Config
	if c.IBT || !c.Retpoline || !c.RetThunk || c.ReturnsPatched || !c.KprobesOnFtrace || c.CFI || !c.BugVerbose {
		t.Errorf("config %+v, want Debian 6.1's (no IBT, retpoline, rethunk, kprobes on ftrace, bugverbose)", c)
	}
	sizes := map[string]int{"__jump_table": JumpEntrySize, "static_call_sites": StaticCallSiteSize,
		"__bug_table": BugEntrySize, "__ex_table": ExEntrySize, "_kprobe_blacklist": PtrSize, "__mcount_loc": PtrSize}
	for _, tb := range tableBounds {
		base, b, ok, err := l.span(tb.Start, tb.Stop)
		if err != nil || !ok {
			t.Errorf("%s: bounds %s/%s not found (%v)", tb.Name, tb.Start, tb.Stop, err)
			continue
		}
		if len(b)%sizes[tb.Name] != 0 {
			t.Errorf("%s: span %d bytes not a multiple of %d", tb.Name, len(b), sizes[tb.Name])
		}
		t.Logf("%s at %#x: %d bytes, %d entries", tb.Name, base, len(b), len(b)/sizes[tb.Name])
	}
	if _, b, _, _ := l.span("__start_mcount_loc", "__stop_mcount_loc"); len(b)/8 != len(k.McountLocs) {
		t.Logf("mcount: %d raw entries, %d kept (NULLs skipped)", len(b)/8, len(k.McountLocs))
	}
}

func TestDebianJumpEntries(t *testing.T) {
	k, _ := loadDebian(t)
	counts := map[int]int{}
	initN := 0
	for i, e := range k.JumpEntries {
		code := k.Text(e.Code, 5)
		n, err := x86.JumpEntrySize(nil, code)
		if err != nil {
			t.Fatalf("jump entry %d at %#x: %v", i, e.Code, err)
		}
		m, err := x86.JumpEntrySizeDecode(nil, code)
		if err != nil || m != n {
			t.Fatalf("jump entry %d at %#x: JumpEntrySize %d, decoded %d (%v)", i, e.Code, n, m, err)
		}
		counts[int(code[0])<<8|n]++
		if e.Init {
			initN++
		}
		if e.Init != (k.RegionAt(e.Code).Kind == image.InitText) {
			t.Errorf("jump entry %d at %#x: Init %v in region %s", i, e.Code, e.Init, k.RegionAt(e.Code).Name)
		}
	}
	t.Logf("jump sites by first byte<<8|size: %x; init %d", counts, initN)
}

func TestDebianStaticCalls(t *testing.T) {
	k, _ := loadDebian(t)
	tail := 0
	for i, s := range k.StaticCallSites {
		in, err := x86.Decode(nil, k.Text(s.Addr, 15))
		if err != nil || in.Len != 5 || (in.Kind != x86.KindCall && in.Kind != x86.KindJmp) {
			t.Fatalf("static-call site %d at %#x: %v %v", i, s.Addr, in, err)
		}
		if s.Tail != (in.Kind == x86.KindJmp) {
			t.Errorf("static-call site %d at %#x: Tail %v but %s", i, s.Addr, s.Tail, in.Mnemonic)
		}
		if s.Tail {
			tail++
		}
	}
	t.Logf("static-call sites: %d, tail %d", len(k.StaticCallSites), tail)
}

func TestDebianBugEntries(t *testing.T) {
	k, _ := loadDebian(t)
	files := 0
	for i, b := range k.BugEntries {
		if !bytes.Equal(k.Text(b.Addr, 2), []byte{0x0f, 0x0b}) {
			t.Fatalf("bug entry %d at %#x: % x, want ud2", i, b.Addr, k.Text(b.Addr, 2))
		}
		if b.File != "" {
			files++
		}
	}
	if files == 0 {
		t.Error("no bug entry has a file name")
	}
	if len(k.BugEntries) > 0 {
		b := k.BugEntries[0]
		t.Logf("bug entries: %d, %d with file; first %#x %s:%d flags %#x", len(k.BugEntries), files, b.Addr, b.File, b.Line, b.Flags)
	}
}

func TestDebianMcount(t *testing.T) {
	k, l := loadDebian(t)
	fentry, ok := l.sym("__fentry__")
	if !ok {
		t.Fatal("no __fentry__ symbol")
	}
	if !slices.IsSorted(k.McountLocs) {
		t.Fatal("mcount locations not sorted")
	}
	calls, nops, outside := 0, 0, 0
	for i, a := range k.McountLocs {
		in, err := x86.Decode(nil, k.Text(a, 15))
		switch {
		case err == nil && in.Kind == x86.KindCall && in.Len == 5 && in.Target(a) == fentry:
			calls++
		case err == nil && in.Kind == x86.KindNop:
			nops++
		default:
			t.Fatalf("mcount location %d at %#x: %v %v", i, a, in, err)
		}
		if k.LookupFunction(a) == nil {
			outside++
		}
	}
	t.Logf("mcount: %d calls to __fentry__, %d NOPs, %d outside any function symbol", calls, nops, outside)
}

func TestDebianExTable(t *testing.T) {
	k, _ := loadDebian(t)
	for i, e := range k.ExTable {
		if k.RegionAt(e.Insn) == nil {
			t.Errorf("ex entry %d insn %#x outside text", i, e.Insn)
		}
	}
	for i, a := range k.Blacklist {
		if k.SymbolAt(a) < 0 {
			t.Errorf("blacklist entry %d %#x before any symbol", i, a)
		}
	}
}

// TestDebianKallsymsRebuild decodes the embedded kallsyms tables and
// rebuilds them with ktab.Build with Debian 6.1's flags: every table must
// come out byte for byte.
func TestDebianKallsymsRebuild(t *testing.T) {
	loadDebian(t)
	tab, lay := debian.t, debian.layout
	if tab == nil {
		t.Skip("vmlinux has .symtab: no kallsyms decode")
	}
	t.Logf("kallsyms at %#x: %d symbols, names %d bytes, token table %d bytes, relative_base %#x, _text %#x, candidates %d, AllSymbols %v",
		lay.Base+uint64(lay.Offsets), tab.NumSyms, len(tab.Names), len(tab.TokenTable), tab.RelativeBase, tab.Text, lay.Candidates, tab.AllSymbols)
	// Feed back what the build was fed: per-cpu symbols come out typed
	// 'A', which 6.1 is_ignored_symbol drops; the tool saw them with
	// their section type and make_percpus_absolute set 'A' before
	// sorting and compressing, so any non-ignored type reproduces it.
	in := make([]ktab.Symbol, len(tab.Syms))
	percpu := 0
	for i, s := range tab.Syms {
		in[i] = s
		if s.Type == 'A' {
			in[i].Type = 'D'
			percpu++
		}
	}
	got, err := ktab.Build(in, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuilt from %d symbols (%d per-cpu)", len(in), percpu)
	eq := func(what string, ok bool) {
		if !ok {
			t.Errorf("%s differs", what)
		}
	}
	eq("kallsyms_num_syms", got.NumSyms == tab.NumSyms)
	eq("kallsyms_names", bytes.Equal(got.Names, tab.Names))
	eq("kallsyms_markers", slices.Equal(got.Markers, tab.Markers))
	eq("kallsyms_seqs_of_names", bytes.Equal(got.SeqsOfNames, tab.SeqsOfNames))
	eq("kallsyms_token_table", bytes.Equal(got.TokenTable, tab.TokenTable))
	eq("kallsyms_token_index", got.TokenIndex == tab.TokenIndex)
	eq("kallsyms_offsets", slices.Equal(got.Offsets, tab.Offsets))
	eq("kallsyms_relative_base", got.RelativeBase == tab.RelativeBase)
	eq("symbols", slices.Equal(got.Syms, tab.Syms))
	if t.Failed() {
		for i := range min(len(got.Names), len(tab.Names)) {
			if got.Names[i] != tab.Names[i] {
				t.Logf("names first differ at byte %d", i)
				break
			}
		}
		for i := range min(len(got.Syms), len(tab.Syms)) {
			if got.Syms[i] != tab.Syms[i] {
				t.Logf("symbol %d: rebuilt %+v, image %+v", i, got.Syms[i], tab.Syms[i])
				break
			}
		}
	}
}

type badCase struct {
	name, want string
	data       []byte
}

func TestBadInput(t *testing.T) {
	self, err := os.ReadFile("/bin/ls")
	if err != nil {
		t.Skip("no /bin/ls")
	}
	// A minimal ELF64 header for aarch64.
	arm := make([]byte, 64)
	copy(arm, elf.ELFMAG)
	arm[4], arm[5], arm[6] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(arm[16:], uint16(elf.ET_EXEC))
	le.PutUint16(arm[18:], uint16(elf.EM_AARCH64))
	le.PutUint32(arm[20:], 1)
	le.PutUint16(arm[52:], 64)
	cases := []badCase{
		{"empty", "not an ELF file", nil},
		{"text.txt", "not an ELF file", []byte("hello, world\n")},
		{"ls", "not a kernel ELF", self},
		{"ls.trunc", "truncated file", self[:200]},
		{"ls.trunc-hdr", "malformed ELF", self[:40]},
		{"arm64", "ELF for EM_AARCH64, not x86-64", arm},
	}
	if d, err := os.ReadFile(vmlinuxPath()); err == nil {
		cases = append(cases, badCase{"vmlinux.trunc", "truncated file", d[:len(d)/2]},
			badCase{"vmlinux.trunc-small", "truncated file", d[:1<<20]})
	}
	for _, c := range cases {
		k, err := Load(c.name, c.data)
		if err == nil || k != nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, c.name+": ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line naming the file and %q", c.name, msg, c.want)
		}
		t.Logf("%s", msg)
	}
}

// TestCorruptKallsyms flips bytes in each kallsyms object of the real
// image: the loader must refuse with "layout unknown", never panic.
func TestCorruptKallsyms(t *testing.T) {
	loadDebian(t)
	lay := debian.layout
	if lay == nil {
		t.Skip("no kallsyms layout")
	}
	ro := debian.l.f.Section(".rodata")
	for _, c := range []struct {
		what string
		off  int
	}{
		{"num_syms", lay.NumSyms},
		{"names header", lay.Names},
		{"markers", lay.Markers + 4},
		{"seqs", lay.Seqs + 1},
		{"token table", lay.TokenTable + 3},
		{"token index", lay.TokenIdx + 2},
		{"relative_base", lay.RelBase},
	} {
		d := slices.Clone(debian.data)
		d[int(ro.Offset)+c.off] ^= 0xff
		_, err := Load("bad.vmlinux", d)
		if err == nil || !strings.HasPrefix(err.Error(), "bad.vmlinux: kallsyms tables not found / layout unknown") {
			t.Errorf("%s corrupted: %v", c.what, err)
			continue
		}
		t.Logf("%s: %v", c.what, err)
	}
}

func BenchmarkLoadDebian(b *testing.B) {
	loadDebian(b)
	b.SetBytes(int64(len(debian.data)))
	for b.Loop() {
		if _, err := Load("vmlinux", debian.data); err != nil {
			b.Fatal(err)
		}
	}
}
