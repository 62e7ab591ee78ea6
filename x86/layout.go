package x86

import "errors"

// This file is kpsim's model of the kernel's own instruction decoder,
// arch/x86/lib/insn.c, in 64-bit mode: a length decoder driven by the
// attribute tables generated from arch/x86/lib/x86-opcode-map.txt. It finds
// the emulate prefix, legacy prefixes, REX, VEX/EVEX, opcode bytes, ModRM,
// SIB, displacement and immediates exactly where insn_decode() does, so the
// length and the fields the kprobes checks read (opcode.bytes[], modrm,
// immediate.value, prefixes) are the kernel's. x86asm is used on top of it
// only to name the instruction and to reject bytes that are not a valid
// instruction (see decode.go).

// Errors returned by the length decoder. They mirror insn.c: -ENODATA when
// the bytes run out (or pass MAX_INSN_SIZE), -EINVAL for a VEX/EVEX-only
// opcode without the prefix or a non-VEX opcode behind one.
var (
	// ErrTruncated: the instruction does not fit in the buffer or in
	// MAX_INSN_SIZE (15) bytes (insn.c's -ENODATA).
	ErrTruncated = errors.New("x86: truncated instruction (insn_decode -ENODATA)")
	// ErrInvalid: the bytes are not a valid instruction.
	ErrInvalid = errors.New("x86: invalid instruction")
)

// MaxInsnSize is MAX_INSN_SIZE (arch/x86/include/asm/insn.h): 15.
const MaxInsnSize = 15

// immediate kinds, as the kernel's INAT_IMM_* (arch/x86/include/asm/inat.h).
const (
	immNone    = iota
	immByte    // Ib, Jb
	immWord    // Iw
	immDword   // Id
	immPtr     // Ap: ptr16:16 / ptr16:32
	immVWord32 // Iz, Jz: 2 or 4 bytes by operand size
	immVWord   // Iv: 2, 4 or 8 bytes by operand size
)

// attr is a reduced insn_attr_t: just what the length needs.
type attr struct {
	modrm   bool
	imm     uint8 // imm* kind
	imm2    bool  // INAT_SCNDIMM: a second Ib (ENTER Iw,Ib)
	moffset bool  // INAT_MOFFSET (Ob/Ov)
	force64 bool  // INAT_FORCE64: (d64)/(f64) opcodes, opnd_bytes = 8
}

// layout is what insn_decode() fills in struct insn.
type layout struct {
	emulate int     // emulate_prefix_size: 0 or 5
	pfx     [4]byte // distinct legacy prefixes in order of appearance
	npfx    int     // distinct legacy prefixes
	pfxLen  int     // legacy prefix bytes, repeats included (prefixes.nbytes)
	last    byte    // last legacy prefix byte (prefixes.bytes[3] after the swap)
	rex     byte
	vex     [4]byte
	vexLen  int
	opcode  [3]byte
	// The 6.12 and 7.3 fields sit in opcode's padding: a larger layout
	// costs the 6.1 decode ~15%.
	rex2      [2]byte // REX2 prefix: d5 and its payload (6.12+)
	xop       bool    // vex holds an XOP prefix (8f, 7.3)
	inv64     bool    // the opcode is INAT_INV64 (7.3): decoded as the lone byte
	opLen     int
	vmap      uint8 // opcode map: 0 one-byte, 1 0f, 2 0f38, 3 0f3a, 5/6 EVEX
	modrm     byte
	hasModRM  bool
	sib       byte
	hasSIB    bool
	disp      int32
	dispLen   int
	dispOff   int
	imm       int64 // immediate.value (= immediate1 = moffset1), sign-extended
	immLen    int   // bytes of all immediate fields
	immOff    int
	addrBytes int
	opndBytes int
	length    int
}

var (
	xenPrefix = [5]byte{0x0f, 0x0b, 0x78, 0x65, 0x6e} // __XEN_EMULATE_PREFIX: ud2; .ascii "xen"
	kvmPrefix = [5]byte{0x0f, 0x0b, 0x6b, 0x76, 0x6d} // __KVM_EMULATE_PREFIX: ud2; .ascii "kvm"
)

func isLegacyPrefix(b byte) bool {
	switch b {
	case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3:
		return true
	}
	return false
}

// lastPrefixID is inat_last_prefix_id: only 66, f3, f2 select a variant
// table (INAT_LSTPFX_MAX); any other last prefix means "no mandatory prefix".
func lastPrefixID(b byte) byte {
	switch b {
	case 0x66, 0xf2, 0xf3:
		return b
	}
	return 0
}

