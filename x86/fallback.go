package x86

import "golang.org/x/arch/x86/x86asm"

// fallbackName names the instructions x86asm v0.33.0 rejects, misreads as a
// lone prefix (Op == 0) or sizes differently from the kernel's decoder, but
// that the kernel's opcode map (arch/x86/lib/x86-opcode-map.txt) decodes and
// that real kernel text contains. The length is always the kernel decoder's
// (layout.go); this only supplies a name, and decides validity: anything not
// listed here stays an error.
//
// Where x86asm has an Op for the instruction, it is returned too. d's map
// decides the names only its generation has (names612).
func (d *Decoder) fallbackName(l *layout) (string, x86asm.Op, bool) {
	if l.vexLen != 0 {
		return vexFallback(l)
	}
	lp := lastPrefixID(l.last)
	reg := (l.modrm >> 3) & 7
	mod3 := l.hasModRM && l.modrm>>6 == 3
	switch l.vmap {
	case 0:
		return oneByteFallback(l)
	case 1:
		switch l.opcode[1] {
		case 0x00: // Grp6: x86asm rejects f2 0f 00 /6
			if d.names612 && lp == 0xf2 && reg == 6 {
				return "lkgs", 0, true // "6: LKGS Ew (F2)" (6.12+)
			}
		case 0x01:
			if d.names612 && mod3 {
				if s := grp7Name612(l.modrm, lp); s != "" {
					return s, 0, true
				}
			}
			return grp7Name(l, lp)
		case 0x0d: // GrpP (AMD prefetch group); Intel: reserved NOP
			switch {
			case mod3:
				return "nop", 0, true
			case reg == 0:
				return "prefetch", 0, true
			case reg == 1:
				return "prefetchw", x86asm.PREFETCHW, true
			}
			return "nop", 0, true
		case 0x18: // Grp16: prefetch hints; other forms are hint NOPs
			if d.names612 && !mod3 && reg >= 6 {
				return [2]string{"prefetchit1", "prefetchit0"}[reg-6], 0, true // "6: prefetch IT1", "7: prefetch IT0" (6.12+)
			}
			return "nop", 0, true
		case 0x1f: // NOP Ev: x86asm accepts only /0; every /r is a NOP
			return "nop", 0, true
		case 0x1a:
			return pick(lp, "bndldx", "bndmov", "bndcl", "bndcu"), 0, true
		case 0x1b:
			return pick(lp, "bndstx", "bndmov", "bndmk", "bndcn"), 0, true
		case 0x1c: // Grp20
			if !mod3 && reg == 0 {
				return "cldemote", 0, true
			}
			return "nop", 0, true
		case 0x1e: // Grp21
			if lp == 0xf3 {
				switch {
				case l.modrm == 0xfa:
					return "endbr64", 0, true
				case l.modrm == 0xfb:
					return "endbr32", 0, true
				case mod3 && reg == 1:
					if l.rex&8 != 0 {
						return "rdsspq", 0, true
					}
					return "rdsspd", 0, true
				}
			}
			return "nop", 0, true
		case 0xae:
			return grp15Name(l, lp, reg, mod3)
		case 0xc7:
			return grp9Name(l, lp, reg, mod3)
		case 0x78, 0x79:
			if lp == 0 {
				if l.opcode[1] == 0x78 {
					return "vmread", 0, true
				}
				return "vmwrite", 0, true
			}
		case 0xb9:
			// Grp10, "all are UD1": x86asm v0.33.0 reads a 67 prefix
			// before it as the whole instruction (7.3 text has
			// "67 48 0f b9 3a", ud1 (%edx),%rdi).
			return "ud1", x86asm.UD1, true
		case 0xa6: // GrpPDLK (VIA PadLock): 7.3 text has f3 0f a6 d0
			if mod3 && reg <= 2 {
				return [3]string{"montmul", "xsha1", "xsha256"}[reg], 0, true
			}
		case 0xa7: // GrpRNG (VIA PadLock)
			if mod3 && reg != 3 && reg <= 5 {
				return [6]string{"xstore", "xcryptecb", "xcryptcbc", "", "xcryptcfb", "xcryptofb"}[reg], 0, true
			}
		case 0xff:
			// UD0: the kernel's map lists it without operands, so the
			// kernel decodes 0f ff as 2 bytes (objdump and x86asm read a
			// ModRM).
			return "ud0", x86asm.UD0, true
		}
	case 2:
		switch l.opcode[2] {
		case 0x80, 0x81, 0x82: // INVEPT / INVVPID / INVPCID Gy,Mdq (66): kvm-intel.ko has them
			if !mod3 && lp == 0x66 {
				return [...]string{"invept", "invvpid", "invpcid"}[l.opcode[2]-0x80], 0, true
			}
		case 0xf8:
			if !mod3 {
				switch lp {
				case 0x66:
					return "movdir64b", 0, true
				case 0xf2:
					return "enqcmd", 0, true
				case 0xf3:
					return "enqcmds", 0, true
				}
			}
		case 0xf9:
			if !mod3 && lp == 0 {
				return "movdiri", 0, true
			}
		case 0xf5:
			if !mod3 && lp == 0x66 {
				return w(l, "wrussd", "wrussq"), 0, true
			}
		case 0xf6:
			switch {
			case lp == 0x66:
				return "adcx", 0, true
			case lp == 0xf3:
				return "adox", 0, true
			case lp == 0 && !mod3:
				return w(l, "wrssd", "wrssq"), 0, true
			}
		}
	}
	return "", 0, false
}

