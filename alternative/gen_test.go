package alternative

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// TestGenerationFeatureBits: the bits the patch functions test, read
// from each generation's generated table, are cpufeatures.h's (they
// move between generations: X86_FEATURE_INDIRECT_THUNK_ITS is 21*32+5
// in 6.1, +6 in 6.12, +10 in 7.3), and the 6.1 model keeps the
// hand-written constants.
func TestGenerationFeatureBits(t *testing.T) {
	for _, c := range []struct {
		g                 image.Generation
		its, depth, ncap  Feature
		retpoline, rethnk Feature
	}{
		{image.Gen61, 21*32 + 5, noFeature, 22 * 32, 11*32 + 12, 11*32 + 14},
		{image.Gen612, 21*32 + 6, 11*32 + 19, 22 * 32, 11*32 + 12, 11*32 + 14},
		{image.Gen73, 21*32 + 10, 11*32 + 19, 22 * 32, 11*32 + 12, 11*32 + 14},
	} {
		b := ModelFor(c.g).bits
		if b.INDIRECT_THUNK_ITS != c.its || b.CALL_DEPTH != c.depth || b.RETPOLINE != c.retpoline || b.RETHUNK != c.rethnk {
			t.Errorf("%v: bits %+v", c.g, b)
		}
		if f, _ := ModelFor(c.g).FeatureByName("X86_BUG_F00F"); f != c.ncap {
			t.Errorf("%v: X86_BUG(0) = %d, want NCAPINTS*32 = %d", c.g, f, c.ncap)
		}
	}
	if model61.bits.INDIRECT_THUNK_ITS != X86_FEATURE_INDIRECT_THUNK_ITS || model61.bits.RETPOLINE_LFENCE != X86_FEATURE_RETPOLINE_LFENCE {
		t.Error("6.1 model disagrees with the constants")
	}
	// Every /proc/cpuinfo name of 6.1 names a feature of featureNames.
	for k, n := range cpuinfoNames61 {
		if _, ok := featureNames[n]; !ok {
			t.Errorf("cpuinfo %q -> %s not in featureNames", k, n)
		}
	}
}

// TestForGenRenumbers: a preset keeps its named bits in every
// generation, renumbered; names a generation lacks are listed.
func TestForGenRenumbers(t *testing.T) {
	c, _ := LookupCPU("genoa")
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		d, err := c.ForGen(g)
		if err != nil {
			t.Fatal(err)
		}
		m := ModelFor(g)
		for _, w := range c.Why {
			f, ok := m.FeatureByName(w.Name)
			if ok != d.Features.Has(f) && ok {
				t.Errorf("%v: %s lost", g, w.Name)
			}
		}
		if d.SpectreV2Mode() != c.SpectreV2Mode() || d.WantsRethunk() != c.WantsRethunk() {
			t.Errorf("%v: modes changed: %s", g, d.Summary())
		}
		if g == image.Gen73 && strings.Join(d.Dropped, ",") != "" && !strings.Contains(strings.Join(d.Dropped, ","), "X86_FEATURE_") {
			t.Errorf("dropped %v", d.Dropped)
		}
	}
	if d, _ := c.ForGen(image.Gen61); d != c {
		t.Error("ForGen(6.1) of a 6.1 CPU must be the CPU itself")
	}
}

