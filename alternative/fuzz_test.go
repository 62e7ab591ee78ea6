package alternative

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// FuzzParseAltInstructions: any bytes parse or fail cleanly, and a parsed
// table re-encodes to the same bytes.
func FuzzParseAltInstructions(f *testing.F) {
	f.Add(hx(f, "f0 ff ff ff 10 00 00 00 10 81 06 01"), uint64(tText))
	f.Add(make([]byte, 11), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, base uint64) {
		alts, err := ParseAltInstructions(b, base)
		if err != nil {
			return
		}
		var out []byte
		for i, a := range alts {
			at := base + uint64(i*AltInstrSize)
			out = append(out, rel32(at, 0, a.Instr)...)
			out = append(out, rel32(at+4, 0, a.Repl)...)
			out = append(out, byte(a.CPUID), byte(a.CPUID>>8), a.InstrLen, a.ReplLen)
			if a.Feature() >= featureLimit {
				t.Fatalf("feature %d accepted", a.Feature())
			}
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip: % x != % x", out, b)
		}
	})
}

func FuzzParseParaInstructions(f *testing.F) {
	f.Add(hx(f, "00 00 00 81 ff ff ff ff 01 06 ff 0f 00 00 00 00"))
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		sites, err := ParseParaInstructions(b)
		if err != nil {
			return
		}
		if len(sites)*ParaSiteSize != len(b) {
			t.Fatalf("%d sites from %d bytes", len(sites), len(b))
		}
		for i, s := range sites {
			e := b[i*ParaSiteSize:]
			if s.Instr != le.Uint64(e) || s.Type != e[8] || s.Len != e[9] || s.Clobber != le.Uint16(e[10:]) {
				t.Fatalf("site %d: %+v from % x", i, s, e[:16])
			}
		}
	})
}

func FuzzParseSites(f *testing.F) {
	f.Add(hx(f, "fc ff ff ff 00 00 00 00"), uint64(tText))
	f.Fuzz(func(t *testing.T, b []byte, base uint64) {
		s, err := ParseSites(".return_sites", b, base)
		if err != nil {
			if len(b)%SiteSize == 0 {
				t.Fatalf("%d bytes refused: %v", len(b), err)
			}
			return
		}
		for i, a := range s {
			at := base + uint64(i*SiteSize)
			if !bytes.Equal(rel32(at, 0, a), b[i*SiteSize:i*SiteSize+4]) {
				t.Fatalf("site %d: %#x", i, a)
			}
		}
	})
}

// FuzzPatcher: random text and random tables never make the patcher
// panic or write outside the sites it was given (each table's sites are
// confined to the text; bytes outside every site stay as they were).
func FuzzPatcher(f *testing.F) {
	f.Add(hx(f, "ff 15 f2 ff ff ff e8 00 00 00 00 e9 00 00 00 00 90 90 90"), hx(f, "01 06 00 06 00 06 0b 05 10 03"), uint8(0))
	f.Add(bytes.Repeat([]byte{0x90}, 64), hx(f, "02 08 10 05 20 03 30 02"), uint8(3))
	f.Fuzz(func(t *testing.T, text, table []byte, cpuSel uint8) {
		if len(text) == 0 || len(text) > 4096 {
			return
		}
		m := &mem{}
		buf := bytes.Clone(text)
		m.add(tText, buf)
		repl := bytes.Clone(text)
		m.add(tRepl, repl)
		names := [][]string{nil, {"X86_FEATURE_RETPOLINE"}, {"X86_FEATURE_RETPOLINE", "X86_FEATURE_RETPOLINE_LFENCE"}, {"X86_FEATURE_RETHUNK", "X86_FEATURE_INDIRECT_THUNK_ITS"}}
		cpu := cpuWith(t, append(names[int(cpuSel)%len(names)], "X86_FEATURE_ALWAYS")...)
		var tb Tables
		touched := make([]bool, len(text))
		mark := func(off, n int) {
			for i := off; i < off+n && i < len(touched); i++ {
				touched[i] = true
			}
		}
		for i := 0; i+2 <= len(table); i += 2 {
			off, arg := int(table[i])%len(text), table[i+1]
			at := tText + uint64(off)
			switch arg >> 6 {
			case 0:
				n := int(arg&7) + 1
				if off+n > len(text) {
					continue
				}
				tb.Para = append(tb.Para, ParaSite{Instr: at, Type: arg >> 3 & 3, Len: uint8(n)})
				mark(off, n)
			case 1:
				tb.Retpolines = append(tb.Retpolines, at)
				mark(off, 15)
			case 2:
				tb.Returns = append(tb.Returns, at)
				mark(off, 15)
			case 3:
				n := int(arg&7) + 1
				rn := int(arg>>3&7) % (n + 1)
				if off+n > len(text) {
					continue
				}
				tb.Alternatives = append(tb.Alternatives, AltInstr{Instr: at, Repl: tRepl + uint64(off), CPUID: uint16(arg&1) << 15, InstrLen: uint8(n), ReplLen: uint8(rn)})
				mark(off, n)
			}
		}
		p := &Patcher{CPU: cpu, Env: testEnv(), Mem: m, Record: true}
		_ = p.AlternativeInstructions(&tb) // errors are fine, panics are not
		for i := range text {
			if !touched[i] && buf[i] != text[i] {
				t.Fatalf("byte %d outside every site changed: %#x -> %#x", i, text[i], buf[i])
			}
		}
		for _, s := range p.Sites {
			if len(s.Before) != len(s.After) {
				t.Fatalf("record %+v: lengths differ", s)
			}
		}
	})
}

