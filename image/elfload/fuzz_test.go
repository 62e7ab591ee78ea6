package elfload

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
)

// kallsymsSeed is a small valid 6.1 layout: offsets, relative_base,
// num_syms, names, markers, seqs, token table, token index, built by hand
// for two symbols "T_text" (at _text) and "tfoo".
func kallsymsSeed(text uint64) []byte {
	var b []byte
	pad := func() {
		for len(b)%8 != 0 {
			b = append(b, 0)
		}
	}
	u32 := func(v uint32) { b = le.AppendUint32(b, v) }
	// kallsyms_offsets: relative_base - 1 - off = addr → off = -1 - (addr - base)
	u32(uint32(0xffffffff)) // _text
	fooOff := int32(-1 - 0x10)
	u32(uint32(fooOff)) // foo at _text+0x10
	pad()
	b = le.AppendUint64(b, text) // kallsyms_relative_base
	u32(2)                       // kallsyms_num_syms
	pad()
	// kallsyms_names: tokens are single characters (identity table).
	b = append(b, 6, 'T', '_', 't', 'e', 'x', 't')
	b = append(b, 4, 't', 'f', 'o', 'o')
	pad()
	u32(0) // kallsyms_markers
	pad()
	b = append(b, 0, 0, 1, 0, 0, 0) // seqs: "_text" < "foo" by strcmp
	pad()
	var idx []uint16
	tt := len(b)
	for i := range 256 {
		idx = append(idx, uint16(len(b)-tt))
		c := byte(i)
		if c == 0 {
			c = '?'
		}
		b = append(b, c, 0)
	}
	pad()
	for _, v := range idx {
		b = le.AppendUint16(b, v)
	}
	return b
}

const fuzzText = 0xffffffff81000000

func TestKallsymsSeed(t *testing.T) {
	tab, _, err := findKallsyms(kallsymsSeed(fuzzText), 0xffffffff82000000, fuzzText)
	if err != nil {
		t.Fatal(err)
	}
	if tab.NumSyms != 2 || tab.Syms[0].Name != "_text" || tab.Syms[0].Addr != fuzzText || tab.Syms[1].Name != "foo" || tab.Syms[1].Addr != fuzzText+0x10 || tab.Syms[1].Type != 't' {
		t.Fatalf("decoded %+v", tab.Syms)
	}
}

// tokenAnchorsSeed is n token anchors in a row, each a kallsyms_token_table
// of 256 one-character strings and its kallsyms_token_index, with no
// kallsyms_num_syms before any.
func tokenAnchorsSeed(n int) []byte {
	var one []byte
	var idx []byte
	for i := range 256 {
		idx = le.AppendUint16(idx, uint16(len(one)))
		one = append(one, 'a'+byte(i%26), 0)
	}
	one = append(one, idx...)
	return bytes.Repeat(one, n)
}

// numSymsLookalikesSeed is one token anchor after many kallsyms_num_syms
// look-alikes (the count 2) whose markers (one 0) sit where the 6.1
// layout puts them, and whose names do not chain.
func numSymsLookalikesSeed(n int) []byte {
	var b []byte
	for range n {
		b = le.AppendUint32(b, 2)
	}
	b = le.AppendUint32(b, 0) // kallsyms_markers
	b = le.AppendUint32(b, 0)
	b = append(b, 0, 0, 1, 0, 0, 0, 0, 0) // seqs
	return append(b, tokenAnchorsSeed(1)...)
}

// TestKallsymsManyLookalikes: .rodata crafted with many token anchors or
// num_syms candidates is refused after maxKallsymsTries of them, at once
// (each try is a pass over .rodata: trying them all is quadratic; 4096
// anchors took 7s, a 30 MB .rodata of them minutes).
func TestKallsymsManyLookalikes(t *testing.T) {
	for _, c := range []struct {
		name string
		ro   []byte
		want string
	}{
		{"anchors", tokenAnchorsSeed(4096), "4096 kallsyms_token_index candidates, more than 16"},
		{"num_syms", numSymsLookalikesSeed(256), "kallsyms_num_syms candidates, more than 16"},
	} {
		start := time.Now()
		_, _, err := findKallsyms(c.ro, 0xffffffff82000000, fuzzText)
		d := time.Since(start)
		if err == nil || !strings.HasPrefix(err.Error(), "kallsyms tables not found / layout unknown") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if d > 5*time.Second {
			t.Errorf("%s: %d bytes took %v", c.name, len(c.ro), d)
		}
		t.Logf("%s: %d bytes, %v: %v", c.name, len(c.ro), d, err)
	}
	// maxKallsymsTries anchors are still all tried.
	if _, _, err := findKallsyms(tokenAnchorsSeed(maxKallsymsTries), 0xffffffff82000000, fuzzText); err == nil || strings.Contains(err.Error(), "more than") {
		t.Errorf("%d anchors: %v", maxKallsymsTries, err)
	}
}

