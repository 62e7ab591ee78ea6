package x86

import (
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/sim"
	"golang.org/x/arch/x86/x86asm"
)

// Kind classifies an instruction for the kprobes/optprobe checks.
type Kind uint8

// Instruction kinds. Classification is by the kernel-visible opcode bytes
// of legacy-encoded instructions; VEX/EVEX instructions are KindOther.
const (
	KindOther        Kind = iota
	KindJmp               // eb rel8, e9 rel32
	KindJcc               // 70-7f rel8, 0f 80-8f rel32
	KindLoop              // e0-e3: loopne, loope, loop, jrcxz (rel8)
	KindCall              // e8 rel32
	KindJmpIndirect       // ff /4, ff /5, ea
	KindCallIndirect      // ff /2, ff /3, 9a
	KindRet               // c3, c2 imm16, cb, ca imm16
	KindInt3              // cc
	KindInt               // cd imm8 (int n), ce (into), f1 (int1)
	KindUD                // 0f 0b (ud2), 0f b9 (ud1), 0f ff (ud0)
	KindNop               // 90, 66 90, 0f 1f /r, hint NOPs (0f 0d/18/1c/1e forms that execute as NOP)
	KindEndbr             // f3 0f 1e fa (endbr64), f3 0f 1e fb (endbr32)
)

