package alternative

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/kpsim/kpsim/x86"
)

// Alternative site results of 6.12 and 7.3.
const (
	AltDirectCall = "direct call" // ALT_FLAG_DIRECT_CALL: call <pv_ops target>
	AltDirectNop  = "nop"         // ALT_FLAG_DIRECT_CALL to nop_func: the whole site is one NOP
)

// alternativeInstructions612: retpolines, returns, alternatives, call
// thunks, ENDBR sealing (__apply_fineibt does nothing on Debian's gcc
// build: no CONFIG_FINEIBT).
//
// Models arch/x86/kernel/alternative.c:alternative_instructions (6.12).
func alternativeInstructions612(p *Patcher, t *Tables) error {
	if err := p.ApplyRetpolines(t.Retpolines); err != nil {
		return err
	}
	if err := p.ApplyReturns(t.Returns); err != nil {
		return err
	}
	if err := p.model().applyAlternatives(p, t.Alternatives); err != nil {
		return err
	}
	if err := p.CallthunksPatchBuiltinCalls(t); err != nil {
		return err
	}
	return p.ApplySealEndbr(t.EndbrSeal)
}

// alternativeInstructions73: retpolines, returns, call thunks (before
// the alternatives: "adjust all CALL instructions to point to func()-10,
// including those in .altinstr_replacement"), alternatives, ENDBR
// sealing.
//
// Models arch/x86/kernel/alternative.c:alternative_instructions (7.3).
func alternativeInstructions73(p *Patcher, t *Tables) error {
	if err := p.ApplyRetpolines(t.Retpolines); err != nil {
		return err
	}
	if err := p.ApplyReturns(t.Returns); err != nil {
		return err
	}
	// its_fini_core: page protection of the ITS thunk pages, no text.
	if err := p.CallthunksPatchBuiltinCalls(t); err != nil {
		return err
	}
	if err := p.model().applyAlternatives(p, t.Alternatives); err != nil {
		return err
	}
	return p.ApplySealEndbr(t.EndbrSeal)
}

// insnIsNop612 matches NOP (not REP NOP) and NOPL.
//
// Models arch/x86/kernel/alternative.c:insn_is_nop (6.12).
func insnIsNop612(in x86.Insn) bool {
	if in.Opcode[0] == x86NOP1 && (in.PrefixLen == 0 || in.Prefixes[0] != 0xf3) {
		return true
	}
	return in.Opcode[0] == 0x0f && in.Opcode[1] == 0x1f
}

// insnIsNop73 recognises NOP (not PAUSE, not xchg %r8,%rax), NOPL /0,
// native-size "mov %reg,%reg", "lea 0(%reg),%reg" (DS prefix only) and
// "jmp +0"; never VEX-encoded instructions. (REX2 is not decoded by
// package x86; no kernel text uses it.)
//
// Models arch/x86/lib/insn-eval.c:insn_is_nop (7.3).
func insnIsNop73(in x86.Insn) bool {
	if in.VEXLen > 0 {
		return false
	}
	var r3, x3, b3 byte
	if in.REX != 0 {
		r3, x3, b3 = (in.REX>>2)&1, (in.REX>>1)&1, in.REX&1
	}
	mod := in.ModRMMod()
	reg := in.ModRMReg() + 8*r3
	rm := in.ModRMRM() + 8*b3
	hasSIB := in.HasSIB
	var scale, index byte
	if hasSIB {
		scale = in.SIB >> 6
		index = (in.SIB>>3)&7 + 8*x3
		rm = in.SIB&7 + 8*b3
	}
	rep := false
	for i := 0; i < in.NPrefixes; i++ {
		if in.Prefixes[i] == 0xf3 {
			rep = true
		}
	}
	switch in.Opcode[0] {
	case 0x0f:
		return in.Opcode[1] == 0x1f && reg == 0
	case 0x89: // MOV
		if mod != 3 || in.OpndBytes != 8 {
			return false
		}
		return reg == rm
	case 0x8d: // LEA
		if mod == 0 || mod == 3 || in.OpndBytes != 8 || in.Disp != 0 {
			return false
		}
		if hasSIB && (scale != 0 || index != 4) {
			return false
		}
		for i := 0; i < in.NPrefixes; i++ {
			if in.Prefixes[i] != 0x3e {
				return false
			}
		}
		return reg == rm
	case x86NOP1:
		return b3 == 0 && !rep
	case x86JMP32, x86JMP8:
		return in.Imm == 0
	}
	return false
}

