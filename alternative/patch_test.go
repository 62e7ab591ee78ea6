package alternative

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The expected bytes below are worked out from 6.1.192's
// arch/x86/kernel/alternative.c and paravirt.c by hand, not from this
// package.

func TestApplyParavirt(t *testing.T) {
	pvcall := hx(t, "ff 15 f2 ff ff ff") // call *pv_ops+slot(%rip)
	cases := []struct {
		name    string
		typ     uint8
		site    []byte
		want    []byte
		action  string
		wantErr string
	}{
		{"direct call to the slot function", 1, pvcall,
			cat([]byte{0xe8}, rel32(tText, 5, tSaveFl), hx(t, "90")), ParaDirect, ""},
		{"_paravirt_nop slot: six bytes of NOPs", 2, pvcall, hx(t, "66 0f 1f 44 00 00"), ParaNop, ""},
		{"empty slot: call paravirt_BUG", 0, pvcall,
			cat([]byte{0xe8}, rel32(tText, 5, tBUG), hx(t, "90")), ParaBUG, ""},
		{"nop slot, 7-byte site", 2, hx(t, "ff 15 f2 ff ff ff 90"), hx(t, "0f 1f 80 00 00 00 00"), ParaNop, ""},
		{"nop slot, 10-byte site: NOP8 then NOP2", 2, bytes.Repeat([]byte{0xcc}, 10), hx(t, "0f 1f 84 00 00 00 00 00 66 90"), ParaNop, ""},
		{"type past pv_ops", 9, pvcall, nil, "", "past pv_ops"},
		{"site too short for a call", 1, hx(t, "ff d0 90"), nil, "", "cannot hold a call"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &mem{}
			text := append([]byte(nil), c.site...)
			m.add(tText, text)
			p := &Patcher{CPU: cpuWith(t), Env: testEnv(), Mem: m, Record: true}
			err := p.ApplyParavirt([]ParaSite{{Instr: tText, Type: c.typ, Len: uint8(len(c.site))}})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(text, c.want) {
				t.Fatalf("patched % x, want % x", text, c.want)
			}
			if p.Sites[0].Action != c.action || !bytes.Equal(p.Sites[0].Before, c.site) {
				t.Fatalf("record %+v", p.Sites[0])
			}
		})
	}
}

func TestApplyParavirtUnmapped(t *testing.T) {
	p := &Patcher{CPU: cpuWith(t), Env: testEnv(), Mem: &mem{}}
	err := p.ApplyParavirt([]ParaSite{{Instr: tText, Type: 1, Len: 6}})
	if !errors.Is(err, ErrUnmapped) {
		t.Fatalf("err %v, want ErrUnmapped", err)
	}
}

func TestAddNops(t *testing.T) {
	for n, want := range map[int]string{
		1:  "90",
		2:  "66 90",
		3:  "0f 1f 00",
		5:  "0f 1f 44 00 00",
		8:  "0f 1f 84 00 00 00 00 00",
		9:  "0f 1f 84 00 00 00 00 00 90",
		13: "0f 1f 84 00 00 00 00 00 0f 1f 44 00 00",
	} {
		b := make([]byte, n)
		AddNops(b)
		if hexOf(b) != want {
			t.Errorf("add_nops(%d) = %s, want %s", n, hexOf(b), want)
		}
	}
}

func TestOptimizeNops(t *testing.T) {
	cases := []struct{ in, want string }{
		{"90", "90"}, // a single NOP stays
		{"90 90", "66 90"},
		{"fa 90 90 90 90 90", "fa 0f 1f 44 00 00"},
		{"90 90 48 89 c7 90 90 90", "66 90 48 89 c7 0f 1f 00"},
		{"90 90 90 90 90 90 90 90 90", "0f 1f 84 00 00 00 00 00 90"},
		{"e8 00 00 00 00 90", "e8 00 00 00 00 90"},
		{"90 48 89 c7 90", "90 48 89 c7 90"},
		// A run only counts 0x90 bytes inside the site: the decoder's view
		// of a longer instruction is skipped whole.
		{"66 90 90 90", "66 90 66 90"},
	}
	for _, c := range cases {
		b := hx(t, c.in)
		OptimizeNops(b)
		if hexOf(b) != c.want {
			t.Errorf("optimize_nops(%s) = %s, want %s", c.in, hexOf(b), c.want)
		}
	}
}