// pick chooses by mandatory (last) prefix: none, 66, f3, f2.
func pick(lp byte, none, p66, pf3, pf2 string) string {
	switch lp {
	case 0x66:
		return p66
	case 0xf3:
		return pf3
	case 0xf2:
		return pf2
	}
	return none
}

func w(l *layout, d, q string) string {
	if l.rex&8 != 0 {
		return q
	}
	return d
}

// oneByteFallback: one-byte opcodes invalid in 64-bit mode ((i64) in the
// map). x86asm rejects them; the kernel's decoder does not, and sizes them
// with their 32-bit operands. is_exception_insn() tests INTO (ce), so it
// must decode.
func oneByteFallback(l *layout) (string, x86asm.Op, bool) {
	switch l.opcode[0] {
	case 0x06, 0x0e, 0x16, 0x1e:
		return "push", 0, true // push es/cs/ss/ds
	case 0x07, 0x17, 0x1f:
		return "pop", 0, true
	case 0x27:
		return "daa", x86asm.DAA, true
	case 0x2f:
		return "das", x86asm.DAS, true
	case 0x37:
		return "aaa", x86asm.AAA, true
	case 0x3f:
		return "aas", x86asm.AAS, true
	case 0x60:
		return "pusha", x86asm.PUSHA, true
	case 0x61:
		return "popa", x86asm.POPA, true
	case 0x82:
		return [8]string{"add", "or", "adc", "sbb", "and", "sub", "xor", "cmp"}[(l.modrm>>3)&7], 0, true
	case 0x9a:
		return "lcall", x86asm.LCALL, true
	case 0xce:
		return "into", x86asm.INTO, true
	case 0xd4:
		return "aam", x86asm.AAM, true
	case 0xd5:
		return "aad", x86asm.AAD, true
	case 0xd6:
		return "salc", 0, true
	case 0xc0, 0xc1, 0xd0, 0xd1, 0xd2, 0xd3:
		if (l.modrm>>3)&7 == 6 {
			return "shl", 0, true // Grp2 /6: SAL/SHL on AMD, reserved on Intel
		}
	case 0xf6, 0xf7:
		if (l.modrm>>3)&7 == 1 {
			return "test", 0, true // Grp3 /1: alias of /0 (TEST, AMD), reserved on Intel
		} // empty in the kernel's map: 1 byte
	case 0xea:
		return "ljmp", x86asm.LJMP, true
	}
	return "", 0, false
}