// addNop fills b with one instruction: x86_nops[len] up to ASM_NOP_MAX,
// else a jmp over int3 padding (jmp.d8 under 128 bytes).
//
// Models arch/x86/kernel/alternative.c:add_nop (6.12, 7.3).
func (m *Model) addNop(b []byte) {
	n := len(b)
	switch {
	case n == 0:
	case n <= m.NopMax:
		copy(b, x86Nops[n])
	default:
		i := 0
		if n < 128 {
			b[0], b[1] = x86JMP8, byte(n-2)
			i = 2
		} else {
			b[0] = x86JMP32
			binary.LittleEndian.PutUint32(b[1:], uint32(n-5))
			i = 5
		}
		for ; i < n; i++ {
			b[i] = x86INT3
		}
	}
}

// skipNops returns the offset of the first non-NOP instruction from off
// on, at most n.
//
// Models arch/x86/kernel/alternative.c:skip_nops.
func (m *Model) skipNops(buf []byte, off, n int) int {
	for off < n {
		in, err := m.Insn.DecodeKernel(nil, window(buf, off))
		if err != nil || !m.insnIsNop(in) {
			break
		}
		off += in.Len
	}
	return off
}

// window is the decoder's view of buf from off: the kernel's decoder reads
// up to 15 bytes (MAX_INSN_SIZE) of its buffer, which is MAX_PATCH_LEN
// long; bytes past the site read as zero here. Simulator helper: no
// kernel function of its own.
func window(buf []byte, off int) []byte {
	if off+15 <= len(buf) {
		return buf[off : off+15]
	}
	w := make([]byte, 15)
	copy(w, buf[off:])
	return w
}

// optimizeNops612 rewrites every run of NOP instructions in buf[:n] that
// does not end the buffer as one add_nop instruction. It returns the
// runs rewritten, or -(runs+1) when decoding stopped early.
//
// Models arch/x86/kernel/alternative.c:optimize_nops (6.12, 7.3).
func (m *Model) optimizeNops(buf []byte, n int) int {
	runs := 0
	for i := 0; i < n; {
		in, err := m.Insn.DecodeKernel(nil, window(buf, i))
		if err != nil {
			return -(runs + 1)
		}
		next := i + in.Len
		if m.insnIsNop(in) {
			// Has the NOP already been optimized?
			if next == n {
				return runs
			}
			next = m.skipNops(buf, next, n)
			m.addNop(buf[i:next])
			runs++
		}
		i = next
	}
	return runs
}

// retpolineNops61 is the optimize_nops apply_retpolines runs over its
// 16-byte buffer b holding an n-byte replacement, in 6.1: runs of 0x90
// (OptimizeNops).
//
// Models arch/x86/kernel/alternative.c:optimize_nops (6.1.192, as
// apply_retpolines calls it).
func retpolineNops61(_ *Model, b []byte, n int) { OptimizeNops(b[:n]) }

// retpolineNops612 is the optimize_nops apply_retpolines runs over its
// 16-byte buffer b holding an n-byte replacement, in 6.12 and 7.3: any
// NOP the generation's insn_is_nop knows (Model.optimizeNops).
//
// Models arch/x86/kernel/alternative.c:optimize_nops (6.12, 7.3, as
// apply_retpolines calls it).
func retpolineNops612(m *Model, b []byte, n int) { m.optimizeNops(b, n) }