// rex2Prefix reads the REX2 prefix at code[p] (d5) and its payload, and
// returns the offset after them.
//
// Models the REX2 branch of arch/x86/lib/insn.c:insn_get_prefixes (6.12, 7.3).
func (l *layout) rex2Prefix(code []byte, p int) (int, error) {
	if p+1 >= len(code) {
		return p, ErrTruncated
	}
	payload := code[p+1]
	l.rex2 = [2]byte{code[p], payload}
	if payload&8 != 0 { // X86_REX_W: REX2.W
		l.opndBytes = 8
	}
	return p + 2, nil
}

// xopPrefix reads the XOP prefix at code[p] (8f) if it is one, and
// returns the offset after it. "Grp1A.0 is always POP Ev": only a second
// byte with ModRM.reg /1-/7 makes 8f the prefix.
//
// Models the XOP branch of arch/x86/lib/insn.c:insn_get_prefixes (7.3).
func (l *layout) xopPrefix(code []byte, p int) (int, error) {
	if p+1 >= len(code) {
		return p, ErrTruncated
	}
	b2 := code[p+1]
	if (b2>>3)&7 == 0 {
		return p, nil
	}
	if p+3 > len(code) {
		return p, ErrTruncated
	}
	copy(l.vex[:], code[p:p+3])
	l.vexLen = 3
	l.xop = true
	l.vmap = b2 & 0x1f // X86_XOP_M
	if code[p+2]&0x80 != 0 {
		l.opndBytes = 8 // XOP.W
	}
	return p + 3, nil
}

// prefixedOpcodeAttr is the attribute of opcode op behind a VEX, EVEX, XOP
// or REX2 prefix, and whether the map accepts it. After REX2 the opcode is
// looked up in the 0f map when REX2.M0 is set, else in the one-byte map,
// with no escape, (i64) or VEX-only check. An (es) opcode of EVEX map 4
// with EVEX.pp = 66 and EVEX.W clear has a 2-byte operand size.
//
// Models the VEX/XOP/REX2 part of arch/x86/lib/insn.c:insn_get_opcode.
func (d *Decoder) prefixedOpcodeAttr(l *layout, op byte) (attr, bool) {
	switch {
	case l.xop:
		return xopAttr(l.vmap, op)
	case l.vexLen != 0:
		var pp, w byte
		switch l.vexLen {
		case 2:
			pp = l.vex[1] & 3
		default:
			pp, w = l.vex[2]&3, l.vex[2]&0x80
		}
		if d.apx && l.vmap == 4 {
			a, valid, scalable := evexMap4Attr(op, l.vexLen == 4, pp)
			if scalable && w == 0 && pp == 1 {
				l.opndBytes = 2 // SCALABLE EVEX uses p bits to encode operand size
			}
			return a, valid
		}
		return d.vexAttr(l.vmap, op, l.vexLen == 4, pp)
	case l.rex2[1]&0x80 != 0:
		l.vmap = 1
		return twoByteAttr(op, lastPrefixID(l.last)), true
	}
	return opcodeAttr(op), true
}

// kernelDecode is the 6.1 decoder's kernelDecode.
func kernelDecode(code []byte) (layout, error) { return decoder61.kernelDecode(code) }

