package ktab

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"pgregory.net/rapid"
)

func tok(t *Tables, b byte) string { return t.TokenStrings()[b] }

// Two symbols "Tab", "tab" (AllSymbols: no text range needed).
// Slot 255: "ab" (profit 2). Then "T\xff" and "t\xff" tie at profit 1:
// keys 0xff54 < 0xff74, so slot 254 = "Tab", slot 253 = "tab", and each
// symbol compresses to a single token. Duplicate names sort by address.
func TestHandSingleTokenAndTie(t *testing.T) {
	tb, err := Build([]Symbol{{Addr: 0x20, Type: 't', Name: "ab"}, {Addr: 0x10, Type: 'T', Name: "ab"}}, Options{AllSymbols: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tb.Names, []byte{1, 0xfe, 1, 0xfd}; !bytes.Equal(got, want) {
		t.Fatalf("names % x, want % x", got, want)
	}
	if tok(tb, 255) != "ab" || tok(tb, 254) != "Tab" || tok(tb, 253) != "tab" || tok(tb, 252) != "" {
		t.Fatalf("tokens 255..252 = %q %q %q %q", tok(tb, 255), tok(tb, 254), tok(tb, 253), tok(tb, 252))
	}
	for _, c := range "Tabt" {
		if tok(tb, byte(c)) != string(c) {
			t.Fatalf("literal %c = %q", c, tok(tb, byte(c)))
		}
	}
	if tok(tb, 'c') != "" {
		t.Fatal("unused literal slot not empty")
	}
	// Address order: T ab (0x10) is index 0.
	if tb.Syms[0].Addr != 0x10 || !bytes.Equal(tb.SeqsOfNames, []byte{0, 0, 0, 0, 0, 1}) {
		t.Fatalf("order %+v seqs % x", tb.Syms, tb.SeqsOfNames)
	}
	if tb.Markers[0] != 0 || len(tb.Markers) != 1 || tb.Addresses[1] != 0x20 {
		t.Fatalf("markers %v addresses %v", tb.Markers, tb.Addresses)
	}
	// Token table: 252 empty strings + "T","a","b","t" + "tab","Tab","ab".
	if len(tb.TokenTable) != 256+4+3+3+2 {
		t.Fatalf("token table %d bytes", len(tb.TokenTable))
	}
}

// "Tab", "Tba": all four pairs have profit 1; ties go to the smallest key
// a+256*b, i.e. by SECOND byte first: Ta(0x6154) < ba(0x6162) < Tb(0x6254)
// < ab(0x6261). Slot 255 = "Ta"; then "\xffb","Tba": min key ba(0x6162)
// -> 254 = "ba"; then "\xffb","T\xfe": 0x62ff < 0xfe54 -> 253 = "Tab",
// 252 = "Tba". A lexical tie-break would have picked "Tb" for slot 254.
func TestHandPairKeyTieOrder(t *testing.T) {
	tb, err := Build([]Symbol{{Addr: 1, Type: 'T', Name: "ab"}, {Addr: 2, Type: 'T', Name: "ba"}}, Options{AllSymbols: true})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{tok(tb, 255), tok(tb, 254), tok(tb, 253), tok(tb, 252), tok(tb, 251)}
	if want := []string{"Ta", "ba", "Tab", "Tba", ""}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slots 255..251 = %q, want %q", got, want)
	}
	if !bytes.Equal(tb.Names, []byte{1, 0xfd, 1, 0xfc}) {
		t.Fatalf("names % x", tb.Names)
	}
}

// Non-overlapping left-to-right replacement: "Taaaa" has 3 overlapping
// "aa" (profit 3) -> "T\xff\xff"; then T\xff (1) vs \xff\xff (1): key
// 0xff54 < 0xffff -> "Taa", giving "\xfe\xff"; then "Taaaa".
func TestHandOverlap(t *testing.T) {
	tb, err := Build([]Symbol{{Addr: 1, Type: 'T', Name: "aaaa"}}, Options{AllSymbols: true})
	if err != nil {
		t.Fatal(err)
	}
	if tok(tb, 255) != "aa" || tok(tb, 254) != "Taa" || tok(tb, 253) != "Taaaa" || !bytes.Equal(tb.Names, []byte{1, 0xfd}) {
		t.Fatalf("tokens %q %q %q names % x", tok(tb, 255), tok(tb, 254), tok(tb, 253), tb.Names)
	}
}

// A name that stays >= 128 token bytes gets a 2-byte header. With one
// symbol of 300 distinct adjacent pairs there are at most 256-#literals
// replacements, so the record stays long.
func TestHandTwoByteHeader(t *testing.T) {
	var sb strings.Builder
	alpha := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
	x := uint32(1)
	for sb.Len() < 500 {
		x = x*1103515245 + 12345
		sb.WriteByte(alpha[(x>>16)%uint32(len(alpha))])
	}
	tb, err := Build([]Symbol{{Addr: 1, Type: 't', Name: sb.String()}, {Addr: 2, Type: 't', Name: "short"}}, Options{AllSymbols: true})
	if err != nil {
		t.Fatal(err)
	}
	l := int(tb.Names[0])
	if l&0x80 == 0 {
		t.Fatalf("first header %#x: want a 2-byte header", l)
	}
	l = l&0x7f | int(tb.Names[1])<<7
	if l < 128 || tb.Names[1] != byte(l>>7) {
		t.Fatalf("length %d", l)
	}
	next, err := NextRecord(tb.Names, 0)
	if err != nil || next != 2+l {
		t.Fatalf("NextRecord = %d, %v", next, err)
	}
	if st := tb.Stats(); st.TwoByteHeaders != 1 {
		t.Fatalf("TwoByteHeaders = %d", st.TwoByteHeaders)
	}
	if got := expandRecord(t, tb, 0); got != "t"+sb.String() {
		t.Fatalf("expansion mismatch")
	}
}

// expandRecord expands record i as kernel/kallsyms.c:kallsyms_expand_symbol
// does (type char included).
func expandRecord(t *testing.T, tb *Tables, i int) string {
	t.Helper()
	off := 0
	for range i {
		var err error
		if off, err = NextRecord(tb.Names, off); err != nil {
			t.Fatal(err)
		}
	}
	l, h := int(tb.Names[off]), 1
	if l&0x80 != 0 {
		l, h = l&0x7f|int(tb.Names[off+1])<<7, 2
	}
	ts := tb.TokenStrings()
	var sb strings.Builder
	for _, c := range tb.Names[off+h : off+h+l] {
		sb.WriteString(ts[c])
	}
	return sb.String()
}

func TestFixtureProperties(t *testing.T) {
	syms := loadFixture(t)
	tb, err := Build(syms, Options{BaseRelative: true, AbsolutePercpu: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range tb.Syms {
		if got := expandRecord(t, tb, i); got != string(s.Type)+s.Name {
			t.Fatalf("record %d expands to %q, want %c%s", i, got, s.Type, s.Name)
		}
		if tb.SymAddress(i) != s.Addr {
			t.Fatalf("SymAddress(%d) = %#x, want %#x", i, tb.SymAddress(i), s.Addr)
		}
	}
	names := map[string]bool{}
	for _, s := range tb.Syms {
		names[s.Name] = true
	}
	for _, dropped := range []string{"at_etext_dropped", "at_einittext_dropped", "kallsyms_names", "__kcfi_typeid_vfs_read", "foo_veneer", "undefined_thing", "debug_thing", "some_abs_sym", "data_thing", "__gp"} {
		if names[dropped] {
			t.Errorf("%s kept", dropped)
		}
	}
	for _, kept := range []string{"_etext", "_einittext", "_stext", "_text", "init_helper", "a"} {
		if !names[kept] {
			t.Errorf("%s dropped", kept)
		}
	}
	if len(tb.Warnings) != 1 || !strings.Contains(tb.Warnings[0], "too long") {
		t.Errorf("warnings %q", tb.Warnings)
	}
	// Tie rules at 0xffffffff81000010: non-weak, not linker-provided,
	// fewer underscores, input order.
	var at []string
	for _, s := range tb.Syms {
		if s.Addr == 0xffffffff81000010 {
			at = append(at, s.Name)
		}
	}
	if want := "[entry_SYSCALL_64 _entry_one_underscore __entry_text_start weak_entry]"; fmt.Sprint(at) != want {
		t.Errorf("order at ...010: %v, want %s", at, want)
	}
	// --all-symbols + --absolute-percpu: per-cpu symbols become 'A'.
	tb, err = Build(syms, Options{AllSymbols: true, BaseRelative: true, AbsolutePercpu: true})
	if err != nil {
		t.Fatal(err)
	}
	if tb.Syms[0].Type != 'A' || tb.Offsets[0] != 0 || tb.RelativeBase != 0xffffffff80fff000 {
		t.Errorf("percpu: %+v off %d base %#x", tb.Syms[0], tb.Offsets[0], tb.RelativeBase)
	}
	for i, s := range tb.Syms {
		if tb.SymAddress(i) != s.Addr {
			t.Fatalf("SymAddress(%d) = %#x, want %#x", i, tb.SymAddress(i), s.Addr)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		syms []Symbol
		opt  Options
	}{
		{"empty", nil, Options{}},
		{"no text range", []Symbol{{Addr: 5, Type: 'T', Name: "f"}}, Options{}},
		{"only modules", []Symbol{{Addr: 5, Type: 't', Name: "f", Module: "m"}}, Options{AllSymbols: true}},
		{"relative overflow", []Symbol{{Addr: 0, Type: 'T', Name: "f"}, {Addr: 1 << 33, Type: 'T', Name: "g"}}, Options{AllSymbols: true, BaseRelative: true}},
		{"space in name", []Symbol{{Addr: 0, Type: 'T', Name: "f g"}}, Options{AllSymbols: true}},
		{"NUL type", []Symbol{{Addr: 0, Type: 0, Name: "f"}}, Options{AllSymbols: true}},
		{"empty name", []Symbol{{Addr: 0, Type: 'T'}}, Options{AllSymbols: true}},
	} {
		if _, err := Build(c.syms, c.opt); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	tb, err := Build([]Symbol{{Addr: 1, Type: 'T', Name: "f"}, {Addr: 2, Type: 't', Name: "x", Module: "mod"}}, Options{AllSymbols: true})
	if err != nil || len(tb.ModSyms) != 1 || tb.NumSyms != 1 {
		t.Fatalf("modules: %v %+v", err, tb)
	}
}

func TestParseSymbols(t *testing.T) {
	in := "ffffffff81000000 T _stext\n\nffffffff81000010 t foo\t[ext4]\n0x10 D bar\r\n"
	syms, err := ParseSymbols("in", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Symbol{{0xffffffff81000000, 'T', "_stext", ""}, {0xffffffff81000010, 't', "foo", "ext4"}, {0x10, 'D', "bar", ""}}
	if fmt.Sprint(syms) != fmt.Sprint(want) {
		t.Fatalf("got %v", syms)
	}
	for _, c := range []struct{ in, want string }{
		{"", "in: no symbols"},
		{"\n\n", "in: no symbols"},
		{"1 T a\nzz T b\n", "in:2: malformed address"},
		{"1 T a\n1 TT b\n", "in:2: malformed type"},
		{"1 T\n", "in:1: want 3 or 4 fields"},
		{"1 T a b c\n", "in:1: want 3 or 4 fields"},
		{"1 T a mod\n", "in:1: malformed module"},
		{"1 T a\n2 T " + strings.Repeat("x", 512) + "\n", "in:2: symbol name too long"},
		{"10000000000000000 T a\n", "in:1: malformed address"},
		{"-1 T a\n", "in:1: malformed address"},
		{"1 T a\x00b\n", "in:1: NUL byte"},
	} {
		_, err := ParseSymbols("in", strings.NewReader(c.in))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: err %v, want prefix %q", c.in, err, c.want)
		}
	}
	if _, err := ParseSymbols("in", strings.NewReader("1 T "+strings.Repeat("x", 511))); err != nil {
		t.Errorf("511-byte name: %v", err)
	}
}

func FuzzParseSymbols(f *testing.F) {
	f.Add("ffffffff81000000 T _stext\nffffffff81000010 t foo\t[ext4]\n")
	f.Add("0000000000000000 D __per_cpu_start\nffffffff81000000 T _text\n")
	f.Add("1 w weak\n2 A __gp\n")
	if b, err := os.ReadFile("testdata/fixture.map"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		syms, err := ParseSymbols("fuzz", strings.NewReader(in))
		if err != nil {
			if len(syms) != 0 {
				t.Fatal("symbols with error")
			}
			return
		}
		var b strings.Builder
		for _, s := range syms {
			if len(s.Name) >= KSYM_NAME_LEN || s.Name == "" {
				t.Fatalf("bad name %q", s.Name)
			}
			fmt.Fprintf(&b, "%x ", s.Addr)
			b.WriteByte(s.Type)
			b.WriteString(" " + s.Name)
			if s.Module != "" {
				fmt.Fprintf(&b, " [%s]", s.Module)
			}
			b.WriteByte('\n')
		}
		again, err := ParseSymbols("again", strings.NewReader(b.String()))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(syms) {
			t.Fatalf("round trip: %v", err)
		}
		// Build must not panic either.
		_, _ = Build(syms, Options{AllSymbols: true, BaseRelative: true})
	})
}

func TestFormatTokenAndTokenStrings(t *testing.T) {
	if got := FormatToken("a b\\\x00~\x7f!\xff"); got != `a\x20b\x5c\x00~\x7f!\xff` {
		t.Fatalf("FormatToken = %s", got)
	}
	tb, err := Build(loadFixture(t), Options{BaseRelative: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := tb.TokenStrings()
	var rebuilt []byte
	for i, s := range ts {
		if int(tb.TokenIndex[i]) != len(rebuilt) {
			t.Fatalf("index %d = %d, want %d", i, tb.TokenIndex[i], len(rebuilt))
		}
		rebuilt = append(append(rebuilt, s...), 0)
	}
	if !bytes.Equal(rebuilt, tb.TokenTable) {
		t.Fatal("TokenStrings does not rebuild the token table")
	}
}

func TestStatsAndExtras(t *testing.T) {
	tb, err := Build(loadFixture(t), Options{BaseRelative: true})
	if err != nil {
		t.Fatal(err)
	}
	st := tb.Stats()
	n := tb.NumSyms
	if st.NumSyms != n || st.NamesLen != len(tb.Names) || st.MarkersCount != (n+255)/256 || st.SeqsLen != 3*n || st.OffsetsLen != 4*n || st.TokenTableLen != len(tb.TokenTable) {
		t.Fatalf("stats %+v", st)
	}
	if st.NamesOffsetsLen != 3*n || st.Stride2Len != 3*((n+1)/2) || st.Offsets32Len != 4*n {
		t.Fatalf("extra sizes %+v", st)
	}
	for _, h := range []string{st.NamesSHA256, st.MarkersSHA256, st.SeqsSHA256, st.OffsetsSHA256, st.TokenTableSHA256, st.TokenIndexSHA256} {
		if _, err := hex.DecodeString(h); err != nil || len(h) != 64 {
			t.Fatalf("hash %q", h)
		}
	}
	no, err := tb.NamesOffsets()
	if err != nil || len(no) != 3*n {
		t.Fatal(err)
	}
	s2, err := tb.NamesOffsetsStride2()
	if err != nil || len(s2) != 3*((n+1)/2) {
		t.Fatal(err)
	}
	u32, hops, err := BuildOffsets32(tb.Names, n, 1)
	if err != nil || hops != n || len(u32) != n {
		t.Fatalf("BuildOffsets32: %v hops %d", err, hops)
	}
	h2, hops2, err := BuildOffsets32(tb.Names, n, 2)
	if err != nil || hops2 != n || len(h2) != (n+1)/2 {
		t.Fatalf("BuildOffsets32 stride 2: %v", err)
	}
	for i := range n {
		o := int(no[3*i])<<16 | int(no[3*i+1])<<8 | int(no[3*i+2])
		if o != int(u32[i]) {
			t.Fatalf("record %d: 24-bit %d, 32-bit %d", i, o, u32[i])
		}
		if i&0xff == 0 && uint32(o) != tb.Markers[i>>8] {
			t.Fatalf("marker mismatch at %d", i)
		}
		if i%2 == 0 {
			e := int(s2[3*i/2])<<16 | int(s2[3*i/2+1])<<8 | int(s2[3*i/2+2])
			if e != o || h2[i/2] != uint32(o) {
				t.Fatalf("stride-2 entry %d", i/2)
			}
		} else if nx, _ := NextRecord(tb.Names, int(u32[i-1])); nx != o {
			t.Fatalf("odd record %d not one hop from %d", i, i-1)
		}
	}
	if _, _, err := BuildOffsets32(tb.Names[:len(tb.Names)-1], n, 1); err == nil {
		t.Fatal("truncated names accepted")
	}
	// 24-bit limit.
	big := &Tables{NumSyms: 2, Names: append(append([]byte{0x80 | 0x7f, 0x7f}, make([]byte, 0x3fff)...), 1, 0)}
	if _, err := big.NamesOffsets(); err != nil {
		t.Fatal(err)
	}
	huge := &Tables{NumSyms: 1<<10 + 1}
	for range huge.NumSyms {
		huge.Names = append(append(huge.Names, 0xff, 0x7f), make([]byte, 0x3fff)...)
	}
	if _, err := huge.NamesOffsets(); err == nil || !strings.Contains(err.Error(), "24-bit") {
		t.Fatalf("16 MiB names: %v", err)
	}
}

// Random symbol lists (range symbols, per-cpu ranges, weak and
// linker-provided names, ignored names, long names, address ties) through
// the real tool and Build, with a random option set (-rapid.checks, default
// 100, sets the count).
func TestToolRandom(t *testing.T) {
	tool := kallsymsTool(t)
	special := []string{"_text", "_stext", "_etext", "_sinittext", "_einittext", "__per_cpu_start", "__per_cpu_end",
		"__start_x", "__stop_x", "__end_y", "__foo_start", "__foo_end", "kallsyms_markers", "__kcfi_typeid_f", "x_veneer", "__gp", "a.long_branch.b"}
	runs, built := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		syms := drawToolSymbols(rt, special, "TTTttWwDdbRAU", 510)
		o := Options{AllSymbols: rapid.Bool().Draw(rt, "all"), AbsolutePercpu: rapid.Bool().Draw(rt, "percpu"), BaseRelative: rapid.Bool().Draw(rt, "rel")}
		runs++
		if compareWithTool(rt, tool, writeMap(t, syms), syms, o) {
			built++
		}
	})
	t.Logf("%d random lists, %d built by the tool (the rest failed in both)", runs, built)
	if built == 0 {
		t.Fatal("no random list was built by the tool")
	}
}

// The default synthetic image's core symbols through the real tool.
func TestToolSynth(t *testing.T) {
	tool := kallsymsTool(t)
	if race.Enabled {
		t.Skip("covered by TestToolProcKallsyms prefix under -race")
	}
	syms := synthSymbols(t)
	mapFile := writeMap(t, syms)
	for _, o := range []Options{{BaseRelative: true}, {AllSymbols: true, BaseRelative: true}} {
		if !compareWithTool(t, tool, mapFile, syms, o) {
			t.Fatalf("%v: the tool failed on the synthetic image", o)
		}
	}
}

func synthSymbols(t testing.TB) []Symbol {
	k, _, err := synth.Generate(synth.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var syms []Symbol
	for _, s := range k.Symbols {
		if s.Module == "" {
			syms = append(syms, Symbol{Addr: s.Addr, Type: byte(s.Type), Name: s.Name})
		}
	}
	return syms
}

// Build on all of /proc/kallsyms (a prefix under -race): shape checks and
// build time.
func TestProcKallsymsBuild(t *testing.T) {
	syms := procKallsyms(t)
	if race.Enabled {
		syms = syms[:min(len(syms), 30000)]
	}
	opt := Options{BaseRelative: true, AbsolutePercpu: true}
	if race.Enabled {
		opt.AllSymbols = true // the prefix has no _etext
	}
	start := time.Now()
	tb, err := Build(syms, opt)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	st := tb.Stats()
	t.Logf("%d input symbols: build %v; N=%d names %d B markers %d seqs %d B offsets %d B token table %d B avg record %.6f; extras: names_offsets %d B, stride-2 %d B, u32 %d B (stride 2: %d B)",
		len(syms), el, st.NumSyms, st.NamesLen, st.MarkersCount, st.SeqsLen, st.OffsetsLen, st.TokenTableLen, st.AvgRecordLen, st.NamesOffsetsLen, st.Stride2Len, st.Offsets32Len, st.Offsets32S2Len)
	_, hops, err := BuildOffsets32(tb.Names, tb.NumSyms, 1)
	if err != nil || hops != tb.NumSyms {
		t.Fatal(err)
	}
	if _, err := tb.NamesOffsets(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkBuildSynth(b *testing.B) { benchBuild(b, synthSymbols(b)) }

func BenchmarkBuildProcKallsyms(b *testing.B) { benchBuild(b, procKallsyms(b)) }

// benchBuild times building syms (base-relative, absolute percpu).
func benchBuild(b *testing.B, syms []Symbol) {
	b.ResetTimer()
	for b.Loop() {
		if _, err := Build(syms, Options{BaseRelative: true, AbsolutePercpu: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(syms)), "syms")
}

func BenchmarkBuildOffsets32(b *testing.B) {
	syms := procKallsyms(b)
	tb, err := Build(syms, Options{BaseRelative: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := BuildOffsets32(tb.Names, tb.NumSyms, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// drawToolSymbols draws a random symbol list for the scripts/kallsyms
// comparisons: 1 to 60 symbols, some from special (the names the tool
// treats specially), the rest random names over a small alphabet (now
// and then maxLong bytes long), types from types, addresses low or in
// kernel text.
func drawToolSymbols(rt *rapid.T, special []string, types string, maxLong int) []Symbol {
	n := rapid.IntRange(1, 60).Draw(rt, "n")
	alpha := rapid.SampledFrom([]string{"ab", "abc_", "_.aZ09", "abcdefghijklmnopqrstuvwxyz_"}).Draw(rt, "alpha")
	var syms []Symbol
	for range n {
		var name string
		if rapid.IntRange(0, 4).Draw(rt, "special?") == 0 {
			name = rapid.SampledFrom(special).Draw(rt, "special")
		} else {
			l := rapid.IntRange(1, 12).Draw(rt, "len")
			if rapid.IntRange(0, 30).Draw(rt, "long?") == 0 {
				l = rapid.IntRange(100, maxLong).Draw(rt, "longlen")
			}
			b := make([]byte, l)
			for i := range b {
				b[i] = alpha[rapid.IntRange(0, len(alpha)-1).Draw(rt, "c")]
			}
			name = string(b)
		}
		typ := rapid.SampledFrom([]byte(types)).Draw(rt, "type")
		addr := uint64(rapid.IntRange(0, 40).Draw(rt, "addr")) * 8
		if rapid.Bool().Draw(rt, "high") {
			addr += 0xffffffff81000000
		}
		syms = append(syms, Symbol{Addr: addr, Type: typ, Name: name})
	}
	return syms
}