// applyRelocation re-bases the relative branches and RIP-relative
// operands of buf (instrlen bytes copied from repl, replLen long, to be
// written at instr) whose targets lie outside the replacement, and turns
// a jmp.d32 into jmp.d8 + int3 where the re-based displacement fits. It
// returns the fields re-based.
//
// Models arch/x86/kernel/alternative.c:__apply_relocation (6.12, 7.3).
func (m *Model) applyRelocation(buf []byte, instr uint64, instrLen int, repl uint64, replLen int) (int, error) {
	diff := int64(repl - instr)
	needReloc := func(off int64) bool {
		// target = src + offset, outside [src, src+len]
		return off < 0 || off > int64(replLen)
	}
	relocs := 0
	for i := 0; i < instrLen; {
		in, err := m.Insn.DecodeKernel(nil, window(buf, i))
		if err != nil {
			return relocs, nil // WARN_ON_ONCE; the rest is left alone
		}
		next := i + in.Len
		op := in.Opcode[0]
		isBranch := op == x86CALL || op == x86JMP32 || op == x86JMP8 || op >= 0x70 && op <= 0x7f ||
			op == 0x0f && in.Opcode[1] >= 0x80 && in.Opcode[1] <= 0x8f
		if isBranch && in.OpcodeLen >= 1 && (op != 0x0f || in.OpcodeLen == 2) {
			immOff := i + in.Len - in.ImmLen
			if needReloc(int64(next) + in.Imm) {
				if err := applyReloc(buf[immOff:], in.ImmLen, diff); err != nil {
					return relocs, fmt.Errorf("alternative at %#x: %w", instr, err)
				}
				relocs++
			}
			if op == x86JMP32 {
				imm := int32(in.Imm) + int32(diff) + 3
				if imm>>31 == imm>>7 {
					buf[i], buf[i+1] = x86JMP8, byte(int8(imm))
					for j := i + 2; j < next; j++ {
						buf[j] = x86INT3
					}
				}
			}
		}
		if in.RIPRelative() {
			dispOff := i + in.Len - in.ImmLen - in.DispLen
			if needReloc(int64(next) + int64(in.Disp)) {
				if err := applyReloc(buf[dispOff:], in.DispLen, diff); err != nil {
					return relocs, fmt.Errorf("alternative at %#x: %w", instr, err)
				}
				relocs++
			}
		}
		i = next
	}
	return relocs, nil
}

// applyReloc adds diff to the n-byte little-endian field at b, as a
// 32-bit sum that must fit the field (BUG_ON otherwise).
//
// Models arch/x86/kernel/alternative.c:apply_reloc / apply_reloc_n.
func applyReloc(b []byte, n int, diff int64) error {
	var v int32
	switch n {
	case 1:
		v = int32(int8(b[0]))
	case 2:
		v = int32(int16(binary.LittleEndian.Uint16(b)))
	case 4:
		v = int32(binary.LittleEndian.Uint32(b))
	default:
		return fmt.Errorf("relocation of a %d-byte field (BUG in apply_reloc)", n)
	}
	v += int32(diff)
	if v>>31 != v>>(n*8-1) {
		return fmt.Errorf("relocated %d-byte field overflows (BUG_ON in apply_reloc_n)", n)
	}
	switch n {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	}
	return nil
}

// altReplaceCall rewrites the "call BUG_func" replacement in buf to call
// the target of the pv_ops slot the site's "call *disp(%rip)" reads (an
// empty slot keeps BUG_func). It returns 0 when the target is nop_func
// (the site becomes NOPs), else 5.
//
// Models arch/x86/kernel/alternative.c:alt_replace_call (6.12, 7.3).
func (p *Patcher) altReplaceCall(instr uint64, buf []byte, a AltInstr) (int, uint64, error) {
	if a.ReplLen != 5 || buf[0] != x86CALL {
		return 0, 0, fmt.Errorf("alternative at %#x: ALT_FLAG_DIRECT_CALL set for a non-call replacement instruction (BUG)", instr)
	}
	site := p.Mem.Text(instr, 6)
	if a.InstrLen != 6 || len(site) < 6 || site[0] != 0xff || site[1] != 0x15 {
		return 0, 0, fmt.Errorf("alternative at %#x: ALT_FLAG_DIRECT_CALL set for unrecognized indirect call % x (BUG)", instr, site)
	}
	disp := int32(binary.LittleEndian.Uint32(site[2:]))
	slot := instr + uint64(a.InstrLen) + uint64(int64(disp))
	sb := p.Mem.Text(slot, 8)
	if len(sb) < 8 {
		return 0, 0, fmt.Errorf("alternative at %#x: pv_ops slot %#x: %w", instr, slot, ErrUnmapped)
	}
	target := binary.LittleEndian.Uint64(sb)
	if target == 0 {
		target = p.Env.BUGFunc
	}
	rel := int32(binary.LittleEndian.Uint32(buf[1:])) + int32(int64(target-p.Env.BUGFunc))
	binary.LittleEndian.PutUint32(buf[1:], uint32(rel))
	if target == p.Env.NopFunc {
		return 0, target, nil
	}
	return 5, target, nil
}

// patchWanted is the feature test: the feature is present, or absent
// with ALT_FLAG_NOT.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives (6.12) and
// analyze_patch_site (7.3): their boot_cpu_has(a->cpuid) test against
// ALT_FLAG_NOT.
func (p *Patcher) patchWanted(a AltInstr) bool {
	return p.CPU.Features.Has(a.Feature()) != a.Inv()
}