// Models arch/x86/lib/insn.c:insn_decode (64-bit, INSN_MODE_KERN): the
// kernel's length decode of one instruction from at most MAX_INSN_SIZE bytes,
// with d's generation of the rules (REX2, XOP, INAT_INV64, VEX after REX) and
// of the opcode map.
func (d *Decoder) kernelDecode(code []byte) (layout, error) {
	var l layout
	end := len(code)
	if end > MaxInsnSize {
		end = MaxInsnSize // insn_init: longer buffers are clamped to 15 bytes
	}
	p := 0
	peek := func(n int) (byte, bool) {
		if p+n >= end {
			return 0, false
		}
		return code[p+n], true
	}
	l.opndBytes = 4
	l.addrBytes = 8

	// insn_get_emulate_prefix
	if end >= 5 {
		var w [5]byte
		copy(w[:], code[:5])
		if w == xenPrefix || w == kvmPrefix {
			l.emulate = 5
			p = 5
		}
	}

	// insn_get_prefixes: legacy prefixes
	b, ok := peek(0)
	if !ok {
		return l, ErrTruncated
	}
	for isLegacyPrefix(b) {
		dup := false
		for i := 0; i < l.npfx; i++ {
			if l.pfx[i] == b {
				dup = true
			}
		}
		if !dup {
			if l.npfx == 4 {
				// The kernel stops scanning and takes this prefix byte
				// as the opcode (an attribute-less one-byte opcode).
				// No assembler emits this; treat as invalid.
				return l, ErrInvalid
			}
			l.pfx[l.npfx] = b
			l.npfx++
			switch b {
			case 0x67:
				l.addrBytes ^= 12 // 8 <-> 4
			case 0x66:
				l.opndBytes ^= 6 // 4 <-> 2
			}
		}
		l.pfxLen++
		l.last = b
		p++
		if b, ok = peek(0); !ok {
			return l, ErrTruncated
		}
	}
	// REX, or REX2 (6.12+)
	vexOK := true
	if b&0xf0 == 0x40 {
		l.rex = b
		if b&8 != 0 {
			l.opndBytes = 8
		}
		p++
		if b, ok = peek(0); !ok {
			return l, ErrTruncated
		}
		vexOK = d.vexAfterREX
	} else if b == 0xd5 && d.rex2 {
		var err error
		if p, err = l.rex2Prefix(code[:end], p); err != nil {
			return l, err
		}
		vexOK = false // goto vex_end
	}
	// VEX / EVEX (always, in 64-bit mode); XOP (7.3)
	if !vexOK {
		b = 0 // not a VEX/XOP prefix
	}
	if b == 0x8f && d.xop {
		var err error
		if p, err = l.xopPrefix(code[:end], p); err != nil {
			return l, err
		}
	}
	switch b {
	case 0x62, 0xc4, 0xc5:
		n := 2
		switch b {
		case 0x62:
			n = 4
		case 0xc4:
			n = 3
		}
		if p+n > end {
			return l, ErrTruncated
		}
		copy(l.vex[:], code[p:p+n])
		l.vexLen = n
		switch b {
		case 0x62:
			l.vmap = code[p+1] & 0x07 // X86_EVEX_M
			if code[p+3]&0x80 != 0 {
				l.opndBytes = 8
			}
		case 0xc4:
			l.vmap = code[p+1] & 0x1f // X86_VEX3_M
			if code[p+2]&0x80 != 0 {
				l.opndBytes = 8
			}
		case 0xc5:
			l.vmap = 1
		}
		p += n
	}

	// insn_get_opcode
	op, ok := peek(0)
	if !ok {
		return l, ErrTruncated
	}
	p++
	l.opcode[0] = op
	l.opLen = 1
	var a attr
	if l.vexLen != 0 || l.rex2[0] != 0 {
		var valid bool
		if a, valid = d.prefixedOpcodeAttr(&l, op); !valid {
			return l, ErrInvalid
		}
	} else if op == 0x0f {
		op2, ok := peek(0)
		if !ok {
			return l, ErrTruncated
		}
		p++
		l.opcode[1] = op2
		l.opLen = 2
		switch op2 {
		case 0x38, 0x3a:
			op3, ok := peek(0)
			if !ok {
				return l, ErrTruncated
			}
			p++
			l.opcode[2] = op3
			l.opLen = 3
			if op2 == 0x38 {
				l.vmap = 2
				a = attr{modrm: true}
			} else {
				l.vmap = 3
				a = attr{modrm: true, imm: immByte}
			}
		default:
			l.vmap = 1
			a = twoByteAttr(op2, lastPrefixID(l.last))
		}
	} else {
		a = opcodeAttr(op)
		if d.inv64 && invalid64[op] {
			a = attr{} // insn->attr &= INAT_INV64
			l.inv64 = true
		}
	}

	// insn_get_modrm
	if a.modrm {
		m, ok := peek(0)
		if !ok {
			return l, ErrTruncated
		}
		p++
		l.modrm = m
		l.hasModRM = true
		if l.xop || l.vexLen == 4 && l.vmap == 4 {
			a = groupAttrNew(&l, a)
		} else {
			a = groupAttr(&l, a)
		}
	}
	if a.force64 {
		l.opndBytes = 8
	}

	// insn_get_sib
	mod, rm := l.modrm>>6, l.modrm&7
	if l.hasModRM && mod != 3 && rm == 4 {
		s, ok := peek(0)
		if !ok {
			return l, ErrTruncated
		}
		p++
		l.sib = s
		l.hasSIB = true
	}

	// insn_get_displacement (addr_bytes is 4 or 8 in 64-bit mode)
	if l.hasModRM && mod != 3 {
		switch {
		case mod == 1:
			l.dispLen = 1
		case mod == 2, mod == 0 && rm == 5, mod == 0 && l.sib&7 == 5:
			l.dispLen = 4
		}
		if l.dispLen != 0 {
			if p+l.dispLen > end {
				return l, ErrTruncated
			}
			l.dispOff = p
			l.disp = int32(signExtend(code[p : p+l.dispLen]))
			p += l.dispLen
		}
	}

	// insn_get_immediate
	l.immOff = p
	take := func(n int, first bool) bool {
		if p+n > end {
			return false
		}
		if first {
			v := signExtend(code[p : p+n])
			if n == 8 {
				v = signExtend(code[p : p+4]) // immediate1 is the low int
			}
			l.imm = v
		}
		p += n
		l.immLen += n
		return true
	}
	if a.moffset {
		if !take(l.addrBytes, true) {
			return l, ErrTruncated
		}
	} else {
		var n int
		switch a.imm {
		case immByte:
			n = 1
		case immWord:
			n = 2
		case immDword:
			n = 4
		case immPtr:
			switch l.opndBytes {
			case 2:
				n = 4
			case 4:
				n = 6
			default:
				return l, ErrInvalid // "ptr16:64 is not exist"
			}
		case immVWord32:
			n = 4
			if l.opndBytes == 2 {
				n = 2
			}
		case immVWord:
			n = l.opndBytes
		}
		if n != 0 {
			if a.imm == immPtr {
				// immediate1 is the offset, immediate2 the selector.
				if !take(n-2, true) || !take(2, false) {
					return l, ErrTruncated
				}
			} else if !take(n, true) {
				return l, ErrTruncated
			}
		}
		if a.imm2 && !take(1, false) {
			return l, ErrTruncated
		}
	}
	l.length = p
	return l, nil
}

