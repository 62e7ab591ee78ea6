package alternative

import (
	"bytes"
	"fmt"

	"github.com/kpsim/kpsim/x86"
)

// Retpoline and return site results.
const (
	RetpolineKept     = "kept"       // RETPOLINE without LFENCE: the thunk call stays
	RetpolineIndirect = "indirect"   // call/jmp *%reg (+ int3 after jmp) + NOPs
	RetpolineLfence   = "lfence"     // lfence; call/jmp *%reg
	RetpolineITS      = "its-thunk"  // call/jmp to an ITS thunk
	RetpolineDepth    = "call-depth" // call/jmp to the call-depth-tracking thunk (6.12, 7.3)
	RetpolineUnfit    = "unfit"      // the replacement's length differs from the site's: untouched
	ReturnRet         = "ret"        // c3 cc cc cc cc
	ReturnThunk       = "thunk"      // jmp x86_return_thunk
	ReturnTramp       = "static-call-tramp"
	SiteSkipped       = "skipped" // WARN_ON_ONCE / WARN_ONCE in the kernel, left alone
)

// RetpolineThunkSize is RETPOLINE_THUNK_SIZE (sizeof retpoline_thunk_t);
// ITSThunkSize is ITS_THUNK_SIZE.
const (
	RetpolineThunkSize = 32
	ITSThunkSize       = 64
)

func isJcc32(in x86.Insn) bool {
	return in.Opcode[0] == 0x0f && in.Opcode[1]&0xf0 == 0x80
}

// emitIndirect61 writes "call *%reg" (ff d0+r) or "jmp *%reg" (ff e0+r),
// with REX.B for r8-r15, and returns its length; the excess bytes are
// left to patch_retpoline.
//
// Models arch/x86/kernel/alternative.c:emit_indirect (6.1, 6.12).
func emitIndirect61(op byte, reg int, b []byte, _ int) int { return emitIndirect(op, reg, b) }

// emitIndirect73 writes "[cs]{,3} call *%reg" or "jmp *%reg [int3]*"
// filling excess bytes past the site's start: a call takes the excess
// as CS prefixes when it is at most 3 ("additional NOP is better than
// prefix decode penalty": more excess is left for NOPs), a jmp is
// followed by int3s.
//
// Models arch/x86/kernel/alternative.c:emit_indirect (7.3).
func emitIndirect73(op byte, reg int, b []byte, excess int) int {
	excess -= 2
	if reg >= 8 {
		excess--
	}
	cs, bp := 0, 0
	switch op {
	case x86CALL:
		if excess <= 3 {
			cs = excess
		}
	case x86JMP32:
		bp = excess
	default:
		return -1
	}
	i := 0
	for ; cs > 0; cs-- {
		b[i] = 0x2e
		i++
	}
	i += emitIndirect(op, reg, b[i:])
	for ; bp > 0; bp-- {
		b[i] = x86INT3
		i++
	}
	return i
}

// emitIndirect writes "call *%reg" (ff d0+r) or "jmp *%reg" (ff e0+r),
// with REX.B for r8-r15, and returns its length. Simulator helper: the
// instruction every generation's emit_indirect writes (emitIndirect61,
// emitIndirect73).
func emitIndirect(op byte, reg int, b []byte) int {
	var modrm byte
	switch op {
	case x86CALL:
		modrm = 0x10
	case x86JMP32:
		modrm = 0x20
	default:
		return -1
	}
	i := 0
	if reg >= 8 {
		b[i] = 0x41
		i++
		reg -= 8
	}
	modrm |= 0xc0
	modrm += byte(reg)
	b[i] = 0xff
	b[i+1] = modrm
	return i + 2
}

// cpuWantsIndirectITSThunkAt: with the ITS mitigation, an indirect
// branch whose last opcode byte would sit in the lower half of a 64-byte
// cache line must go through an ITS thunk.
//
// Models arch/x86/kernel/alternative.c:cpu_wants_indirect_its_thunk_at.
func (p *Patcher) cpuWantsIndirectITSThunkAt(addr uint64, reg int) bool {
	if !p.CPU.Features.Has(p.bits().INDIRECT_THUNK_ITS) {
		return false
	}
	addr += 1 + uint64(reg/8)
	return addr&0x20 == 0
}