// grp7Name: 0f 01 (Grp7). x86asm v0.33.0 knows only sgdt..invlpg, monitor,
// mwait, xgetbv, xsetbv, xend, xtest, swapgs and rdtscp; the kernel's map
// gives every 0f 01 form a ModRM and no immediate, so all of them have a
// well-defined length.
func grp7Name(l *layout, lp byte) (string, x86asm.Op, bool) {
	if l.modrm>>6 != 3 {
		reg := (l.modrm >> 3) & 7
		if lp == 0xf3 && reg == 5 {
			return "rstorssp", 0, true
		}
		return [8]string{"sgdt", "sidt", "lgdt", "lidt", "smsw", "grp7", "lmsw", "invlpg"}[reg], 0, true
	}
	switch lp {
	case 0xf3:
		switch l.modrm {
		case 0xd9:
			return "vmgexit", 0, true // rep; vmmcall
		case 0xe8:
			return "setssbsy", 0, true
		case 0xea:
			return "saveprevssp", 0, true
		case 0xec:
			return "uiret", 0, true
		case 0xed:
			return "testui", 0, true
		case 0xee:
			return "clui", 0, true
		case 0xef:
			return "stui", 0, true
		case 0xfe:
			return "rmpadjust", 0, true
		case 0xff:
			return "psmash", 0, true
		}
	case 0xf2:
		switch l.modrm {
		case 0xd9:
			return "vmgexit", 0, true
		case 0xe8:
			return "xsusldtrk", 0, true
		case 0xe9:
			return "xresldtrk", 0, true
		case 0xfd:
			return "rmpread", 0, true // AMD SEV-SNP; 7.3 text has it
		case 0xfe:
			return "rmpupdate", 0, true
		case 0xff:
			return "pvalidate", 0, true
		}
	}
	if s := grp7Reg[l.modrm&0x3f]; s != "" {
		return s, 0, true
	}
	return "grp7", 0, true
}

// grp7Name612 names the Grp7 register forms the 6.12 map added (same
// length as every 0f 01 form): WRMSRNS, RDMSRLIST, WRMSRLIST, PBNDKB, ERETU
// and ERETS; "" for the others.
func grp7Name612(modrm, lp byte) string {
	switch modrm {
	case 0xc6:
		return pick(lp, "wrmsrns", "", "wrmsrlist", "rdmsrlist")
	case 0xc7:
		if lp == 0 {
			return "pbndkb"
		}
	case 0xca:
		return pick(lp, "", "", "eretu", "erets")
	}
	return ""
}

// grp7Reg names 0f 01 c0..ff (mod == 3) without a mandatory prefix.
var grp7Reg = [64]string{
	0x00: "enclv", 0x01: "vmcall", 0x02: "vmlaunch", 0x03: "vmresume", 0x04: "vmxoff", 0x05: "pconfig",
	0x08: "monitor", 0x09: "mwait", 0x0a: "clac", 0x0b: "stac", 0x0f: "encls",
	0x10: "xgetbv", 0x11: "xsetbv", 0x14: "vmfunc", 0x15: "xend", 0x16: "xtest", 0x17: "enclu",
	0x18: "vmrun", 0x19: "vmmcall", 0x1a: "vmload", 0x1b: "vmsave", 0x1c: "stgi", 0x1d: "clgi", 0x1e: "skinit", 0x1f: "invlpga",
	0x28: "serialize", 0x2e: "rdpkru", 0x2f: "wrpkru",
	0x38: "swapgs", 0x39: "rdtscp", 0x3a: "monitorx", 0x3b: "mwaitx", 0x3c: "clzero", 0x3d: "rdpru", 0x3e: "invlpgb", 0x3f: "tlbsync",
}