func signExtend(b []byte) int64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	shift := 64 - 8*uint(len(b))
	return int64(v<<shift) >> shift
}

// groupAttr applies the opcode-extension group entries that change the
// length: Grp3 (f6/f7 /0 and /1 TEST take Ib/Iz) and Grp12-14 (0f 71-73,
// which carry their Ib in the group entries); the groups of the 6.12 and 7.3
// maps' EVEX map 4 and XOP are groupAttrNew's.
func groupAttr(l *layout, a attr) attr {
	reg := (l.modrm >> 3) & 7
	if l.vexLen == 0 && l.vmap == 0 {
		switch l.opcode[0] {
		case 0xf6:
			if reg <= 1 {
				a.imm = immByte
			}
		case 0xf7:
			if reg <= 1 {
				a.imm = immVWord32
			}
		}
	}
	if l.vmap == 1 {
		switch l.opcode[l.opLen-1] {
		case 0x71, 0x72, 0x73:
			a.imm = immByte
		}
	}
	return a
}

// oneByteAttr is the one-byte opcode table of x86-opcode-map.txt in 64-bit
// mode. (i64) opcodes keep their 32-bit attributes: the kernel's decoder
// does not reject them (so 0xea, 9a decode with a 6-byte Ap, ce as 1 byte).
var oneByteAttr = func() (t [256]attr) {
	m := attr{modrm: true}
	for _, base := range []int{0x00, 0x08, 0x10, 0x18, 0x20, 0x28, 0x30, 0x38} {
		for i := 0; i < 4; i++ {
			t[base+i] = m // Eb,Gb / Ev,Gv / Gb,Eb / Gv,Ev
		}
		t[base+4] = attr{imm: immByte}    // AL,Ib
		t[base+5] = attr{imm: immVWord32} // rAX,Iz
	}
	for op := 0x50; op <= 0x5f; op++ {
		t[op] = attr{force64: true}
	}
	t[0x62] = m // BOUND Gv,Ma: only where no VEX is looked for (opcodeAttr)
	t[0x63] = m
	t[0xc4] = m // LES Gz,Mp: likewise
	t[0xc5] = m // LDS Gz,Mp
	t[0x68] = attr{imm: immVWord32}
	t[0x69] = attr{modrm: true, imm: immVWord32}
	t[0x6a] = attr{imm: immByte, force64: true}
	t[0x6b] = attr{modrm: true, imm: immByte}
	for op := 0x70; op <= 0x7f; op++ {
		t[op] = attr{imm: immByte}
	}
	t[0x80] = attr{modrm: true, imm: immByte}
	t[0x81] = attr{modrm: true, imm: immVWord32}
	t[0x82] = attr{modrm: true, imm: immByte}
	t[0x83] = attr{modrm: true, imm: immByte}
	for op := 0x84; op <= 0x8e; op++ {
		t[op] = m
	}
	t[0x8f] = attr{modrm: true, force64: true}
	t[0x9a] = attr{imm: immPtr}
	t[0x9c] = attr{force64: true}
	t[0x9d] = attr{force64: true}
	for op := 0xa0; op <= 0xa3; op++ {
		t[op] = attr{moffset: true}
	}
	t[0xa8] = attr{imm: immByte}
	t[0xa9] = attr{imm: immVWord32}
	for op := 0xb0; op <= 0xb7; op++ {
		t[op] = attr{imm: immByte}
	}
	for op := 0xb8; op <= 0xbf; op++ {
		t[op] = attr{imm: immVWord}
	}
	t[0xc0] = attr{modrm: true, imm: immByte}
	t[0xc1] = attr{modrm: true, imm: immByte}
	t[0xc2] = attr{imm: immWord, force64: true}
	t[0xc3] = attr{force64: true}
	t[0xc6] = attr{modrm: true, imm: immByte}
	t[0xc7] = attr{modrm: true, imm: immVWord32}
	t[0xc8] = attr{imm: immWord, imm2: true}
	t[0xc9] = attr{force64: true}
	t[0xca] = attr{imm: immWord}
	t[0xcd] = attr{imm: immByte}
	for op := 0xd0; op <= 0xd3; op++ {
		t[op] = m
	}
	t[0xd4] = attr{imm: immByte}
	t[0xd5] = attr{imm: immByte}
	for op := 0xd8; op <= 0xdf; op++ {
		t[op] = m // ESC: the awk gives x87 escapes INAT_MODRM
	}
	for op := 0xe0; op <= 0xe3; op++ {
		t[op] = attr{imm: immByte, force64: true}
	}
	for op := 0xe4; op <= 0xe7; op++ {
		t[op] = attr{imm: immByte}
	}
	t[0xe8] = attr{imm: immVWord32, force64: true}
	t[0xe9] = attr{imm: immVWord32, force64: true}
	t[0xea] = attr{imm: immPtr}
	t[0xeb] = attr{imm: immByte, force64: true}
	t[0xf6] = m
	t[0xf7] = m
	t[0xfe] = m
	t[0xff] = m
	return
}()