// altCase builds a one-site image: the original at tText, the
// replacement at tRepl.
type altCase struct {
	name string
	cpu  []string
	orig string
	repl []byte
	alt  AltInstr
	want []byte
}

func runAlt(t *testing.T, orig []byte, repl []byte, alts []AltInstr, cpu *CPU) (*Patcher, []byte) {
	t.Helper()
	m := &mem{}
	text := make([]byte, 0x2000)
	copy(text, orig)
	for i := len(orig); i < len(text); i++ {
		text[i] = 0xcc
	}
	m.add(tText, text)
	m.add(tRepl, append(append([]byte(nil), repl...), 0xcc, 0xcc))
	p := &Patcher{CPU: cpu, Env: testEnv(), Mem: m, Record: true}
	if err := p.ApplyAlternatives(alts); err != nil {
		t.Fatal(err)
	}
	return p, text
}

func TestApplyAlternatives(t *testing.T) {
	xenpv := uint16(X86_FEATURE_XENPV)
	smap := func() uint16 { f, _ := FeatureByName("X86_FEATURE_SMAP"); return uint16(f) }()
	callOrig := cat([]byte{0xe8}, rel32(tText, 5, tSaveFl), hx(t, "90"))
	// e8 in the replacement section, aimed at native_save_fl from there.
	callRepl := cat([]byte{0xe8}, rel32(tRepl, 5, tSaveFl))
	jmpTo := func(dest uint64) []byte { return cat([]byte{0xe9}, rel32(tRepl, 5, dest)) }
	cases := []altCase{
		{"ALT_NOT(XENPV) on bare metal: cli over the pv call, NOP5 tail", nil,
			hexOf(callOrig), hx(t, "fa"), AltInstr{Instr: tText, Repl: tRepl, CPUID: xenpv | FlagInv, InstrLen: 6, ReplLen: 1},
			hx(t, "fa 0f 1f 44 00 00")},
		{"ALT_NOT(XENPV) on Xen PV: kept, the lone 90 stays", []string{"X86_FEATURE_XENPV"},
			hexOf(callOrig), hx(t, "fa"), AltInstr{Instr: tText, Repl: tRepl, CPUID: xenpv | FlagInv, InstrLen: 6, ReplLen: 1},
			callOrig},
		{"SMAP absent: padding NOPs optimised anyway", nil,
			"90 90 90", hx(t, "0f 01 cb"), AltInstr{Instr: tText, Repl: tRepl, CPUID: smap, InstrLen: 3, ReplLen: 3},
			hx(t, "0f 1f 00")},
		{"SMAP present: stac", []string{"X86_FEATURE_SMAP"},
			"90 90 90", hx(t, "0f 01 cb"), AltInstr{Instr: tText, Repl: tRepl, CPUID: smap, InstrLen: 3, ReplLen: 3},
			hx(t, "0f 01 cb")},
		{"call replacement re-based to the site", []string{"X86_FEATURE_SMAP"},
			"0f 1f 44 00 00", callRepl, AltInstr{Instr: tText, Repl: tRepl, CPUID: smap, InstrLen: 5, ReplLen: 5},
			cat([]byte{0xe8}, rel32(tText, 5, tSaveFl))},
		{"jmp replacement, target near: eb rel8 + NOP3", []string{"X86_FEATURE_ALWAYS"},
			"e9 00 00 00 00", jmpTo(tText + 0x40), AltInstr{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 5, ReplLen: 5},
			hx(t, "eb 3e 0f 1f 00")},
		{"jmp replacement, target 129 bytes on: still eb (n_dspl-2 = 127)", []string{"X86_FEATURE_ALWAYS"},
			"e9 00 00 00 00", jmpTo(tText + 129), AltInstr{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 5, ReplLen: 5},
			hx(t, "eb 7f 0f 1f 00")},
		{"jmp replacement, target 130 bytes on: e9 rel32", []string{"X86_FEATURE_ALWAYS"},
			"e9 00 00 00 00", jmpTo(tText + 130), AltInstr{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 5, ReplLen: 5},
			cat([]byte{0xe9}, rel32(tText, 5, tText+130))},
		{"jmp replacement, backwards target: always e9 (recompute_jump's negative test)", []string{"X86_FEATURE_ALWAYS"},
			"e9 00 00 00 00", jmpTo(tText - 0x10), AltInstr{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 5, ReplLen: 5},
			cat([]byte{0xe9}, rel32(tText, 5, tText-0x10))},
		{"2-byte jmp replacement: copied as is", []string{"X86_FEATURE_ALWAYS"},
			"90 90", hx(t, "eb 05"), AltInstr{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 2, ReplLen: 2},
			hx(t, "eb 05")},
		{"empty replacement: NOP5", []string{"X86_FEATURE_SMAP"},
			"e9 10 00 00 00", nil, AltInstr{Instr: tText, Repl: tRepl, CPUID: smap, InstrLen: 5, ReplLen: 0},
			hx(t, "0f 1f 44 00 00")},
		{"ALT_NOT with the feature present: kept", []string{"X86_FEATURE_SMAP"},
			"48 89 c7", hx(t, "90 90 90"), AltInstr{Instr: tText, Repl: tRepl, CPUID: smap | FlagInv, InstrLen: 3, ReplLen: 3},
			hx(t, "48 89 c7")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, text := runAlt(t, hx(t, c.orig), c.repl, []AltInstr{c.alt}, cpuWith(t, c.cpu...))
			got := text[:c.alt.InstrLen]
			if !bytes.Equal(got, c.want) {
				t.Fatalf("patched % x, want % x", got, c.want)
			}
			if text[c.alt.InstrLen] != 0xcc {
				t.Fatalf("wrote past the site: % x", text[:c.alt.InstrLen+1])
			}
			if r := p.Sites[len(p.Sites)-1]; !bytes.Equal(r.After, c.want) {
				t.Fatalf("record After % x, want % x", r.After, c.want)
			}
		})
	}
}