// grp15Name: 0f ae (Grp15).
func grp15Name(l *layout, lp, reg byte, mod3 bool) (string, x86asm.Op, bool) {
	if mod3 {
		switch lp {
		case 0xf3:
			return [8]string{"rdfsbase", "rdgsbase", "wrfsbase", "wrgsbase", "ptwrite", w(l, "incsspd", "incsspq"), "umonitor", ""}[reg], 0, reg != 7
		case 0x66:
			if reg == 6 {
				return "tpause", 0, true
			}
		case 0xf2:
			if reg == 6 {
				return "umwait", 0, true
			}
		}
		switch reg {
		case 5:
			return "lfence", x86asm.LFENCE, true
		case 6:
			return "mfence", x86asm.MFENCE, true
		case 7:
			return "sfence", x86asm.SFENCE, true
		}
		return "", 0, false
	}
	switch {
	case lp == 0x66 && reg == 6:
		return "clwb", 0, true
	case lp == 0x66 && reg == 7:
		return "clflushopt", 0, true
	case lp == 0xf3 && reg == 6:
		return "clrssbsy", 0, true
	case lp == 0xf3 && reg == 4:
		return "ptwrite", 0, true
	}
	return [8]string{"fxsave", "fxrstor", "ldmxcsr", "stmxcsr", "xsave", "xrstor", "xsaveopt", "clflush"}[reg], 0, true
}

// grp9Name: 0f c7 (Grp9).
func grp9Name(l *layout, lp, reg byte, mod3 bool) (string, x86asm.Op, bool) {
	if mod3 {
		switch {
		case reg == 6 && lp == 0xf3:
			return "senduipi", 0, true
		case reg == 6:
			return "rdrand", x86asm.RDRAND, true
		case reg == 7 && lp == 0xf3:
			return "rdpid", 0, true
		case reg == 7:
			return "rdseed", 0, true
		}
		return "", 0, false
	}
	switch reg {
	case 1:
		return w(l, "cmpxchg8b", "cmpxchg16b"), 0, true
	case 3:
		return "xrstors", 0, true
	case 4:
		return "xsavec", 0, true
	case 5:
		return "xsaves", 0, true
	case 6:
		return pick(lp, "vmptrld", "vmclear", "vmxon", "vmptrld"), 0, true
	case 7:
		return "vmptrst", 0, true
	}
	return "", 0, false
}

// vexFallback names the VEX instructions x86asm gets wrong or lacks.
func vexFallback(l *layout) (string, x86asm.Op, bool) {
	var pp, vl byte
	switch l.vexLen {
	case 2:
		pp, vl = l.vex[1]&3, (l.vex[1]>>2)&1
	case 3:
		pp, vl = l.vex[2]&3, (l.vex[2]>>2)&1
	default:
		return "", 0, false // EVEX: only what x86asm knows
	}
	mod3 := l.modrm>>6 == 3
	switch l.vmap {
	case 1:
		if l.opcode[0] == 0x77 {
			// x86asm reads a ModRM after vzeroupper/vzeroall, so its
			// length depends on the following byte (4 or 8 for c5 f8 77).
			if vl == 1 {
				return "vzeroall", x86asm.VZEROALL, true
			}
			return "vzeroupper", x86asm.VZEROUPPER, true
		}
	case 2: // AMX
		switch l.opcode[0] {
		case 0x49:
			switch {
			case pp == 0 && l.modrm == 0xc0:
				return "tilerelease", 0, true
			case pp == 0 && !mod3:
				return "ldtilecfg", 0, true
			case pp == 1 && !mod3:
				return "sttilecfg", 0, true
			case pp == 3 && mod3:
				return "tilezero", 0, true
			}
		case 0x4b:
			if !mod3 {
				switch pp {
				case 3:
					return "tileloadd", 0, true
				case 1:
					return "tileloaddt1", 0, true
				case 2:
					return "tilestored", 0, true
				}
			}
		case 0x5c:
			if pp == 2 && mod3 {
				return "tdpbf16ps", 0, true
			}
		case 0x5e:
			if mod3 {
				return [4]string{"tdpbuud", "tdpbusd", "tdpbsud", "tdpbssd"}[pp], 0, true
			}
		}
	}
	return "", 0, false
}