// groupAttrNew is groupAttr for the groups of the tables the 6.12 and 7.3
// maps added: Grp3 and Grp5 in EVEX map 4, GrpXOP4 (XOP map Ah 12 /0 and
// /1: Id).
func groupAttrNew(l *layout, a attr) attr {
	reg := (l.modrm >> 3) & 7
	if l.xop {
		if l.vmap == 0xa && l.opcode[0] == 0x12 && reg <= 1 {
			a.imm = immDword // LWPINS/LWPVAL By,Ed,Id
		}
		return a
	}
	switch l.opcode[0] {
	case 0xf6:
		if reg <= 1 {
			a.imm = immByte // Grp3_1: TEST Eb,Ib
		}
	case 0xf7:
		if reg <= 1 {
			a.imm = immVWord32 // Grp3_2: TEST Ev,Iz
		}
	case 0xff:
		if reg == 2 || reg == 4 || reg == 6 {
			a.force64 = true // Grp5: CALLN, JMPN (f64), PUSH (d64)
		}
	}
	return a
}

// opcodeAttr is the attribute of a one-byte opcode read as an opcode. The
// VEX/EVEX prefix bytes are opcodes only where no VEX is looked for (after
// REX2 in 6.12+, after REX in 7.3): then their 32-bit forms BOUND Gv,Ma,
// LES Gz,Mp and LDS Gz,Mp give them a ModRM.
func opcodeAttr(op byte) attr {
	return oneByteAttr[op]
}

// invalid64 marks the one-byte opcodes gen-insn-attr-x86.awk (7.3) flags
// INAT_INV64: (i64) on a line without (o64). Of them only 82 (Grp1 Eb,Ib),
// 9a (CALLF Ap), d4 (AAM Ib) and ea (JMP-far Ap) had operands.
var invalid64 = func() (t [256]bool) {
	for _, op := range []byte{0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f,
		0x60, 0x61, 0x82, 0x9a, 0xce, 0xd4, 0xea} {
		t[op] = true
	}
	return
}()

