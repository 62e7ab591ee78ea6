package x86

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/sim"
)

// Byte encodings from arch/x86/include/asm/nops.h, asm/ibt.h and
// asm/text-patching.h (x86-64). They are arrays so no caller can modify them.
var (
	NOP1 = [1]byte{0x90}                         // BYTES_NOP1
	NOP2 = [2]byte{0x66, 0x90}                   // BYTES_NOP2: osp nop
	NOP3 = [3]byte{0x0f, 0x1f, 0x00}             // BYTES_NOP3: nopl (%rax)
	NOP4 = [4]byte{0x0f, 0x1f, 0x40, 0x00}       // BYTES_NOP4
	NOP5 = [5]byte{0x0f, 0x1f, 0x44, 0x00, 0x00} // BYTES_NOP5: nopl 0x0(%rax,%rax,1); x86_nops[5], the jump-label / ftrace NOP

	ENDBR64 = [4]byte{0xf3, 0x0f, 0x1e, 0xfa} // gen_endbr(): 0xfa1e0ff3 little-endian
	ENDBR32 = [4]byte{0xf3, 0x0f, 0x1e, 0xfb}
	// EndbrPoison is gen_endbr_poison(): "osp nopl (%rax)" (0x001f0f66), the
	// 4-byte NOP apply_ibt_endbr() writes over sealed ENDBRs. It is not NOP4,
	// so it is unique to former ENDBR sites.
	EndbrPoison = [4]byte{0x66, 0x0f, 0x1f, 0x00}
	// EndbrPoison73 is 7.3's gen_endbr_poison(): "nopl -42(%rax)"
	// (0xd6401f0f), a 4-byte NOP carrying UDB (d6) as its displacement
	// (arch/x86/include/asm/ibt.h, 7.3; 6.1.192 and 6.12.117 still write
	// EndbrPoison).
	EndbrPoison73 = [4]byte{0x0f, 0x1f, 0x40, 0xd6}

	UD2  = [2]byte{0x0f, 0x0b} // BUG()/WARN() trap (ASM_UD2)
	INT3 = [1]byte{0xcc}       // INT3_INSN_OPCODE: the kprobe breakpoint
)

// Opcodes and sizes from arch/x86/include/asm/text-patching.h.
const (
	INT3InsnOpcode  = 0xcc
	INT3InsnSize    = 1
	RETInsnOpcode   = 0xc3
	RETInsnSize     = 1
	CALLInsnOpcode  = 0xe8
	CALLInsnSize    = 5
	JMP32InsnOpcode = 0xe9
	JMP32InsnSize   = 5
	JMP8InsnOpcode  = 0xeb
	JMP8InsnSize    = 2
	DISP32Size      = 4
	ENDBRInsnSize   = 4
)

// IsEndbr reports whether code starts with an ENDBR64, an ENDBR32 or the
// sealed-ENDBR poison NOP. Callers model CONFIG_X86_KERNEL_IBT themselves:
// without it the kernel's is_endbr() is constant false.
//
// Models arch/x86/include/asm/ibt.h:is_endbr.
func IsEndbr(code []byte) bool {
	if len(code) < 4 {
		return false
	}
	v := binary.LittleEndian.Uint32(code)
	if v == binary.LittleEndian.Uint32(EndbrPoison[:]) {
		return true
	}
	v &^= 0x01000000 // ENDBR32 -> ENDBR64
	return v == binary.LittleEndian.Uint32(ENDBR64[:])
}

// IsEndbr is the package-level IsEndbr with d's generation's poison: 7.3's
// __is_endbr recognises EndbrPoison73, 6.1's and 6.12's is_endbr
// EndbrPoison. Callers model CONFIG_X86_KERNEL_IBT themselves, and in 7.3
// also the read: is_endbr(u32 *) reads with __get_kernel_nofault and is
// false on a fault (6.1 and 6.12 read in arch_adjust_kprobe_addr).
//
// Models arch/x86/include/asm/ibt.h:is_endbr (6.1.192, 6.12.117) and
// __is_endbr (7.3).
func (d *Decoder) IsEndbr(code []byte) bool {
	if len(code) < 4 {
		return false
	}
	v := binary.LittleEndian.Uint32(code)
	if v == binary.LittleEndian.Uint32(d.endbrPoison[:]) {
		return true
	}
	v &^= 0x01000000 // ENDBR32 -> ENDBR64
	return v == binary.LittleEndian.Uint32(ENDBR64[:])
}

// IsIndirectJump reports whether i is ff /4, ff /5 (jmp *r/m, ljmp *m) or
// ea (jmp far). It reads the kernel's opcode.bytes[0] and modrm like the
// kernel, so the CONFIG_RETPOLINE extension (a relative branch into the
// indirect-thunk section) is the caller's: see InsnJumpIntoRange.
//
// Models arch/x86/kernel/kprobes/opt.c:__insn_is_indirect_jump.
func IsIndirectJump(i Insn) bool {
	return (i.Opcode[0] == 0xff && i.ModRMReg()&6 == 4) || i.Opcode[0] == 0xea
}