func TestParseAltInstructions14(t *testing.T) {
	const base = 0xffffffff83706558
	e := make([]byte, 2*AltInstrSize14)
	put := func(i int, instr, repl int32, cpuid, flags uint16, il, rl byte) {
		b := e[i*AltInstrSize14:]
		binary.LittleEndian.PutUint32(b, uint32(instr))
		binary.LittleEndian.PutUint32(b[4:], uint32(repl))
		binary.LittleEndian.PutUint16(b[8:], cpuid)
		binary.LittleEndian.PutUint16(b[10:], flags)
		b[12], b[13] = il, rl
	}
	put(0, -0x100, 0x2000, 8*32+16, AltFlagNot|AltFlagDirectCall, 6, 5)
	put(1, -0x200, 0x3000, 3*32+21, 0, 5, 0)
	a, err := ParseAltInstructions14(e, base)
	if err != nil {
		t.Fatal(err)
	}
	if a[0].Instr != base-0x100 || a[0].Repl != base+4+0x2000 || a[0].Feature() != 8*32+16 || !a[0].Inv() || !a[0].DirectCall() || a[0].InstrLen != 6 || a[0].ReplLen != 5 {
		t.Errorf("entry 0: %+v", a[0])
	}
	if a[1].Inv() || a[1].DirectCall() || a[1].Instr != base+14-0x200 {
		t.Errorf("entry 1: %+v", a[1])
	}
	for _, bad := range [][]byte{e[:13], append(bytes.Clone(e[:12]), 255, 1)} {
		if _, err := ParseAltInstructions14(bad, base); err == nil {
			t.Errorf("% x accepted", bad)
		}
	}
	b := bytes.Clone(e[:14])
	binary.LittleEndian.PutUint16(b[8:], 24*32)
	if _, err := ParseAltInstructions14(b, base); err == nil || !strings.Contains(err.Error(), "capability array") {
		t.Errorf("feature past the array: %v", err)
	}
}

func TestOptimizeNopsGen(t *testing.T) {
	for _, c := range []struct {
		g       image.Generation
		in, out string
	}{
		{image.Gen612, "ff d0 90 90 90", "ff d0 0f 1f 00"},
		{image.Gen612, "90 90 90 90 90 90", "66 0f 1f 44 00 00"},
		{image.Gen612, "e8 00 00 00 00 90", "e8 00 00 00 00 90"}, // a last single NOP is left
		{image.Gen612, "48 89 c0 90", "48 89 c0 90"},             // mov is no NOP in 6.12
		{image.Gen73, "48 89 c0 90", "0f 1f 40 00"},              // ... it is in 7.3
		{image.Gen73, "89 c0 90 90", "89 c0 66 90"},              // mov %eax,%eax zero-extends: not a NOP
		{image.Gen73, "8d 76 00 90", "8d 76 00 90"},              // lea 0(%rsi),%esi is 32-bit: not native size
		{image.Gen73, "48 8d 76 00 90 90", "66 0f 1f 44 00 00"},  // lea 0(%rsi),%rsi is one: one run of 6
		{image.Gen73, "f3 90 90 90", "f3 90 66 90"},              // pause is no NOP
		{image.Gen612, strings.Repeat("90 ", 13), "eb 0b cc cc cc cc cc cc cc cc cc cc cc"},
		{image.Gen612, strings.Repeat("90 ", 11), "66 66 2e 0f 1f 84 00 00 00 00 00"},
	} {
		m := ModelFor(c.g)
		in := hx(t, c.in)
		buf := make([]byte, MaxPatchLen)
		copy(buf, in)
		m.optimizeNops(buf, len(in))
		if got := hexOf(buf[:len(in)]); got != hexOf(hx(t, c.out)) {
			t.Errorf("%v optimize_nops(%s) = %s, want %s", c.g, c.in, got, c.out)
		}
	}
}

func TestApplyRelocation(t *testing.T) {
	const instr, repl = 0xffffffff81001000, 0xffffffff83725dc8
	// call rel32 to a target outside the replacement: re-based.
	buf := make([]byte, MaxPatchLen)
	copy(buf, cat([]byte{0xe8}, rel32(repl, 5, 0xffffffff81d0d1b0)))
	if n, err := model612.applyRelocation(buf, instr, 5, repl, 5); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if got := hexOf(buf[:5]); got != hexOf(cat([]byte{0xe8}, rel32(instr, 5, 0xffffffff81d0d1b0))) {
		t.Errorf("call re-based to %s", got)
	}
	// jmp rel32 to just past the site: re-based then shortened to jmp.d8 + int3.
	buf = make([]byte, MaxPatchLen)
	copy(buf, cat([]byte{0xe9}, rel32(repl, 5, instr+5+0x10)))
	if _, err := model612.applyRelocation(buf, instr, 5, repl, 5); err != nil {
		t.Fatal(err)
	}
	if got := hexOf(buf[:5]); got != "eb 13 cc cc cc" {
		t.Errorf("jmp = %s, want eb 13 cc cc cc", got)
	}
	// rip-relative mov: re-based; a jump inside the block: not.
	buf = make([]byte, MaxPatchLen)
	copy(buf, cat([]byte{0x48, 0x8b, 0x05}, rel32(repl, 7, 0xffffffff82c35440), []byte{0xeb, 0x00}))
	if n, err := model612.applyRelocation(buf, instr, 9, repl, 9); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if got := hexOf(buf[:9]); got != hexOf(cat([]byte{0x48, 0x8b, 0x05}, rel32(instr, 7, 0xffffffff82c35440), []byte{0xeb, 0x00})) {
		t.Errorf("mov = %s", got)
	}
}