// prepReplacement fills buf (n bytes) with a's replacement as the
// kernel prepares it: copied, a direct call resolved, 0x90-padded and
// relocated. It returns the action. (A site no entry patches keeps its
// original bytes: the caller copies them.)
//
// Models arch/x86/kernel/alternative.c:prep_patch_site (7.3; 6.12 does
// the same steps inline in apply_alternatives: memcpy of the
// replacement, alt_replace_call, 0x90 padding up to instrlen, and
// text_poke_apply_relocation, whose closing optimize_nops is the
// caller's).
func (p *Patcher) prepReplacement(a AltInstr, instr uint64, buf []byte, n int) (string, error) {
	st := &p.Stats.Alternatives
	repl := p.Mem.Text(a.Repl, int(a.ReplLen))
	if len(repl) < int(a.ReplLen) {
		return "", fmt.Errorf("alternative at %#x: replacement %#x (+%d bytes): %w", instr, a.Repl, a.ReplLen, ErrUnmapped)
	}
	copy(buf, repl)
	sz := int(a.ReplLen)
	action := AltReplaced
	if a.DirectCall() {
		var err error
		if sz, _, err = p.altReplaceCall(instr, buf, a); err != nil {
			return "", err
		}
		if sz == 0 {
			action = AltDirectNop
			st.DirectNop++
		} else {
			action = AltDirectCall
			st.DirectCall++
		}
	}
	for ; sz < n; sz++ {
		buf[sz] = x86NOP1
	}
	r, err := p.model().applyRelocation(buf, instr, n, a.Repl, int(a.ReplLen))
	st.Relocs += r
	return action, err
}

// applyAlternatives612 patches the entries in table order, each on its
// own: the site's length is the largest instrlen of the consecutive
// entries at the same address (nested ALTERNATIVE_2/_3 sites); a failed
// feature test re-optimizes the NOPs of the site as it stands, a passed
// one writes the prepared replacement.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives (6.12).
func applyAlternatives612(p *Patcher, alts []AltInstr) error {
	st := &p.Stats.Alternatives
	for ai := range alts {
		a := &alts[ai]
		st.Sites++
		for bi := ai + 1; bi < len(alts) && alts[bi].Instr == a.Instr; bi++ {
			l := max(a.InstrLen, alts[bi].InstrLen)
			a.InstrLen, alts[bi].InstrLen = l, l
		}
		if f := a.Feature(); f >= featureLimit {
			return fmt.Errorf("alternative at %#x: feature bit %d is past the capability array", a.Instr, f)
		}
		n := int(a.InstrLen)
		dst, err := p.text("alternative", a.Instr, max(n, int(a.ReplLen)))
		if err != nil {
			return err
		}
		buf := make([]byte, MaxPatchLen)
		if !p.patchWanted(*a) {
			copy(buf, dst[:n])
			p.countNopRuns(p.model().optimizeNops(buf, n))
			p.pokeOrRecord(SiteAlternative, a.Instr, dst[:n], buf[:n], AltKept)
			continue
		}
		action, err := p.prepReplacement(*a, a.Instr, buf, n)
		if err != nil {
			return err
		}
		// text_poke_apply_relocation ends in optimize_nops.
		p.countNopRuns(p.model().optimizeNops(buf, n))
		st.Replaced++
		sz := max(n, int(a.ReplLen))
		p.textPokeEarly(SiteAlternative, a.Instr, dst[:sz], buf[:sz], action)
	}
	return nil
}