func FuzzKallsyms(f *testing.F) {
	f.Add(kallsymsSeed(fuzzText))
	f.Add(slices.Concat(make([]byte, 24), kallsymsSeed(fuzzText)))
	// Not tokenAnchorsSeed(maxKallsymsTries+1): 17 KB, the minimizer
	// takes minutes over it (TestKallsymsManyLookalikes has it).
	f.Add(numSymsLookalikesSeed(maxKallsymsTries + 1))
	f.Fuzz(func(t *testing.T, ro []byte) {
		tab, _, err := findKallsyms(ro, 0xffffffff82000000, fuzzText)
		if err != nil {
			return
		}
		if tab.NumSyms != len(tab.Syms) || len(tab.SeqsOfNames) != 3*tab.NumSyms {
			t.Fatalf("inconsistent tables: %d syms, %d decoded", tab.NumSyms, len(tab.Syms))
		}
		for i := 1; i < len(tab.Syms); i++ {
			if tab.Syms[i].Addr < tab.Syms[i-1].Addr {
				t.Fatal("accepted unsorted addresses")
			}
		}
	})
}

func entrySeed() []byte {
	b := make([]byte, 48)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func FuzzEntryDecoders(f *testing.F) {
	f.Add(entrySeed(), uint64(0xffffffff82439090))
	f.Add([]byte{0xf0, 0xff, 0xff, 0xff, 0x10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, uint64(0xffffffff82000000))
	f.Fuzz(func(t *testing.T, b []byte, base uint64) {
		if j, err := decodeJumpTable(b, base); err == nil && len(j) != len(b)/JumpEntrySize {
			t.Fatal("jump count")
		}
		if s, err := decodeStaticCallSites(b, base); err == nil && len(s) != len(b)/StaticCallSiteSize {
			t.Fatal("static-call count")
		}
		file := func(uint64) string { return "f.c" }
		for _, g := range image.Generations {
			for _, verbose := range []bool{true, false} {
				lay := image.BugEntryLayoutFor(g, verbose)
				if e, err := decodeBugTable(b, base, lay, file); err == nil && len(e) != len(b)/lay.Size {
					t.Fatalf("bug count, %s verbose=%v", g, verbose)
				}
			}
		}
		if e, err := decodeExTable(b, base); err == nil && len(e) != len(b)/ExEntrySize {
			t.Fatal("ex count")
		}
		if p, err := decodePtrs("x", b); err == nil {
			out, skipped := processMcountLocs(p)
			if len(out)+skipped != len(p) || !slices.IsSorted(out) {
				t.Fatal("mcount processing")
			}
		}
	})
}

// FuzzLoad runs the whole loader on arbitrary bytes: it must not panic.
// Load stops at the generation check on an input without linux_banner,
// so each generation is also forced (Options.Gen), as built and booted,
// to reach regions, tables, config and boot patching.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("\x7fELF"))
	f.Add(make([]byte, 64))
	cpu, err := alternative.LookupCPU(alternative.DefaultCPU)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if k, err := Load("fuzz", b); err == nil && k == nil {
			t.Fatal("nil kernel without error")
		}
		for _, g := range image.Generations {
			for _, c := range []*alternative.CPU{nil, cpu} {
				k, bt, err := LoadWith("fuzz", b, Options{Gen: g, CPU: c})
				if err != nil {
					continue
				}
				if k == nil {
					t.Fatalf("%s, cpu %v: nil kernel without error", g, c != nil)
				}
				if k.Config.Gen != g || (c != nil) != (bt != nil) {
					t.Fatalf("%s, cpu %v: loaded as generation %s, booted %v", g, c != nil, k.Config.Gen, bt != nil)
				}
			}
		}
	})
}

func TestJumpDecodeKnown(t *testing.T) {
	// entry at 0x1000: code -0x10 → 0xff0, target +0x20 from 0x1004, key +0x101 from 0x1008.
	b := []byte{0xf0, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0x01, 0x01, 0, 0, 0, 0, 0, 0}
	e, err := decodeJumpTable(b, 0x1000)
	if err != nil || len(e) != 1 {
		t.Fatal(err)
	}
	if e[0].Code != 0xff0 || e[0].Target != 0x1024 || e[0].Key != 0x1108 || !e[0].Branch {
		t.Fatalf("%+v", e[0])
	}
	s, _ := decodeStaticCallSites([]byte{0x10, 0, 0, 0, 0x03, 0x10, 0, 0}, 0x2000)
	if s[0].Addr != 0x2010 || s[0].Key != 0x3004 || !s[0].Tail || !s[0].Init {
		t.Fatalf("%+v", s[0])
	}
	if _, err := decodeJumpTable(b[:15], 0); err == nil {
		t.Fatal("accepted a partial entry")
	}
}
