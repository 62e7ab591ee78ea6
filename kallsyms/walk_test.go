package kallsyms

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// TestProcKallsymsRoundTrip: /proc/kallsyms as s_show prints it parses
// back (with the project's /proc/kallsyms parser) to the table's symbols,
// in kallsyms order, and every counted walk op is there.
func TestProcKallsymsRoundTrip(t *testing.T) {
	tab := synthTables(t)
	c, err := NewCompressed(tab, Baseline, CompressedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cn := sim.NewCounters(false)
	lines, n := c.ProcKallsyms(cn, func(l []byte) { out.Write(l) })
	if lines != tab.NumSyms || n != int64(out.Len()) {
		t.Fatalf("%d lines %d bytes, want %d lines and %d bytes", lines, n, tab.NumSyms, out.Len())
	}
	syms, err := ktab.ParseSymbols("s_show", bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range syms {
		if s.Name != tab.Syms[i].Name || s.Addr != tab.SymAddress(i) || s.Type != tab.Syms[i].Type {
			t.Fatalf("line %d: %+v, table %+v at %#x", i, s, tab.Syms[i], tab.SymAddress(i))
		}
	}
	if cn.Total(OpShowLine) != uint64(lines) || cn.Total(OpSymType) != uint64(lines) || cn.Total(OpSeqRead) != uint64(SeqReads(n)) {
		t.Errorf("counts: %s", cn)
	}
}

// TestProcKallsymsMatchesMachine: the core lines of this machine's
// /proc/kallsyms are reproduced byte for byte from the table built from
// them (skips when addresses are hidden).
func TestProcKallsymsMatchesMachine(t *testing.T) {
	tab := procTables(t)
	c, err := NewCompressed(tab, OffsetIndexVariant, CompressedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "\t[") {
			want = append(want, sc.Text()+"\n")
		}
	}
	i := 0
	c.ProcKallsyms(nil, func(l []byte) {
		if i < len(want) && string(l) != want[i] {
			t.Fatalf("line %d: %q, machine %q", i, l, want[i])
		}
		i++
	})
	if i != len(want) {
		t.Errorf("%d lines, machine %d", i, len(want))
	}
}

func TestModuleOnEachSymbol(t *testing.T) {
	tab := synthTables(t)
	mods := []*image.Module{
		{Name: "old", Symbols: []image.Symbol{{Name: "a", Addr: 0x1000}, {Name: "undef"}, {Name: "b", Addr: 0x1010}}},
		{Name: "gone", State: image.ModuleUnformed, Symbols: []image.Symbol{{Name: "c", Addr: 0x2000}}},
		{Name: "new", Symbols: []image.Symbol{{Name: "d", Addr: 0x3000}}},
	}
	c, err := NewCompressed(tab, Baseline, CompressedOptions{Modules: mods})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	c.ModuleOnEachSymbol(nil, func(name string, m *image.Module, _ uint64) int {
		got = append(got, m.Name+":"+name)
		return 0
	})
	// Newest first, UNFORMED skipped, SHN_UNDEF (address 0) skipped.
	if want := "new:d old:a old:b"; strings.Join(got, " ") != want {
		t.Errorf("walk %q, want %q", strings.Join(got, " "), want)
	}
	n := 0
	if r := c.ModuleOnEachSymbol(nil, func(string, *image.Module, uint64) int { n++; return 7 }); r != 7 || n != 1 {
		t.Errorf("stop: returned %d after %d calls", r, n)
	}
	var buf bytes.Buffer
	c.ProcKallsyms(nil, func(l []byte) {
		if bytes.Contains(l, []byte("\t[")) {
			buf.Write(l)
		}
	})
	if want := FormatKsymLine(0x3000, 0, "d", "new"); !strings.HasPrefix(buf.String(), want[:17]) {
		t.Errorf("module lines %q", buf.String())
	}
}

// TestOnEachSymbolStreams: kallsyms_on_each_symbol's tokens are counted as
// kallsyms.stream.tok (a whole-table walk in table order), none as
// kallsyms.tok: every record's tokens once, every record visited and its
// characters stored once, as before the streaming op; a lookup by name
// (kallsyms_lookup_name) still counts kallsyms.tok.
func TestOnEachSymbolStreams(t *testing.T) {
	tab := synthTables(t)
	c, err := NewCompressed(tab, Baseline, CompressedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The tokens and characters of every record, from the table itself.
	var toks, chars uint64
	for off, i := 0, 0; i < tab.NumSyms; i++ {
		l := int(tab.Names[off])
		off++
		if l&0x80 != 0 {
			l = l&0x7F | int(tab.Names[off])<<7
			off++
		}
		toks += uint64(l)
		off += l
	}
	for _, s := range tab.Syms {
		chars += uint64(len(s.Name))
	}
	cn := sim.NewCounters(false)
	visited := 0
	c.OnEachSymbol(cn, func([]byte, uint64) int { visited++; return 0 })
	if visited != tab.NumSyms || cn.Total(OpVisit) != uint64(tab.NumSyms) {
		t.Errorf("visited %d records (kallsyms.visit %d), want %d", visited, cn.Total(OpVisit), tab.NumSyms)
	}
	if got := cn.Total(OpStreamTok); got != toks {
		t.Errorf("kallsyms.stream.tok = %d, want every record's tokens, %d", got, toks)
	}
	if got := cn.Total(OpTok); got != 0 {
		t.Errorf("kallsyms.tok = %d in a whole-table walk, want 0 (its tokens are streamed)", got)
	}
	if got := cn.Total(OpChrOut); got != chars {
		t.Errorf("kallsyms.chr_out = %d, want every name's characters, %d", got, chars)
	}
	cn = sim.NewCounters(false)
	if _, ok := c.LookupName(cn, tab.Syms[len(tab.Syms)/2].Name); !ok {
		t.Fatal("LookupName missed a table symbol")
	}
	if cn.Total(OpTok) == 0 || cn.Total(OpStreamTok) != 0 {
		t.Errorf("kallsyms_lookup_name: kallsyms.tok %d, kallsyms.stream.tok %d; want its tokens as kallsyms.tok", cn.Total(OpTok), cn.Total(OpStreamTok))
	}
}