// applyAlternatives73 patches site by site: the consecutive entries at
// one address form a site as long as their longest instrlen, the last
// entry whose feature test passes is the one applied (or the original
// when none does), and the site's NOPs are optimized before the write.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives,
// analyze_patch_site, prep_patch_site and patch_site (7.3).
func applyAlternatives73(p *Patcher, alts []AltInstr) error {
	st := &p.Stats.Alternatives
	for i := 0; i < len(alts); {
		instr := alts[i].Instr
		var alt *AltInstr
		n := 0
		j := i
		for ; j < len(alts) && alts[j].Instr == instr; j++ {
			n = max(n, int(alts[j].InstrLen))
			if f := alts[j].Feature(); f >= featureLimit {
				return fmt.Errorf("alternative at %#x: feature bit %d is past the capability array", instr, f)
			}
			if p.patchWanted(alts[j]) {
				alt = &alts[j]
			}
		}
		st.Sites += j - i
		st.Groups++
		i = j
		dst, err := p.text("alternative", instr, n)
		if err != nil {
			return err
		}
		buf := make([]byte, MaxPatchLen)
		action := AltKept
		if alt == nil {
			copy(buf, dst[:n])
		} else {
			if action, err = p.prepReplacement(*alt, instr, buf, n); err != nil {
				return err
			}
			st.Replaced++
		}
		p.countNopRuns(p.model().optimizeNops(buf, n))
		p.pokeOrRecord(SiteAlternative, instr, dst[:n], buf[:n], action)
	}
	return nil
}

// countNopRuns adds an optimize_nops result to Stats. Simulator helper:
// no kernel function of its own.
func (p *Patcher) countNopRuns(r int) {
	if r < 0 {
		p.Stats.Alternatives.Undecodable++
		r = -r - 1
	}
	p.Stats.Alternatives.NopRuns += r
}

// pokeOrRecord writes buf over dst when it differs (text_poke_early
// writes the same bytes back otherwise) and records the site. Simulator
// helper: the text_poke_early of the callers, counted once per change.
func (p *Patcher) pokeOrRecord(kind SiteKind, addr uint64, dst, buf []byte, action string) {
	if bytes.Equal(dst, buf) {
		p.record(kind, addr, dst, action)
		return
	}
	p.textPokeEarly(kind, addr, dst, buf, action)
}

// retpolineSkip73: apply_retpolines (7.3) leaves a Jcc.d8 (FineIBT's
// paranoid caller) and a call/jmp whose destination is preceded by a
// UDB (0xd6) and starts with a Jcc (cfi_paranoid + ITS) alone.
//
// Models arch/x86/kernel/alternative.c:apply_retpolines (7.3: the two
// cases of its opcode switch that continue with WARN_ON_ONCE(cfi_mode !=
// CFI_FINEIBT); 6.1 and 6.12 have neither).
func retpolineSkip73(p *Patcher, addr uint64, in x86.Insn) bool {
	op := in.Opcode[0]
	if op >= 0x70 && op <= 0x7f {
		return true
	}
	if op == x86CALL || op == x86JMP32 {
		d := p.Mem.Text(in.Target(addr)-1, 2)
		return len(d) == 2 && d[0] == 0xd6 && d[1]&0xf0 == 0x70
	}
	return false
}

// Seal results.
const (
	SealPoisoned = "poisoned"
	SealNotEndbr = "not endbr" // WARN_ON_ONCE, left alone
)

// isEndbr is __is_endbr: ENDBR64, ENDBR32 or the generation's poison
// (Model.EndbrPoison, a 4-byte NOP unique to former ENDBR sites).
//
// Models arch/x86/include/asm/ibt.h:is_endbr (6.12) and __is_endbr (7.3).
func isEndbr(b, poison []byte) bool {
	if len(b) < 4 {
		return false
	}
	if bytes.Equal(b[:4], poison) {
		return true
	}
	return b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb)
}

// ApplySealEndbr overwrites the ENDBR of every function objtool found no
// indirect reference to with the 4-byte poison NOP, so an indirect branch
// there faults under IBT. It runs whatever the CPU (the kernel seals at
// every boot of a CONFIG_X86_KERNEL_IBT build; poisoning keeps
// instruction boundaries). Without FineIBT there is no kCFI hash to
// poison.
//
// Models arch/x86/kernel/alternative.c:apply_seal_endbr and
// poison_endbr (6.12, 7.3).
func (p *Patcher) ApplySealEndbr(sites []uint64) error {
	if !p.model().Sealing {
		return nil
	}
	st := &p.Stats.Seal
	for _, addr := range sites {
		st.Sites++
		dst := p.Mem.Text(addr, 4)
		if len(dst) < 4 {
			return fmt.Errorf("ENDBR seal site %#x: %w", addr, ErrUnmapped)
		}
		if !isEndbr(dst, p.model().EndbrPoison) {
			st.NotEndbr++
			p.record(SiteSeal, addr, dst, SealNotEndbr)
			continue
		}
		st.Poisoned++
		p.textPokeEarly(SiteSeal, addr, dst, p.model().EndbrPoison, SealPoisoned)
	}
	return nil
}