var kindNames = [...]string{"other", "jmp", "jcc", "loop", "call", "jmp-indirect",
	"call-indirect", "ret", "int3", "int", "ud", "nop", "endbr"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Insn is one decoded instruction: the kernel's view of it (struct insn as
// filled by insn_decode_kernel) plus a name and a classification.
type Insn struct {
	Len      int       // instruction length in bytes, 1..15 (emulate prefix included)
	Op       x86asm.Op // x86asm's op; 0 for instructions the wrapper names itself
	Mnemonic string    // lower-case mnemonic, e.g. "endbr64", "jmp", "int3"
	Kind     Kind
	Rel      int64 // relative branch displacement; target = addr + Len + Rel
	HasRel   bool

	// Fields of struct insn (arch/x86/include/asm/insn.h).
	EmulatePrefixLen int     // emulate_prefix_size: 5 after a Xen/KVM "ud2; .ascii" prefix, else 0
	Prefixes         [4]byte // distinct legacy prefixes in order of appearance
	NPrefixes        int     // number of distinct legacy prefixes
	PrefixLen        int     // legacy prefix bytes, repeats included (prefixes.nbytes)
	LastPrefix       byte    // the last legacy prefix byte (selects 66/f2/f3 opcode variants)
	REX              byte    // REX prefix, 0 if none
	REX2             [2]byte // REX2 prefix (d5 and its payload; 6.12 and later), zeros if none
	VEX              [4]byte // VEX (c5 xx / c4 xx xx), EVEX (62 xx xx xx) or XOP (8f xx xx; 7.3) prefix bytes
	VEXLen           int     // 0, 2, 3 or 4
	Opcode           [3]byte // opcode.bytes: 1 (xx), 2 (0f xx) or 3 (0f 38 xx / 0f 3a xx); 1 byte behind VEX/EVEX/XOP/REX2
	OpcodeLen        int     // opcode.nbytes
	Map              uint8   // opcode map: 0 one-byte, 1 0f, 2 0f 38, 3 0f 3a; VEX/EVEX map 4-7; XOP map 8-10 (REX2: 0 or 1 by its M0 bit)
	ModRM            byte
	HasModRM         bool
	SIB              byte
	HasSIB           bool
	Disp             int32 // displacement, sign-extended
	DispLen          int   // 0, 1 or 4
	Imm              int64 // immediate.value: the first immediate (or moffset1), sign-extended as the kernel's int
	ImmLen           int   // bytes of all immediate fields
	AddrBytes        int   // 8, or 4 with a 67 prefix
	OpndBytes        int   // 4; 2 with 66; 8 with REX.W/VEX.W or a (d64)/(f64) opcode
}

// ModRMMod returns modrm.mod (X86_MODRM_MOD).
func (i Insn) ModRMMod() byte { return i.ModRM >> 6 }

// ModRMReg returns modrm.reg, the /digit of group opcodes (X86_MODRM_REG).
func (i Insn) ModRMReg() byte { return (i.ModRM >> 3) & 7 }

// ModRMRM returns modrm.rm (X86_MODRM_RM).
func (i Insn) ModRMRM() byte { return i.ModRM & 7 }

// HasPrefix reports whether legacy prefix byte b is present.
func (i Insn) HasPrefix(b byte) bool {
	for k := 0; k < i.NPrefixes; k++ {
		if i.Prefixes[k] == b {
			return true
		}
	}
	return false
}

// Target returns the branch target of a relative branch at addr:
// addr + Len + Rel. It returns 0 when !HasRel.
func (i Insn) Target(addr uint64) uint64 {
	if !i.HasRel {
		return 0
	}
	return addr + uint64(i.Len) + uint64(i.Rel)
}

// RIPRelative models arch/x86/lib/insn.c:insn_rip_relative: a ModRM with
// mod == 0 and rm == 5 (disp32(%rip)) in 64-bit mode.
func (i Insn) RIPRelative() bool {
	return i.HasModRM && i.ModRM&0xc7 == 0x05
}

func (i Insn) String() string {
	if i.HasRel {
		return fmt.Sprintf("%s %+d (len %d)", i.Mnemonic, i.Rel, i.Len)
	}
	return fmt.Sprintf("%s (len %d)", i.Mnemonic, i.Len)
}

// Decode decodes the instruction at the start of code (64-bit mode) the way
// insn_decode_kernel() would: the length and fields follow the kernel's
// decoder, reading at most MAX_INSN_SIZE (15) bytes. It counts one OpDecode
// on c (which may be nil), whether or not decoding succeeds, because the
// kernel does the work either way. It returns an error wrapping ErrTruncated
// when the bytes run out and ErrInvalid when they are not a valid
// instruction; it never panics.
//
// Models arch/x86/lib/insn.c:insn_decode (via insn_decode_kernel).
func Decode(c *sim.Counters, code []byte) (Insn, error) {
	c.Inc(OpDecode)
	return decoder61.decode(code)
}

// DecodeKernel decodes like Decode but fills only what insn_decode_kernel
// fills: length, prefixes, opcode, ModRM/SIB, displacement, immediates,
// and Kind/Rel from the opcode. It does not name the instruction (Op and
// Mnemonic stay empty) and, like the kernel, accepts whatever the opcode
// map accepts: an error means the kernel's decoder fails too. The kprobes
// paths use it; it is ~10x cheaper for the simulator than Decode.
//
// Models arch/x86/lib/insn.c:insn_decode (via insn_decode_kernel).
func DecodeKernel(c *sim.Counters, code []byte) (Insn, error) {
	c.Inc(OpDecode)
	return decoder61.decodeKernel(code)
}

func (d *Decoder) decodeKernel(code []byte) (Insn, error) {
	l, err := d.kernelDecode(code)
	if err != nil {
		return Insn{}, err
	}
	in := fromLayout(&l)
	classify(&in)
	if in.Kind == KindOther && in.Map == 1 && in.OpcodeLen == 2 && in.Opcode[1] == 0x1e && in.ModRM >= 0xfa && in.ModRM <= 0xfb && in.LastPrefix == 0xf3 {
		in.Kind = KindEndbr
	}
	return in, nil
}

func (d *Decoder) decode(code []byte) (Insn, error) {
	l, err := d.kernelDecode(code)
	if err != nil {
		return Insn{}, err
	}
	if l.inv64 {
		// 7.3's decoder marks the opcode invalid in 64-bit mode and stops
		// after it: a length, but no instruction to name.
		return Insn{}, fmt.Errorf("%w: % x: opcode %02x is invalid in 64-bit mode (INAT_INV64)", ErrInvalid, code[:l.length], l.opcode[0])
	}
	body := code[l.emulate:l.length]
	in := fromLayout(&l)

	inst, xerr := x86asm.Decode(body, 64)
	switch {
	case l.rex2[0] != 0 || l.vexLen == 4 && l.vmap == 4 || l.vexLen != 0 && l.vex[0] == 0x8f:
		// REX2, EVEX map 4 (APX) and XOP: x86asm v0.33.0 knows none of
		// them (it reads d5 as AAD, 8f as POP, 62 .. map 4 as an unknown
		// AVX opcode), and kernel text has none.
		return Insn{}, fmt.Errorf("%w: % x: an APX/XOP encoding kpsim does not name", ErrInvalid, body)
	case xerr == nil && inst.Op != 0 && inst.Len == len(body) && !x86asmMisnames(&l):
		in.Op = inst.Op
		in.Mnemonic = opName(inst.Op)
		if l.vexLen == 0 && l.vmap == 0 && l.opcode[0] == 0xcc {
			in.Mnemonic = "int3" // x86asm calls it INT
		}
	default:
		name, op, ok := d.fallbackName(&l)
		if !ok {
			switch {
			case xerr != nil:
				return Insn{}, fmt.Errorf("%w: % x: %v", ErrInvalid, body, xerr)
			case inst.Op == 0:
				return Insn{}, fmt.Errorf("%w: % x: x86asm decoded only a prefix", ErrInvalid, body)
			default:
				return Insn{}, fmt.Errorf("%w: % x: x86asm length %d, kernel decoder length %d",
					ErrInvalid, body, inst.Len, len(body))
			}
		}
		in.Op = op
		in.Mnemonic = name
	}
	classify(&in)
	return in, nil
}

// x86asmMisnames: x86asm ignores the mandatory prefix of Grp15 (0f ae) and
// names f3 0f ae f0 (umonitor) "mfence", 66 0f ae /6 (clwb) "xsaveopt",
// 66 0f ae /7 (clflushopt) "clflush", f3 0f ae /5 (incssp) "lfence". The
// lengths agree; the names come from fallbackName instead.
func x86asmMisnames(l *layout) bool {
	return l.vexLen == 0 && l.vmap == 1 && l.opcode[1] == 0xae && lastPrefixID(l.last) != 0
}

func fromLayout(l *layout) Insn {
	return Insn{
		Len:              l.length,
		EmulatePrefixLen: l.emulate,
		Prefixes:         l.pfx,
		NPrefixes:        l.npfx,
		PrefixLen:        l.pfxLen,
		LastPrefix:       l.last,
		REX:              l.rex,
		REX2:             l.rex2,
		VEX:              l.vex,
		VEXLen:           l.vexLen,
		Opcode:           l.opcode,
		OpcodeLen:        l.opLen,
		Map:              l.vmap,
		ModRM:            l.modrm,
		HasModRM:         l.hasModRM,
		SIB:              l.sib,
		HasSIB:           l.hasSIB,
		Disp:             l.disp,
		DispLen:          l.dispLen,
		Imm:              l.imm,
		ImmLen:           l.immLen,
		AddrBytes:        l.addrBytes,
		OpndBytes:        l.opndBytes,
	}
}

// classify sets Kind, Rel and HasRel. A REX2 instruction of the one-byte
// map is classified by its opcode byte like a legacy one (the kernel's
// checks read opcode.bytes[0] either way); one of the 0f map (REX2.M0) has
// a single opcode byte and is KindOther, like VEX/EVEX/XOP.
func classify(in *Insn) {
	if in.VEXLen != 0 || in.REX2[0] != 0 && in.Map != 0 {
		return
	}
	op := in.Opcode[0]
	rel := false
	switch in.Map {
	case 0:
		switch {
		case op >= 0x70 && op <= 0x7f:
			in.Kind, rel = KindJcc, true
		case op >= 0xe0 && op <= 0xe3:
			in.Kind, rel = KindLoop, true
		case op == 0xe8:
			in.Kind, rel = KindCall, true
		case op == 0xe9 || op == 0xeb:
			in.Kind, rel = KindJmp, true
		case op == 0xea:
			in.Kind = KindJmpIndirect
		case op == 0x9a:
			in.Kind = KindCallIndirect
		case op == 0xff && (in.ModRMReg() == 2 || in.ModRMReg() == 3):
			in.Kind = KindCallIndirect
		case op == 0xff && (in.ModRMReg() == 4 || in.ModRMReg() == 5):
			in.Kind = KindJmpIndirect
		case op == 0xc2 || op == 0xc3 || op == 0xca || op == 0xcb:
			in.Kind = KindRet
		case op == 0xcc:
			in.Kind = KindInt3
		case op == 0xcd || op == 0xce || op == 0xf1:
			in.Kind = KindInt
		case op == 0xc7 && in.ModRM == 0xf8:
			rel = true // xbegin rel32/rel16
		}
	case 1:
		op = in.Opcode[1]
		switch {
		case op >= 0x80 && op <= 0x8f:
			in.Kind, rel = KindJcc, true
		case op == 0x0b || op == 0xb9 || op == 0xff:
			in.Kind = KindUD
		case op == 0x1e && (in.Mnemonic == "endbr64" || in.Mnemonic == "endbr32"):
			in.Kind = KindEndbr
		}
	}
	if in.Kind == KindOther && (in.Op == x86asm.NOP || in.Mnemonic == "nop") {
		in.Kind = KindNop
	}
	if rel {
		in.Rel, in.HasRel = in.Imm, true
	}
}

// opNames caches the lower-case x86asm op names (no allocation per decode).
var opNames = func() []string {
	var m []string
	for op := x86asm.Op(0); op < 4096; op++ {
		s := op.String()
		if strings.HasPrefix(s, "Op(") {
			s = ""
		}
		m = append(m, strings.ToLower(s))
	}
	return m
}()

func opName(op x86asm.Op) string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return strings.ToLower(op.String())
}