// TestDirectCall: a 6.12 pv call "call *pv_ops+8(%rip)" under
// ALT_NOT(XENPV) | ALT_DIRECT_CALL becomes "call <slot>" + NOP1, and
// one whose slot is nop_func a single 6-byte NOP.
func TestDirectCall(t *testing.T) {
	const (
		text  = 0xffffffff81001000
		repl  = 0xffffffff83725dc8
		pvops = 0xffffffff82c35440
		bug   = 0xffffffff81d0d1b0
		nop   = 0xffffffff81e022e0
		fn    = 0xffffffff81a45ff0
	)
	mm := &mem{}
	site := func(at uint64, slot int) []byte {
		return cat([]byte{0xff, 0x15}, rel32(at, 6, pvops+uint64(8*slot)))
	}
	tx := cat(site(text, 1), site(text+6, 2))
	mm.add(text, tx)
	mm.add(repl, cat([]byte{0xe8}, rel32(repl, 5, bug), []byte{0xe8}, rel32(repl+5, 5, bug)))
	pv := make([]byte, 24)
	binary.LittleEndian.PutUint64(pv[8:], fn)
	binary.LittleEndian.PutUint64(pv[16:], nop)
	mm.add(pvops, pv)
	c, _ := cpuWith(t).ForGen(image.Gen612)
	p := &Patcher{Model: ModelFor(image.Gen612), CPU: c, Mem: mm, Env: &Env{BUGFunc: bug, NopFunc: nop}}
	xenpv := uint16(8*32 + 16)
	alts := []AltInstr{
		{Instr: text, Repl: repl, CPUID: xenpv, Flags: AltFlagNot | AltFlagDirectCall, InstrLen: 6, ReplLen: 5},
		{Instr: text + 6, Repl: repl + 5, CPUID: xenpv, Flags: AltFlagNot | AltFlagDirectCall, InstrLen: 6, ReplLen: 5},
	}
	if err := applyAlternatives612(p, alts); err != nil {
		t.Fatal(err)
	}
	want := cat([]byte{0xe8}, rel32(text, 5, fn), []byte{0x90}, Nop(6))
	if !bytes.Equal(tx, want) {
		t.Errorf("patched % x, want % x", tx, want)
	}
	if s := p.Stats.Alternatives; s.DirectCall != 1 || s.DirectNop != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestEmitIndirect73(t *testing.T) {
	for _, c := range []struct {
		op         byte
		reg, space int
		want       string
	}{
		{x86CALL, 0, 5, "2e 2e 2e ff d0"},
		{x86CALL, 11, 5, "2e 2e 41 ff d3"},
		{x86CALL, 0, 6, "ff d0"}, // 4 excess bytes: NOPs instead of prefixes
		{x86JMP32, 0, 5, "ff e0 cc cc cc"},
		{x86JMP32, 9, 6, "41 ff e1 cc cc cc"},
	} {
		b := make([]byte, 16)
		n := emitIndirect73(c.op, c.reg, b, c.space)
		if got := hexOf(b[:n]); got != c.want {
			t.Errorf("emit_indirect(%#x, r%d, %d) = %s, want %s", c.op, c.reg, c.space, got, c.want)
		}
	}
}

func TestSealEndbr(t *testing.T) {
	const text = 0xffffffff81001000
	tx := hx(t, "f3 0f 1e fa 55 f3 0f 1e fa 90 90 90 90")
	mm := &mem{}
	mm.add(text, tx)
	c, _ := cpuWith(t).ForGen(image.Gen73)
	p := &Patcher{Model: ModelFor(image.Gen73), CPU: c, Mem: mm, Env: &Env{}, Record: true}
	if err := p.ApplySealEndbr([]uint64{text, text + 5, text + 9}); err != nil {
		t.Fatal(err)
	}
	if got := hexOf(tx); got != "0f 1f 40 d6 55 0f 1f 40 d6 90 90 90 90" {
		t.Errorf("sealed %s", got)
	}
	if s := p.Stats.Seal; s.Poisoned != 2 || s.NotEndbr != 1 {
		t.Errorf("stats %+v", s)
	}
}

// hostInfo is this machine's kind of /proc/cpuinfo (a KVM guest on an
// Intel part without eIBRS exposed, with retbleed and ITS).
const hostInfo = `processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 207
model name	: Intel(R) Xeon(R) Processor
flags		: fpu sse2 nx lm constant_tsc rep_good nopl cpuid pni pcid sse4_1 popcnt xsave avx rdrand hypervisor fsgsbase erms invpcid smap clflushopt clwb xsaveopt xsavec xsaves umip fsrm arch_capabilities
bugs		: spectre_v1 spectre_v2 spec_store_bypass swapgs taa retbleed bhi spectre_v2_user its

processor	: 1
flags		: fpu
`

func TestHostCPUFromCPUInfo(t *testing.T) {
	ci, err := ParseCPUInfo(strings.NewReader(hostInfo))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range image.Generations {
		c, err := ci.CPU(g)
		if err != nil {
			t.Fatal(err)
		}
		m := ModelFor(g)
		if c.Name != CPUHost || c.Model() != m || c.SpectreV2Mode() != "retpoline" || c.ReturnThunk != "its_return_thunk" || !c.WantsRethunk() {
			t.Errorf("%v: %s", g, c.Summary())
		}
		for _, n := range []string{"HYPERVISOR", "FSRM", "ALWAYS", "X86_BUG_ITS", "X86_BUG_RETBLEED", "RSB_CTXSW", "FENCE_SWAPGS_USER", "CLEAR_CPU_BUF"} {
			if f, ok := m.FeatureByName(n); !ok || !c.Has(f) {
				t.Errorf("%v: %s not set", g, n)
			}
		}
		// ITS with retpolines: no per-branch ITS thunks, returns via the ITS thunk.
		if c.Has(m.bits.INDIRECT_THUNK_ITS) {
			t.Errorf("%v: INDIRECT_THUNK_ITS with retpolines", g)
		}
		if !strings.Contains(c.Summary(), "Intel(R) Xeon(R) Processor") || !strings.Contains(c.Summary(), "arch_capabilities") {
			t.Errorf("summary does not name the model and flags: %s", c.Summary())
		}
		d, err := c.ForGen(image.Gen73)
		if err != nil || d.Model() != model73 || !d.Has(model73.bits.RETHUNK) {
			t.Errorf("ForGen(7.3) of host: %v", err)
		}
	}
	// Zen 4: Safe RET through srso_alias_return_thunk, AutoIBRS-less
	// flags here so retpolines.
	amd := strings.NewReplacer("GenuineIntel", "AuthenticAMD", "cpu family\t: 6", "cpu family\t: 25", "taa retbleed bhi spectre_v2_user its", "srso").Replace(hostInfo)
	ci, err = ParseCPUInfo(strings.NewReader(amd))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := ci.CPU(image.Gen612)
	if c.ReturnThunk != "srso_alias_return_thunk" || !c.WantsRethunk() {
		t.Errorf("AMD family 0x19: %s", c.Summary())
	}
	if _, err := ParseCPUInfo(strings.NewReader("processor : 0\n")); err == nil {
		t.Error("cpuinfo without flags accepted")
	}
}

// TestHostCPU: --cpu host on this machine.
func TestHostCPU(t *testing.T) {
	if _, err := os.Stat(CPUInfoPath); err != nil {
		t.Skip("no /proc/cpuinfo")
	}
	c, err := LookupCPU(CPUHost)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != CPUHost || !c.Has(X86_FEATURE_ALWAYS) || len(c.Features.List()) < 10 {
		t.Fatalf("host CPU %s", c.Summary())
	}
	t.Log(c.Summary())
	for _, l := range c.Mitigations {
		t.Log(l)
	}
}

// TestKexecSkipRange: skip_addr's relocate_kernel range is the model's
// (6.12: relocate_kernel + KEXEC_CONTROL_CODE_MAX_SIZE; 7.3:
// [__relocate_kernel_start, __relocate_kernel_end)), whichever symbols
// the image also has (the 7.3 -dbg System.map has relocate_kernel at
// __relocate_kernel_start); 6.1 has no call thunks.
func TestKexecSkipRange(t *testing.T) {
	syms := map[string]uint64{
		"__x86_return_thunk": 0xffffffff82000000, "nop_func": 0xffffffff81000010, "BUG_func": 0xffffffff81000020,
		"_paravirt_nop":   0xffffffff81000030,
		"relocate_kernel": 0xffffffff8354e300, "__relocate_kernel_start": 0xffffffff8354e300, "__relocate_kernel_end": 0xffffffff8354e980,
	}
	all := func(n string) (uint64, bool) { a, ok := syms[n]; return a, ok }
	only := func(names ...string) func(string) (uint64, bool) {
		return func(n string) (uint64, bool) {
			if strings.HasPrefix(n, "__relocate") || n == "relocate_kernel" {
				found := false
				for _, w := range names {
					found = found || w == n
				}
				if !found {
					return 0, false
				}
			}
			return all(n)
		}
	}
	for _, c := range []struct {
		name   string
		g      image.Generation
		lookup func(string) (uint64, bool)
		want   [][2]uint64
	}{
		{"6.12", image.Gen612, all, [][2]uint64{{0xffffffff8354e300, 0xffffffff8354eb00}}},
		{"7.3", image.Gen73, all, [][2]uint64{{0xffffffff8354e300, 0xffffffff8354e980}}},
		{"6.12 without kexec", image.Gen612, only(), nil},
		{"7.3 without __relocate_kernel_end", image.Gen73, only("relocate_kernel", "__relocate_kernel_start"), nil},
		{"7.3 with only relocate_kernel", image.Gen73, only("relocate_kernel"), nil},
	} {
		m := ModelFor(c.g)
		e, err := m.NewEnv(c.lookup, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if e.CallThunks == nil || len(e.CallThunks.SkipRanges) != len(c.want) {
			t.Errorf("%s: skip ranges %+v, want %x", c.name, e.CallThunks, c.want)
			continue
		}
		for i, r := range c.want {
			if e.CallThunks.SkipRanges[i] != r {
				t.Errorf("%s: skip range %x, want %x", c.name, e.CallThunks.SkipRanges[i], r)
			}
		}
	}
	if r := model61.kexecSkip.symbols(); r != nil {
		t.Errorf("6.1 reads kexec symbols %v", r)
	}
	e, err := model61.NewEnv(all, nil, nil, nil)
	if err != nil || e.CallThunks != nil {
		t.Errorf("6.1: call thunk env %+v, %v", e, err)
	}
}

// TestParseCPUInfoNumbers: "cpu family" and "model" are show_cpuinfo's
// decimal __u8 values; anything else is refused with the line named,
// never read as family 0 / model 0.
func TestParseCPUInfoNumbers(t *testing.T) {
	for _, c := range []struct {
		name, in      string
		family, model int
		err           string // substring of the error; "" = parses
	}{
		{"both", "vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 17\nflags : fpu\n", 25, 17, ""},
		{"absent", "flags : fpu\n", -1, -1, ""},
		{"hex family", "vendor_id : AuthenticAMD\ncpu family : 0x19\nflags : fpu\n", 0, 0, `line 2: cpu family "0x19" is not`},
		{"empty model", "cpu family : 6\nmodel :\nflags : fpu\n", 0, 0, `line 2: model "" is not`},
		{"negative model", "model : -1\nflags : fpu\n", 0, 0, `line 1: model "-1" is not`},
		{"model past u8", "cpu family\t: 6\nmodel\t\t: 256\nflags : fpu\n", 0, 0, `line 2: model "256" is not`},
		{"word", "\ncpu family : six\nflags : fpu\n", 0, 0, `line 2: cpu family "six" is not`},
	} {
		ci, err := ParseCPUInfo(strings.NewReader(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		case c.err == "" && (ci.Family != c.family || ci.Model != c.model):
			t.Errorf("%s: family %d model %d, want %d %d", c.name, ci.Family, ci.Model, c.family, c.model)
		}
	}
}