// TestAlternativeTernary: static_cpu_has' ALTERNATIVE_TERNARY is two
// entries on one site, applied in table order: ALWAYS writes "jmp t_no",
// then the feature's empty replacement NOPs it out when present.
func TestAlternativeTernary(t *testing.T) {
	smap := func() uint16 { f, _ := FeatureByName("X86_FEATURE_SMAP"); return uint16(f) }()
	tNo := uint64(tText + 0x30)
	orig := cat([]byte{0xe9}, rel32(tText, 5, tText+0x1000)) // jmp 6f (.altinstr_aux)
	repl := cat([]byte{0xe9}, rel32(tRepl, 5, tNo))
	alts := []AltInstr{
		{Instr: tText, Repl: tRepl, CPUID: uint16(X86_FEATURE_ALWAYS), InstrLen: 5, ReplLen: 5},
		{Instr: tText, Repl: tRepl + 5, CPUID: smap, InstrLen: 5, ReplLen: 0},
	}
	_, text := runAlt(t, orig, repl, alts, cpuWith(t, "X86_FEATURE_ALWAYS"))
	if got, want := hexOf(text[:5]), "eb 2e 0f 1f 00"; got != want {
		t.Errorf("without the feature: % s, want %s", got, want)
	}
	_, text = runAlt(t, orig, repl, alts, cpuWith(t, "X86_FEATURE_ALWAYS", "X86_FEATURE_SMAP"))
	if got, want := hexOf(text[:5]), "0f 1f 44 00 00"; got != want {
		t.Errorf("with the feature: %s, want %s", got, want)
	}
}