// FuzzParseAltInstructions14: the 6.12 / 7.3 parser never panics and
// its entries respect the BUG_ONs it enforces.
func FuzzParseAltInstructions14(f *testing.F) {
	f.Add(make([]byte, 28))
	f.Add([]byte{0x00, 0xff, 0xff, 0xff, 0x10, 0, 0, 0, 0x10, 0x01, 0x03, 0x00, 6, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAltInstructions14(b, 0xffffffff83706558)
		if err != nil {
			return
		}
		for _, e := range a {
			if e.InstrLen > MaxPatchLen || int(e.Feature()) >= 24*32 {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}

// FuzzParseCPUInfo: any text parses or is refused, never a panic; a
// parsed family and model are show_cpuinfo's __u8 values (or -1: no
// line), and a parsed CPU builds for every generation.
func FuzzParseCPUInfo(f *testing.F) {
	f.Add("vendor_id : GenuineIntel\ncpu family : 6\nflags : fpu nx retpoline\nbugs : spectre_v2 retbleed its\n")
	f.Add("flags:\n")
	f.Add("cpu family : 0x19\nflags : fpu\n")
	f.Add("model : -1\nflags : fpu\n")
	f.Add("cpu family : 25\nmodel : 256\nflags : fpu\n")
	f.Fuzz(func(t *testing.T, s string) {
		ci, err := ParseCPUInfo(strings.NewReader(s))
		if err != nil {
			return
		}
		if ci.Family < -1 || ci.Family > 255 || ci.Model < -1 || ci.Model > 255 {
			t.Fatalf("family %d model %d accepted", ci.Family, ci.Model)
		}
		for _, g := range image.Generations {
			c, err := ci.CPU(g)
			if err != nil || c.Name != CPUHost {
				t.Fatalf("%v: %v", g, err)
			}
		}
	})
}

// FuzzBootGen: 6.12 / 7.3 alternatives, retpolines, returns, call thunks
// and sealing over arbitrary text and tables never panic.
func FuzzBootGen(f *testing.F) {
	f.Add([]byte{0xff, 0x15, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0, 0x90, 0x90, 0xf3, 0x0f, 0x1e, 0xfa}, uint8(0), uint16(0x0300), uint8(6), uint8(5), true)
	f.Fuzz(func(t *testing.T, text []byte, off uint8, flags uint16, il, rl uint8, g73 bool) {
		const base = 0xffffffff81000000
		g := image.Gen612
		if g73 {
			g = image.Gen73
		}
		m := ModelFor(g)
		mm := &fuzzMem{base: base, b: append(bytes.Clone(text), make([]byte, 64)...)}
		cpu, _ := LookupCPU("milan")
		cpu, _ = cpu.ForGen(g)
		cd, _ := m.FeatureByName("CALL_DEPTH")
		cpu.Features.Set(cd)
		o := uint64(off) % uint64(len(mm.b))
		env := &Env{BUGFunc: base, NopFunc: base + 1, IndirectThunkArray: base + 8, ReturnThunk: base + 16, XReturnThunk: base + 16,
			CallThunks: &CallThunkEnv{TextStart: base, TextEnd: base + uint64(len(mm.b)), Template: []byte{0x90, 0x90}, TemplateAddr: base}}
		tb := &Tables{
			Alternatives: []AltInstr{{Instr: base + o, Repl: base, CPUID: 3*32 + 21, Flags: flags, InstrLen: il % 32, ReplLen: rl % 32}},
			Retpolines:   []uint64{base + o}, Returns: []uint64{base + o}, CallSites: []uint64{base + o}, EndbrSeal: []uint64{base + o},
		}
		p := &Patcher{Model: m, CPU: cpu, Env: env, Mem: mm}
		_ = p.AlternativeInstructions(tb)
	})
}

type fuzzMem struct {
	base uint64
	b    []byte
}

func (m *fuzzMem) Text(addr uint64, n int) []byte {
	if addr < m.base || addr-m.base >= uint64(len(m.b)) {
		return nil
	}
	off := addr - m.base
	end := min(uint64(len(m.b)), off+uint64(n))
	return m.b[off:end:end]
}
