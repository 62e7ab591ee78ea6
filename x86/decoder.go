package x86

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// Decoder is the kernel's instruction decoder of one generation: the rules
// of that tree's arch/x86/lib/insn.c and the attribute tables its
// arch/x86/lib/x86-opcode-map.txt generates (arch/x86/tools/
// gen-insn-attr-x86.awk), held as facts chosen once by For. The decode
// functions read the facts; none of them compares generations.
//
// The package-level Decode, DecodeKernel, JumpEntrySizeDecode and
// JumpEntrySizeSim are the 6.1 decoder's (For(image.Gen61)).
type Decoder struct {
	gen image.Generation

	// rex2: d5 is the APX REX2 prefix in 64-bit mode, two bytes (d5 and
	// its payload: M0 R4 X4 B4 W R3 X3 B3). After it there is no VEX and
	// the opcode is one byte of the one-byte map (M0 = 0) or the 0f map
	// (M0 = 1), looked up without escapes, (i64) or VEX-only checks.
	// 6.12, 7.3: "d5: AAD Ib (i64) | REX2 (Prefix),(o64)" and
	// insn_get_prefixes' inat_is_rex2_prefix branch; in 6.1 d5 is AAD Ib.
	rex2 bool
	// vexAfterREX: insn_get_prefixes re-reads the attribute of the byte
	// after a REX prefix before looking for VEX, so REX + c4/c5/62 is still
	// VEX/EVEX (6.1, 6.12). 7.3 tests the attribute it read before the REX
	// (the REX's own), so after a REX c4/c5/62/8f are opcodes (LES, LDS,
	// BOUND, Grp1A: a ModRM).
	vexAfterREX bool
	// xop: 8f followed by a byte whose ModRM.reg is not 0 is AMD's
	// three-byte XOP prefix, with the opcode maps 8h, 9h and Ah (7.3:
	// "8f: Grp1A (1A) | POP Ev (d64) | XOP (Prefix)"). 8f /0 stays POP Ev.
	xop bool
	// inv64: a one-byte opcode marked (i64) on a line without an (o64)
	// form is INAT_INV64 and decodes as the lone opcode byte in 64-bit
	// mode ("This instruction is invalid, like UD2. Stop decoding."):
	// 82, 9a, d4 and ea lose their ModRM or immediate (7.3). 6.1 and 6.12
	// decode them with their 32-bit operands.
	inv64 bool
	// apx: the tables 6.12 added: EVEX map 4 (APX legacy instructions in
	// EVEX, with the (es) rule that EVEX.pp = 66 and !W is a 2-byte operand
	// size) and VEX map 7 (URDMSR/UWRMSR with an Id). In 6.1 both maps are
	// absent and any instruction in them is -EINVAL.
	apx bool
	// names612: the 6.12 map names instructions 6.1's does not, at the
	// same lengths: LKGS (f2 0f 00 /6), WRMSRNS, RDMSRLIST, WRMSRLIST,
	// PBNDKB, ERETU, ERETS (0f 01 c6/c7/ca forms), PREFETCHIT0/1 (0f 18
	// /7, /6). Decode accepts LKGS only with it (6.1 rejects f2 0f 00 /6);
	// the others were already accepted under their group names.
	names612 bool
	// endbrPoison is gen_endbr_poison() (asm/ibt.h), which is_endbr
	// also accepts: 6.1's and 6.12's EndbrPoison, 7.3's EndbrPoison73.
	endbrPoison *[4]byte
}

var (
	decoder61  = Decoder{gen: image.Gen61, vexAfterREX: true, endbrPoison: &EndbrPoison}
	decoder612 = Decoder{gen: image.Gen612, rex2: true, vexAfterREX: true, apx: true, names612: true, endbrPoison: &EndbrPoison}
	decoder73  = Decoder{gen: image.Gen73, rex2: true, xop: true, inv64: true, apx: true, names612: true, endbrPoison: &EndbrPoison73}
)

// For returns the kernel decoder of generation g (GenUnknown reads as 6.1,
// image.Generation.Effective). The decoders are shared and immutable.
func For(g image.Generation) *Decoder {
	switch g.Effective() {
	case image.Gen612:
		return &decoder612
	case image.Gen73:
		return &decoder73
	}
	return &decoder61
}

// Generation is the generation whose decoder d is.
func (d *Decoder) Generation() image.Generation { return d.gen }

// Decode is the package-level Decode with d's opcode map and rules.
//
// Models arch/x86/lib/insn.c:insn_decode (via insn_decode_kernel).
func (d *Decoder) Decode(c *sim.Counters, code []byte) (Insn, error) {
	c.Inc(OpDecode)
	return d.decode(code)
}

// DecodeKernel is the package-level DecodeKernel with d's opcode map and
// rules.
//
// Models arch/x86/lib/insn.c:insn_decode (via insn_decode_kernel).
func (d *Decoder) DecodeKernel(c *sim.Counters, code []byte) (Insn, error) {
	c.Inc(OpDecode)
	return d.decodeKernel(code)
}

// JumpEntrySizeDecode is the package-level JumpEntrySizeDecode with d's
// decoder. arch_jump_entry_size is the same in 6.1, 6.12 and 7.3; what
// differs is the insn_decode_kernel it calls, which is d's.
//
// Models arch/x86/kernel/jump_label.c:arch_jump_entry_size (6.1, 6.12, 7.3).
func (d *Decoder) JumpEntrySizeDecode(c *sim.Counters, code []byte) (int, error) {
	return jumpEntrySizeDecode(d, c, code)
}

// JumpEntrySizeSim is the package-level JumpEntrySizeSim with d's decoder
// (arch_jump_entry_size is the same in all three; the decoder is d's).
//
// Models arch/x86/kernel/jump_label.c:arch_jump_entry_size (6.1, 6.12, 7.3).
func (d *Decoder) JumpEntrySizeSim(c *sim.Counters, code []byte) (int, error) {
	if n := siteEncodingSize(code); n != 0 {
		c.Inc(OpDecode)
		return n, nil
	}
	return jumpEntrySizeDecode(d, c, code)
}
