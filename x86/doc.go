// Package x86 decodes x86-64 instructions the way the Linux kernel's own
// decoder (arch/x86/lib/insn.c, insn_decode_kernel) does, and provides the
// instruction facts the kprobes, optprobe and jump-label checks read:
// is_endbr, __insn_is_indirect_jump, insn_jump_into_range,
// is_exception_insn, can_boost and arch_jump_entry_size.
//
// Lengths and fields (prefixes, opcode bytes, ModRM, immediate.value) come
// from a model of insn.c driven by the attributes of the kernel's
// arch/x86/lib/x86-opcode-map.txt (Debian 6.1.192 tree). The 6.12 and 7.3
// trees' maps and insn.c differ (REX2, EVEX map 4, VEX map 7 and new names
// in 6.12; XOP, INAT_INV64 and no VEX after REX in 7.3): For(generation)
// returns that generation's Decoder, a fact table chosen once; the
// package-level functions are 6.1's. The mnemonic, and
// the decision that bytes are a valid instruction at all, come from
// golang.org/x/arch/x86/x86asm, with the instructions x86asm v0.33.0 gets
// wrong handled here: most of the 0f 01 system group, rdseed/rdpid and the
// rest of Grp9/Grp15, endbr64/endbr32 (which x86asm returns as a lone f3
// prefix), movdir64b/enqcmd(s), AMX, vzeroupper/vzeroall (which x86asm sizes
// from the byte that follows), UD0 and the (i64) one-byte opcodes such as
// INTO.
//
// Kernel-decoder behaviours that differ from the hardware and that kpsim
// follows because the kernel does: 0f ff (UD0) is 2 bytes (no ModRM in the
// kernel's map); a Xen/KVM emulate prefix ("ud2; .ascii \"xen\"") is part of
// the following instruction; one-byte opcodes invalid in 64-bit mode (ce
// INTO, ea/9a far jmp/call, ...) decode with their 32-bit lengths. Where the
// kernel's length would disagree with every assembler (0f 19, 0f 1d, 0f 24-27
// have no ModRM in its map; 0f b8 without f3 is a bare JMPE), and for
// opcodes neither x86asm nor this package names, Decode returns an error
// rather than invent an instruction.
package x86