// emitTrampoline writes a call/jmp rel32 of the site's own length (a CS
// prefix for 6-byte sites, Jcc.d32 kept as a Jcc) to the ITS thunk.
//
// Models arch/x86/kernel/alternative.c:__emit_trampoline and
// emit_its_trampoline.
func (p *Patcher) emitITSTrampoline(addr uint64, in x86.Insn, reg int, b []byte) int {
	thunk := p.Env.ITSThunkArray + uint64(reg)*ITSThunkSize
	if p.Env.ITSThunk != nil {
		if t, ok := p.Env.ITSThunk(reg); ok {
			thunk = t
		}
	}
	return emitTrampoline(addr, in, b, thunk, thunk)
}

// emitTrampoline writes a call (to callDest) or jmp / Jcc (to jmpDest)
// rel32 of the site's own length: a CS prefix for 6-byte call/jmp sites,
// a Jcc.d32 kept as one.
//
// Models arch/x86/kernel/alternative.c:__emit_trampoline.
func emitTrampoline(addr uint64, in x86.Insn, b []byte, callDest, jmpDest uint64) int {
	thunk := callDest
	op := in.Opcode[0]
	if op != x86CALL {
		thunk = jmpDest
	}
	i := 0
	if isJcc32(in) {
		b[0] = op
		i = 1
		genInsn(b[i:], in.Opcode[1], addr+uint64(i), thunk)
		return i + 5
	}
	if in.Len == 6 {
		b[i] = 0x2e
		i++
	}
	switch op {
	case x86CALL, x86JMP32:
		genInsn(b[i:], op, addr+uint64(i), thunk)
		i += 5
	default:
		return -1
	}
	return i
}

// patchRetpoline builds the replacement of a thunk call/jmp/jcc at addr
// into b and returns its length (-1: leave the site alone) and the
// action.
//
// Models arch/x86/kernel/alternative.c:patch_retpoline.
func (p *Patcher) patchRetpoline(addr uint64, in x86.Insn, b []byte) (int, string, error) {
	target := in.Target(addr)
	d := int64(target - p.Env.IndirectThunkArray)
	// C pointer subtraction of retpoline_thunk_t (32 bytes): the
	// compiler's arithmetic shift, so targets just below the array give -1.
	reg := int(d >> 5)
	if reg&^0xf != 0 {
		return -1, SiteSkipped, nil // WARN_ON_ONCE
	}
	if reg == 4 {
		return 0, "", fmt.Errorf("retpoline site %#x: call/jmp through %%rsp (BUG_ON in patch_retpoline)", addr)
	}
	f := &p.CPU.Features
	bits := p.bits()
	if f.Has(bits.RETPOLINE) && !f.Has(bits.RETPOLINE_LFENCE) {
		if f.Has(bits.CALL_DEPTH) {
			// emit_call_track_retpoline (6.12, 7.3; 6.1 has no
			// X86_FEATURE_CALL_DEPTH).
			return emitTrampoline(addr, in, b, p.Env.CallThunkArray+uint64(reg)*RetpolineThunkSize, p.Env.JumpThunkArray+uint64(reg)*RetpolineThunkSize), RetpolineDepth, nil
		}
		return -1, RetpolineKept, nil
	}
	op := in.Opcode[0]
	i := 0
	action := RetpolineIndirect
	if isJcc32(in) {
		// Jncc.d8 over [lfence] jmp *%reg [nop].
		cc := in.Opcode[1]&0xf ^ 1
		b[0] = 0x70 + cc
		b[1] = byte(in.Len - 2)
		i = 2
		op = x86JMP32
	}
	if f.Has(bits.RETPOLINE_LFENCE) {
		b[i], b[i+1], b[i+2] = 0x0f, 0xae, 0xe8
		i += 3
		action = RetpolineLfence
	}
	if p.cpuWantsIndirectITSThunkAt(addr+uint64(i), reg) {
		return p.emitITSTrampoline(addr, in, reg, b), RetpolineITS, nil
	}
	n := p.model().emitIndirect(op, reg, b[i:], in.Len-i)
	if n < 0 {
		return -1, SiteSkipped, nil
	}
	i += n
	// An int3 after every indirect jmp (AMD BTC, SLS).
	if p.model().int3AfterJmp && op == x86JMP32 && i < in.Len {
		b[i] = x86INT3
		i++
	}
	for i < in.Len {
		b[i] = x86NOP1
		i++
	}
	return i, action, nil
}