// IsExceptionInsn reports whether i raises an exception by design: UD0
// (0f ff), UD1 (0f b9), UD2 (0f 0b), INT3 (cc), INT n (cd), INTO (ce) or
// INT1 (f1). can_probe() of 6.12.117 and 7.3 refuses to probe them; 6.1's
// does not have this check.
//
// Models arch/x86/kernel/kprobes/core.c:is_exception_insn (6.12.117, 7.3).
func IsExceptionInsn(i Insn) bool {
	if i.Opcode[0] == 0x0f {
		return i.Opcode[1] == 0xff || i.Opcode[1] == 0xb9 || i.Opcode[1] == 0x0b
	}
	switch i.Opcode[0] {
	case 0xcc, 0xcd, 0xce, 0xf1:
		return true
	}
	return false
}

// InsnJumpIntoRange reports whether i, located at addr, is a relative jump
// whose target lies in [start, start+length] (inclusive upper bound, as in
// the kernel). Like the kernel it decides by opcode.bytes only and takes
// the target from immediate.value, so it also fires for VEX/EVEX
// instructions whose one opcode byte is 0x70-0x7f or e0-e3/e9/eb (their
// target is next_ip + their Ib, or next_ip when they have no immediate).
// Calls (e8) are not included.
//
// Models arch/x86/kernel/kprobes/opt.c:insn_jump_into_range.
func InsnJumpIntoRange(i Insn, addr, start uint64, length int) bool {
	switch op := i.Opcode[0]; {
	case op >= 0xe0 && op <= 0xe3, op == 0xe9, op == 0xeb:
	case op == 0x0f:
		if i.Opcode[1]&0xf0 != 0x80 {
			return false
		}
	case op&0xf0 == 0x70:
	default:
		return false
	}
	target := addr + uint64(i.Len) + uint64(i.Imm)
	return start <= target && target <= start+uint64(length)
}

// ErrJumpEntryBUG is returned where the kernel would BUG() on a jump-label
// site it cannot size.
var ErrJumpEntryBUG = errors.New("x86: BUG: jump entry is not a 2- or 5-byte JMP/NOP")

// JumpEntrySize sizes a jump-label site from its opcode bytes, without
// decoding (patch P3): eb (JMP8) -> 2, e9 (JMP32) -> 5, BYTES_NOP2 -> 2,
// BYTES_NOP5 -> 5; anything else is the kernel's BUG(), returned as an
// error wrapping ErrJumpEntryBUG. It counts one OpJumpSizeOpcode.
//
// Models arch/x86/kernel/jump_label.c:arch_jump_entry_size (with P3).
func JumpEntrySize(c *sim.Counters, code []byte) (int, error) {
	c.Inc(OpJumpSizeOpcode)
	if len(code) >= 1 {
		switch code[0] {
		case JMP8InsnOpcode:
			return JMP8InsnSize, nil
		case JMP32InsnOpcode:
			return JMP32InsnSize, nil
		}
	}
	if bytes.HasPrefix(code, NOP2[:]) {
		return 2, nil
	}
	if bytes.HasPrefix(code, NOP5[:]) {
		return 5, nil
	}
	return 0, fmt.Errorf("%w: % x", ErrJumpEntryBUG, code[:min(len(code), 5)])
}

// JumpEntrySizeDecode sizes a jump-label site the upstream 6.1 way: a full
// insn_decode_kernel() (counted as one OpDecode) and BUG_ON(length != 2 &&
// length != 5). The kernel ignores the decoder's return value; a failed
// decode leaves insn.length 0 and so BUGs too. Note it accepts any 2- or
// 5-byte instruction, where JumpEntrySize accepts only the four site
// encodings.
//
// Models arch/x86/kernel/jump_label.c:arch_jump_entry_size (6.1).
func JumpEntrySizeDecode(c *sim.Counters, code []byte) (int, error) {
	return jumpEntrySizeDecode(&decoder61, c, code)
}

func jumpEntrySizeDecode(d *Decoder, c *sim.Counters, code []byte) (int, error) {
	in, err := d.Decode(c, code)
	if err != nil {
		return 0, fmt.Errorf("%w: insn length 0: %v", ErrJumpEntryBUG, err)
	}
	if in.Len != 2 && in.Len != 5 {
		return 0, fmt.Errorf("%w: insn length %d", ErrJumpEntryBUG, in.Len)
	}
	return in.Len, nil
}