// TestParavirtThenAlternative: alternative_instructions' order: the pv
// call is made direct first, then the ALT_NOT(XENPV) inline form
// replaces it.
func TestParavirtThenAlternative(t *testing.T) {
	xenpv := uint16(X86_FEATURE_XENPV)
	for _, c := range []struct {
		cpu  []string
		want []byte
	}{
		{nil, hx(t, "9c 58 0f 1f 40 00")}, // pushf; pop %rax; NOP4
		{[]string{"X86_FEATURE_XENPV"}, cat([]byte{0xe8}, rel32(tText, 5, tSaveFl), hx(t, "90"))},
	} {
		m := &mem{}
		text := hx(t, "ff 15 f2 ff ff ff cc")
		m.add(tText, text)
		m.add(tRepl, hx(t, "9c 58"))
		p := &Patcher{CPU: cpuWith(t, c.cpu...), Env: testEnv(), Mem: m}
		err := p.AlternativeInstructions(&Tables{
			Para:         []ParaSite{{Instr: tText, Type: 1, Len: 6}},
			Alternatives: []AltInstr{{Instr: tText, Repl: tRepl, CPUID: xenpv | FlagInv, InstrLen: 6, ReplLen: 2}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(text[:6], c.want) {
			t.Errorf("cpu %v: % x, want % x", c.cpu, text[:6], c.want)
		}
	}
}

func TestApplyRetpolines(t *testing.T) {
	thunk := func(reg int) uint64 { return tThunks + uint64(reg)*RetpolineThunkSize }
	call := func(at uint64, reg int) []byte { return cat([]byte{0xe8}, rel32(at, 5, thunk(reg))) }
	jmp := func(at uint64, reg int) []byte { return cat([]byte{0xe9}, rel32(at, 5, thunk(reg))) }
	eibrs := []string{}
	retp := []string{"X86_FEATURE_RETPOLINE"}
	lfence := []string{"X86_FEATURE_RETPOLINE", "X86_FEATURE_RETPOLINE_LFENCE"}
	its := []string{"X86_FEATURE_INDIRECT_THUNK_ITS"}
	lower := uint64(tText + 0x00) // (addr+1)&0x20 == 0: lower half of the line
	upper := uint64(tText + 0x20)
	cases := []struct {
		name   string
		cpu    []string
		at     uint64
		site   []byte
		want   []byte
		action string
	}{
		{"eIBRS: call *%rax + NOP3", eibrs, upper, call(upper, 0), hx(t, "ff d0 0f 1f 00"), RetpolineIndirect},
		{"eIBRS: call *%r11 + NOP2", eibrs, upper, call(upper, 11), hx(t, "41 ff d3 66 90"), RetpolineIndirect},
		{"eIBRS: jmp *%rax; int3 + NOP2", eibrs, upper, jmp(upper, 0), hx(t, "ff e0 cc 66 90"), RetpolineIndirect},
		{"eIBRS: jmp *%r11; int3; nop", eibrs, upper, jmp(upper, 11), hx(t, "41 ff e3 cc 90"), RetpolineIndirect},
		{"eIBRS: jne.d32 thunk -> je.d8 over jmp *%rax", eibrs, upper,
			cat(hx(t, "0f 85"), rel32(upper, 6, thunk(0))), hx(t, "74 04 ff e0 cc 90"), RetpolineIndirect},
		{"retpoline: kept", retp, upper, call(upper, 0), call(upper, 0), RetpolineKept},
		{"lfence: lfence; call *%rax", lfence, upper, call(upper, 0), hx(t, "0f ae e8 ff d0"), RetpolineLfence},
		{"lfence: jmp *%rax fills the site, no int3", lfence, upper, jmp(upper, 0), hx(t, "0f ae e8 ff e0"), RetpolineLfence},
		{"lfence: r11 needs 6 bytes: left alone", lfence, upper, call(upper, 11), call(upper, 11), RetpolineUnfit},
		{"ITS, lower half: call to the ITS thunk", its, lower, call(lower, 3),
			cat([]byte{0xe8}, rel32(lower, 5, tITS+3*ITSThunkSize)), RetpolineITS},
		{"ITS, upper half: call *%rbx", its, upper, call(upper, 3), hx(t, "ff d3 0f 1f 00"), RetpolineIndirect},
		{"ITS, r8 at +0x1e: opcode byte at +0x20 is upper half", its, tText + 0x1e, call(tText+0x1e, 8), hx(t, "41 ff d0 66 90"), RetpolineIndirect},
		{"not to a thunk: skipped", eibrs, upper, cat([]byte{0xe8}, rel32(upper, 5, tText+0x1000)), nil, SiteSkipped},
		{"not a branch: skipped", eibrs, upper, hx(t, "48 89 c7 90 90"), nil, SiteSkipped},
		{"16 bytes below the thunk array: reg -1, skipped", eibrs, upper, cat([]byte{0xe8}, rel32(upper, 5, tThunks-16)), nil, SiteSkipped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, text, off := siteText(0xcc, c.at, c.site)
			p := &Patcher{CPU: cpuWith(t, c.cpu...), Env: testEnv(), Mem: m, Record: true}
			if err := p.ApplyRetpolines([]uint64{c.at}); err != nil {
				t.Fatal(err)
			}
			wantPatched(t, text, off, c.site, c.want)
			if text[off+uint64(len(c.site))] != 0xcc {
				t.Fatal("wrote past the site")
			}
			if len(p.Sites) != 1 || p.Sites[0].Action != c.action {
				t.Fatalf("records %+v, want action %s", p.Sites, c.action)
			}
		})
	}
}

// siteText is 0x80 bytes of fill at tText with site copied in at at:
// the memory holding it, the text and the site's offset in it.
func siteText(fill byte, at uint64, site []byte) (*mem, []byte, uint64) {
	m := &mem{}
	text := bytes.Repeat([]byte{fill}, 0x80)
	off := at - tText
	copy(text[off:], site)
	m.add(tText, text)
	return m, text, off
}

// wantPatched: the site at off in text now holds want (nil: the site as
// it was).
func wantPatched(t *testing.T, text []byte, off uint64, site, want []byte) {
	t.Helper()
	if want == nil {
		want = site
	}
	if got := text[off : off+uint64(len(site))]; !bytes.Equal(got, want) {
		t.Fatalf("patched % x, want % x", got, want)
	}
}

func TestApplyRetpolinesRSP(t *testing.T) {
	m := &mem{}
	text := cat([]byte{0xe8}, rel32(tText, 5, tThunks+4*RetpolineThunkSize), hx(t, "cc cc cc cc cc cc cc cc cc cc"))
	m.add(tText, text)
	p := &Patcher{CPU: cpuWith(t), Env: testEnv(), Mem: m}
	if err := p.ApplyRetpolines([]uint64{tText}); err == nil || !strings.Contains(err.Error(), "rsp") {
		t.Fatalf("err %v, want the %%rsp BUG", err)
	}
}

func TestApplyReturns(t *testing.T) {
	ret := func(at uint64) []byte { return cat([]byte{0xe9}, rel32(at, 5, tRetThunk)) }
	lower, upper := uint64(tText), uint64(tText+0x20)
	cases := []struct {
		name   string
		cpu    []string
		thunk  uint64 // x86_return_thunk
		at     uint64
		site   []byte
		want   []byte
		action string
	}{
		{"no rethunk: ret; int3 x4", nil, tRetThunk, lower, ret(lower), hx(t, "c3 cc cc cc cc"), ReturnRet},
		{"srso: jmp srso_alias_return_thunk", []string{"X86_FEATURE_RETHUNK"}, tSRSORet, lower, ret(lower),
			cat([]byte{0xe9}, rel32(lower, 5, tSRSORet)), ReturnThunk},
		{"its_return_thunk, lower half: jmp its_return_thunk", []string{"X86_FEATURE_RETHUNK"}, tITSRet, lower, ret(lower),
			cat([]byte{0xe9}, rel32(lower, 5, tITSRet)), ReturnThunk},
		{"its_return_thunk, upper half: ret", []string{"X86_FEATURE_RETHUNK"}, tITSRet, upper, ret(upper), hx(t, "c3 cc cc cc cc"), ReturnRet},
		{"not the return thunk: skipped", nil, tRetThunk, lower, cat([]byte{0xe9}, rel32(lower, 5, tText+0x100)), nil, SiteSkipped},
		{"static-call trampoline, jmp to the thunk: RET form", nil, tRetThunk, lower, cat(ret(lower), hx(t, "0f b9 cc")),
			hx(t, "c3 cc cc cc cc 0f b9 cc"), ReturnTramp},
		{"static-call trampoline with rethunk: jmp x86_return_thunk", []string{"X86_FEATURE_RETHUNK"}, tSRSORet, lower, cat(ret(lower), hx(t, "0f b9 cc")),
			cat([]byte{0xe9}, rel32(lower, 5, tSRSORet), hx(t, "0f b9 cc")), ReturnTramp},
		{"static-call trampoline to a function: left alone", nil, tRetThunk, lower,
			cat([]byte{0xe9}, rel32(lower, 5, tSaveFl), hx(t, "0f b9 cc")), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, text, off := siteText(0x90, c.at, c.site)
			env := testEnv()
			env.XReturnThunk = c.thunk
			p := &Patcher{CPU: cpuWith(t, c.cpu...), Env: env, Mem: m, Record: true}
			if err := p.ApplyReturns([]uint64{c.at}); err != nil {
				t.Fatal(err)
			}
			wantPatched(t, text, off, c.site, c.want)
			if c.action == "" {
				if len(p.Sites) != 0 {
					t.Fatalf("records %+v, want none", p.Sites)
				}
				return
			}
			if len(p.Sites) != 1 || p.Sites[0].Action != c.action {
				t.Fatalf("records %+v, want action %s", p.Sites, c.action)
			}
		})
	}
}