// ApplyRetpolines rewrites the compiler's calls and jumps to
// __x86_indirect_thunk_<reg> for the CPU's spectre_v2 mode: left alone
// under plain retpolines, "lfence; call *%reg" under RETPOLINE_LFENCE,
// "call *%reg" otherwise (eIBRS, IBRS, off), or a call to an ITS thunk
// where the ITS mitigation wants it. A replacement is written only when
// its length equals the site's, after optimize_nops on the buffer.
//
// Models arch/x86/kernel/alternative.c:apply_retpolines.
func (p *Patcher) ApplyRetpolines(sites []uint64) error {
	st := &p.Stats.Retpolines
	for _, addr := range sites {
		st.Sites++
		in, err := p.decodeAt(addr)
		if err != nil {
			if p.Mem.Text(addr, 1) == nil {
				return fmt.Errorf("retpoline site %#x: %w", addr, ErrUnmapped)
			}
			st.Skipped++ // WARN_ON_ONCE(ret < 0)
			continue
		}
		if skip := p.model().retpolineSkip; skip != nil && skip(p, addr, in) {
			st.Skipped++
			p.record(SiteRetpoline, addr, p.Mem.Text(addr, in.Len), SiteSkipped)
			continue
		}
		switch op := in.Opcode[0]; {
		case op == x86CALL, op == x86JMP32:
		case op == 0x0f && in.Opcode[1] >= 0x80 && in.Opcode[1] <= 0x8f:
		default:
			st.Skipped++
			p.record(SiteRetpoline, addr, p.Mem.Text(addr, in.Len), SiteSkipped)
			continue
		}
		var b [16]byte
		n, action, err := p.patchRetpoline(addr, in, b[:])
		if err != nil {
			return err
		}
		dst := p.Mem.Text(addr, in.Len)
		if n != in.Len {
			switch action {
			case RetpolineKept:
				st.Kept++
			case SiteSkipped:
				st.Skipped++
			default:
				st.Unfit++
				action = RetpolineUnfit
			}
			p.record(SiteRetpoline, addr, dst, action)
			continue
		}
		p.model().retpolineNops(p.model(), b[:], n)
		switch action {
		case RetpolineIndirect:
			st.Indirect++
		case RetpolineLfence:
			st.Lfence++
		case RetpolineITS:
			st.ITS++
		case RetpolineDepth:
			st.Depth++
		}
		p.textPokeEarly(SiteRetpoline, addr, dst, b[:n], action)
	}
	return nil
}

// cpuWantsRethunkAt: whether a return at addr must go through
// x86_return_thunk. With the ITS return thunk only returns in the lower
// half of a cache line do.
//
// Models arch/x86/kernel/alternative.c:cpu_wants_rethunk_at.
func (p *Patcher) cpuWantsRethunkAt(addr uint64) bool {
	if !p.CPU.Features.Has(p.bits().RETHUNK) {
		return false
	}
	if p.Env.XReturnThunk != p.Env.ITSReturnThunk {
		return true
	}
	return addr&0x20 == 0
}