// twoByteAttr is the 0x0f table of x86-opcode-map.txt (legacy encoding),
// with its last-prefix variants where they change the length.
func twoByteAttr(op, lpfx byte) attr {
	m := attr{modrm: true}
	switch {
	case op <= 0x03:
		return m // Grp6, Grp7, LAR, LSL
	case op == 0x0d:
		return m // GrpP
	case op == 0x0f:
		return attr{modrm: true, imm: immByte} // 3DNow! Pq,Qq,Ib
	case op >= 0x10 && op <= 0x18:
		return m
	case op == 0x19, op == 0x1d:
		return attr{} // empty in the kernel's map: no ModRM (!)
	case op >= 0x1a && op <= 0x1f:
		return m // BND*, Grp20, Grp21, NOP Ev
	case op >= 0x20 && op <= 0x23:
		return m
	case op >= 0x28 && op <= 0x2f:
		return m
	case op >= 0x40 && op <= 0x6f:
		return m
	case op == 0x70:
		return attr{modrm: true, imm: immByte}
	case op >= 0x71 && op <= 0x73:
		return m // Grp12-14: Ib comes from the group entry
	case op == 0x77:
		return attr{} // emms
	case op >= 0x74 && op <= 0x7f:
		return m
	case op >= 0x80 && op <= 0x8f:
		return attr{imm: immVWord32, force64: true} // Jcc Jz (f64)
	case op >= 0x90 && op <= 0x9f:
		return m
	case op == 0xa0, op == 0xa1, op == 0xa8, op == 0xa9:
		return attr{force64: true}
	case op == 0xa4, op == 0xac:
		return attr{modrm: true, imm: immByte}
	case op == 0xa3, op == 0xa5, op == 0xa6, op == 0xa7, op >= 0xab && op <= 0xaf:
		return m
	case op == 0xb8:
		if lpfx == 0xf3 {
			return m // POPCNT
		}
		return attr{} // JMPE (!F3): no operands
	case op == 0xba:
		return attr{modrm: true, imm: immByte} // Grp8 Ev,Ib
	case op >= 0xb0 && op <= 0xbf:
		return m
	case op == 0xc2, op == 0xc4, op == 0xc5, op == 0xc6:
		return attr{modrm: true, imm: immByte}
	case op >= 0xc0 && op <= 0xc7:
		return m
	case op >= 0xc8 && op <= 0xcf:
		return attr{} // BSWAP
	case op == 0xff:
		return attr{} // UD0 has no operands in the kernel's map (!)
	case op >= 0xd0:
		return m
	}
	// 04-0c, 0e, 24-27, 30-37, 39, 3b-3f: no ModRM, no immediate.
	return attr{}
}

// vexAttr gives the length attributes of a VEX (c4/c5) or EVEX (62) encoded
// opcode in map vmap with VEX.pp pp. Every VEX/EVEX instruction has a ModRM
// byte except vzeroupper/vzeroall (map 1, 0x77); the Ib-carrying opcodes are
// all of map 3 and 0x70-0x73, 0xc2, 0xc4-0xc6 of map 1. Maps other than 1-3
// (and 5-6 for EVEX; 7 with the 6.12 map, 4 is prefixedOpcodeAttr's) have no table:
// inat_get_avx_attribute gives 0 and insn_get_opcode returns -EINVAL.
func (d *Decoder) vexAttr(vmap, op byte, evex bool, pp byte) (attr, bool) {
	if d.apx {
		switch vmap {
		case 7:
			// "f8: URDMSR Rq,Id (F2),(v1),(11B) | UWRMSR Id,Rq (F3),(v1),(11B)":
			// VEX-ok (not VEX-only), so EVEX map 7 decodes too.
			return attr{modrm: true, imm: immDword}, op == 0xf8 && pp >= 2
		}
	}
	switch vmap {
	case 1:
		switch op {
		case 0x77:
			return attr{}, !evex
		case 0x70, 0x71, 0x72, 0x73, 0xc2, 0xc4, 0xc5, 0xc6:
			return attr{modrm: true, imm: immByte}, true
		}
		return attr{modrm: true}, true
	case 2:
		return attr{modrm: true}, true
	case 3:
		return attr{modrm: true, imm: immByte}, true
	case 5, 6:
		return attr{modrm: true}, evex
	}
	return attr{}, false
}