// JumpEntrySizeSim is JumpEntrySizeDecode for the simulator's many calls:
// the same answer, error and count (one OpDecode), but the four site
// encodings (eb rel8, e9 rel32, BYTES_NOP2, BYTES_NOP5, whole) are sized
// from their bytes, because the full decoder gives each of them exactly
// that length (TestJumpEntrySizeSimMatchesDecode); anything else is
// decoded. The decode is most of a machine's boot otherwise.
//
// Models arch/x86/kernel/jump_label.c:arch_jump_entry_size (6.1).
func JumpEntrySizeSim(c *sim.Counters, code []byte) (int, error) {
	return decoder61.JumpEntrySizeSim(c, code)
}

// siteEncodingSize is the length of the jump-label site encoding code
// starts with, complete, or 0.
func siteEncodingSize(code []byte) int {
	switch {
	case len(code) >= JMP8InsnSize && code[0] == JMP8InsnOpcode:
		return JMP8InsnSize
	case len(code) >= JMP32InsnSize && code[0] == JMP32InsnOpcode:
		return JMP32InsnSize
	case bytes.HasPrefix(code, NOP2[:]):
		return 2
	case bytes.HasPrefix(code, NOP5[:]):
		return 5
	}
	return 0
}

// twobyteIsBoostable is arch/x86/kernel/kprobes/core.c:twobyte_is_boostable
// (identical in 6.1 and mainline), one bit per second opcode byte.
var twobyteIsBoostable = [256]bool{}

func init() {
	rows := [16]uint16{
		//  0123456789abcdef, bit i = column i
		0x0000 | 1<<2 | 1<<3 | 1<<6 | 1<<8 | 1<<9, // 00
		1 << 0xf,                    // 10
		1<<0 | 1<<1 | 1<<2 | 1<<3,   // 20
		1 << 1,                      // 30
		0xffff,                      // 40
		0,                           // 50
		0xffff &^ (1<<0xc | 1<<0xd), // 60
		1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<0xe | 1<<0xf, // 70
		0,      // 80
		0xffff, // 90
		1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<8 | 1<<9 | 1<<0xb | 1<<0xc | 1<<0xd | 1<<0xf, // a0
		0xffff &^ (1<<8 | 1<<9 | 1<<0xa), // b0
		1<<0 | 1<<1 | 0xff00,             // c0
		1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<8 | 1<<9 | 1<<0xb | 1<<0xc | 1<<0xd | 1<<0xf, // d0
		1<<1 | 1<<2 | 1<<5 | 1<<8 | 1<<9 | 1<<0xb | 1<<0xc | 1<<0xd | 1<<0xf,        // e0
		1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<8 | 1<<9 | 1<<0xa | 1<<0xc | 1<<0xd | 1<<0xe, // f0
	}
	for r, bits := range rows {
		for col := 0; col < 16; col++ {
			twobyteIsBoostable[r*16+col] = bits&(1<<col) != 0
		}
	}
}

// CanBoost reports whether a copied instruction may run out of line followed
// by a jump back instead of single-stepping, from its bytes alone. The
// kernel's first test, search_exception_tables(addr), is the caller's: call
// CanBoost only when it misses. mainline selects the rule set of 6.12.117 and
// 7.3 (identical there); 6.1.192 never boosts Grp2 (c0/c1/d0-d3), Grp3 (f6/f7) or Grp4 (fe), and boosts Grp5
// (ff) only for /4.
//
// Models arch/x86/kernel/kprobes/core.c:can_boost (6.1.192: mainline false;
// 6.12.117, 7.3: mainline true).
func CanBoost(i Insn, mainline bool) bool {
	if i.OpcodeLen == 2 {
		return twobyteIsBoostable[i.Opcode[1]]
	}
	if i.OpcodeLen != 1 {
		return false
	}
	for k := 0; k < i.NPrefixes; k++ {
		// Can't boost the address-size override or the CS override.
		if p := i.Prefixes[k]; p == 0x2e || p == 0x67 {
			return false
		}
	}
	op := i.Opcode[0]
	reg := i.ModRMReg()
	switch {
	case op == 0x62, op >= 0x70 && op <= 0x7f, op == 0x9a,
		op >= 0xcc && op <= 0xce, op == 0xd6, op >= 0xd8 && op <= 0xdf,
		op >= 0xe0 && op <= 0xe3, op == 0xe8, op == 0xe9, op == 0xeb,
		op >= 0xf0 && op <= 0xf4:
		return false
	case op == 0xc0, op == 0xc1, op >= 0xd0 && op <= 0xd3:
		return mainline && reg != 6 // Grp2: /6 is undefined
	case op == 0xf6, op == 0xf7:
		return mainline && reg != 1 // Grp3: /1 is undefined
	case op == 0xfe:
		return mainline && reg <= 1 // Grp4: inc/dec only
	case op == 0xff:
		if mainline {
			return reg <= 1 || reg == 4 // Grp5: inc, dec, jmp *r/m
		}
		return reg == 4 // 6.1: only the indirect jmp
	}
	return true
}