// patchReturn builds "jmp x86_return_thunk" or "ret" padded with int3 to
// the site's length n.
//
// Models arch/x86/kernel/alternative.c:patch_return.
func (p *Patcher) patchReturn(addr uint64, n int, b []byte) (int, string) {
	i := 0
	action := ReturnRet
	if p.cpuWantsRethunkAt(addr) {
		genInsn(b, x86JMP32, addr, p.Env.XReturnThunk)
		i = 5
		action = ReturnThunk
	} else {
		b[0] = x86RET
		i = 1
	}
	for i < n {
		b[i] = x86INT3
		i++
	}
	return i, action
}

// tramp_ud: "ud1 %esp, %ecx", the signature after every static-call
// trampoline (arch/x86/kernel/static_call.c).
var trampUD = []byte{0x0f, 0xb9, 0xcc}

// staticCallFixup: a .return_sites entry that is a static-call trampoline
// (ARCH_DEFINE_STATIC_CALL_NULL_TRAMP) is rewritten to the RET form by
// __static_call_transform and skipped by apply_returns.
//
// Models arch/x86/kernel/static_call.c:__static_call_fixup and the RET
// case of __static_call_transform.
func (p *Patcher) staticCallFixup(addr uint64, op byte, dest uint64) bool {
	sig := p.Mem.Text(addr+5, 3)
	if len(sig) < 3 || !bytes.Equal(sig, trampUD) {
		return false // past the text, or not a trampoline
	}
	if op != x86RET && dest != p.Env.ReturnThunk {
		return true
	}
	dst := p.Mem.Text(addr, 6)
	var code [6]byte
	size := 5
	if len(dst) >= 2 && dst[0] == 0x0f && dst[1]&0xf0 == 0x80 {
		// JCC: a conditional tail to the return stub.
		fn := p.Env.StaticCallReturn
		if p.CPU.Features.Has(p.bits().RETHUNK) {
			fn = p.Env.ReturnThunk
		}
		code[0] = 0x0f
		genInsn(code[1:], dst[1], addr+1, fn)
		size = 6
	} else if p.cpuWantsRethunkAt(addr) {
		genInsn(code[:], x86JMP32, addr, p.Env.XReturnThunk)
	} else {
		copy(code[:], []byte{x86RET, x86INT3, x86INT3, x86INT3, x86INT3})
	}
	if len(dst) < size {
		return true
	}
	if !bytes.Equal(dst[:size], code[:size]) {
		p.textPokeEarly(SiteReturn, addr, dst, code[:size], ReturnTramp)
	} else {
		p.record(SiteReturn, addr, dst[:size], ReturnTramp)
	}
	return true
}

// ApplyReturns rewrites objtool's "jmp __x86_return_thunk" sites: to
// "jmp x86_return_thunk" (the CPU's return thunk) where
// cpu_wants_rethunk_at, else to "ret" + int3 padding. Static-call
// trampolines are fixed by __static_call_fixup; any other site that is not
// a jmp to __x86_return_thunk is skipped (the kernel WARNs once).
//
// Models arch/x86/kernel/alternative.c:apply_returns.
func (p *Patcher) ApplyReturns(sites []uint64) error {
	st := &p.Stats.Returns
	for _, addr := range sites {
		st.Sites++
		in, err := p.decodeAt(addr)
		if err != nil {
			if p.Mem.Text(addr, 1) == nil {
				return fmt.Errorf("return site %#x: %w", addr, ErrUnmapped)
			}
			st.Skipped++
			continue
		}
		op := in.Opcode[0]
		var dest uint64
		if op == x86JMP32 {
			dest = in.Target(addr)
		}
		if p.staticCallFixup(addr, op, dest) {
			st.Tramp++
			continue
		}
		dst := p.Mem.Text(addr, in.Len)
		if dest != p.Env.ReturnThunk {
			st.Skipped++
			p.record(SiteReturn, addr, dst, SiteSkipped)
			continue
		}
		var b [16]byte
		n, action := p.patchReturn(addr, in.Len, b[:])
		if n != in.Len {
			st.Skipped++
			continue
		}
		if action == ReturnRet {
			st.Ret++
		} else {
			st.Thunk++
		}
		p.textPokeEarly(SiteReturn, addr, dst, b[:n], action)
	}
	return nil
}
