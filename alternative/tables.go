package alternative

import (
	"encoding/binary"
	"fmt"
)

var le = binary.LittleEndian

// Entry sizes of the site tables (x86-64, 6.1).
const (
	AltInstrSize = 12 // struct alt_instr, __packed
	ParaSiteSize = 16 // _paravirt_alt: .quad instr, .byte type, .byte len, .short clobber, aligned to 8
	SiteSize     = 4  // .retpoline_sites, .return_sites, .smp_locks: s32 self-relative

	// AltInstrSize14 is struct alt_instr from 6.3 on (6.12, 7.3): s32
	// instr_offset, s32 repl_offset, u32 ft_flags (cpuid:16, flags:16),
	// u8 instrlen, u8 replacementlen, __packed.
	AltInstrSize14 = 14
)

// alt_instr.flags (arch/x86/include/asm/alternative.h, 6.12, 7.3).
const (
	AltFlagNot        = 1 << 0 // ALT_FLAG_NOT: patch if the feature is absent
	AltFlagDirectCall = 1 << 1 // ALT_FLAG_DIRECT_CALL: the replacement call takes the pv_ops target
)

// AltInstr is one struct alt_instr decoded to absolute addresses.
type AltInstr struct {
	Instr    uint64 // the original instruction: &instr_offset + instr_offset
	Repl     uint64 // the replacement: &repl_offset + repl_offset
	CPUID    uint16 // feature bit, with FlagInv for ALT_NOT (6.1)
	Flags    uint16 // ALT_FLAG_* (6.12, 7.3; 0 in 6.1's layout)
	InstrLen uint8  // original length including its padding
	ReplLen  uint8  // replacement length (0: NOPs only)
}

// Feature returns the tested feature bit (cpuid without FlagInv).
func (a AltInstr) Feature() Feature { return Feature(a.CPUID &^ FlagInv) }

// Inv reports ALTINSTR_FLAG_INV (6.1) or ALT_FLAG_NOT (6.12, 7.3): patch
// when the feature is absent. (No feature bit reaches bit 15, so the 6.1
// test is false on the wider layout.)
func (a AltInstr) Inv() bool { return a.CPUID&FlagInv != 0 || a.Flags&AltFlagNot != 0 }

// DirectCall reports ALT_FLAG_DIRECT_CALL.
func (a AltInstr) DirectCall() bool { return a.Flags&AltFlagDirectCall != 0 }

// ParaSite is one .parainstructions entry (struct paravirt_patch_site
// plus the clobber mask the emitting macro writes and the C struct does
// not name).
type ParaSite struct {
	Instr   uint64 // absolute address of the pv call (u8 *instr)
	Type    uint8  // pv_ops slot: offsetof(struct paravirt_patch_template, op)/8
	Len     uint8  // bytes of the site (6 for "call *pv_ops+off(%rip)")
	Clobber uint16 // CLBR_* mask (unused by 6.1's patcher)
}

// ParseAltInstructions decodes a .altinstructions table whose first
// entry is at address base. The two offsets are relative to their own
// fields, as apply_alternatives reads them.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives (its reads of
// struct alt_instr).
func ParseAltInstructions(b []byte, base uint64) ([]AltInstr, error) {
	if len(b)%AltInstrSize != 0 {
		return nil, fmt.Errorf(".altinstructions: %d bytes is not a multiple of the %d-byte struct alt_instr", len(b), AltInstrSize)
	}
	out := make([]AltInstr, len(b)/AltInstrSize)
	for i := range out {
		e := b[i*AltInstrSize:]
		a := base + uint64(i*AltInstrSize)
		out[i] = AltInstr{
			Instr:    a + uint64(int64(int32(le.Uint32(e)))),
			Repl:     a + 4 + uint64(int64(int32(le.Uint32(e[4:])))),
			CPUID:    le.Uint16(e[8:]),
			InstrLen: e[10],
			ReplLen:  e[11],
		}
		if f := out[i].Feature(); f >= featureLimit {
			// apply_alternatives: BUG_ON(feature >= (NCAPINTS + NBUGINTS) * 32).
			return nil, fmt.Errorf(".altinstructions entry %d at %#x: feature bit %d is past the %d-bit capability array", i, a, f, featureLimit)
		}
		if out[i].InstrLen > MaxPatchLen || out[i].ReplLen > MaxPatchLen {
			return nil, fmt.Errorf(".altinstructions entry %d at %#x: lengths %d/%d exceed MAX_PATCH_LEN %d", i, a, out[i].InstrLen, out[i].ReplLen, MaxPatchLen)
		}
	}
	return out, nil
}

// ParseAltInstructions14 decodes a 6.12 / 7.3 .altinstructions table
// (14-byte entries) whose first entry is at address base.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives (6.12) and
// analyze_patch_site (7.3): their reads of struct alt_instr, with the
// BUG_ONs on the feature bit and the length.
func ParseAltInstructions14(b []byte, base uint64) ([]AltInstr, error) {
	const n = AltInstrSize14
	if len(b)%n != 0 {
		return nil, fmt.Errorf(".altinstructions: %d bytes is not a multiple of the %d-byte struct alt_instr", len(b), n)
	}
	out := make([]AltInstr, len(b)/n)
	for i := range out {
		e := b[i*n:]
		a := base + uint64(i*n)
		out[i] = AltInstr{
			Instr:    a + uint64(int64(int32(le.Uint32(e)))),
			Repl:     a + 4 + uint64(int64(int32(le.Uint32(e[4:])))),
			CPUID:    le.Uint16(e[8:]),
			Flags:    le.Uint16(e[10:]),
			InstrLen: e[12],
			ReplLen:  e[13],
		}
		if f := Feature(out[i].CPUID); f >= featureLimit {
			return nil, fmt.Errorf(".altinstructions entry %d at %#x: feature bit %d is past the %d-bit capability array", i, a, f, featureLimit)
		}
		if out[i].InstrLen > MaxPatchLen || out[i].ReplLen > MaxPatchLen {
			return nil, fmt.Errorf(".altinstructions entry %d at %#x: lengths %d/%d exceed MAX_PATCH_LEN %d", i, a, out[i].InstrLen, out[i].ReplLen, MaxPatchLen)
		}
	}
	return out, nil
}

// ParseParaInstructions decodes a .parainstructions table (after
// relocation, in a module). The instr field is absolute.
//
// Models arch/x86/kernel/alternative.c:apply_paravirt (its reads of
// struct paravirt_patch_site).
func ParseParaInstructions(b []byte) ([]ParaSite, error) {
	if len(b)%ParaSiteSize != 0 {
		return nil, fmt.Errorf(".parainstructions: %d bytes is not a multiple of the %d-byte entry", len(b), ParaSiteSize)
	}
	out := make([]ParaSite, len(b)/ParaSiteSize)
	for i := range out {
		e := b[i*ParaSiteSize:]
		out[i] = ParaSite{Instr: le.Uint64(e), Type: e[8], Len: e[9], Clobber: le.Uint16(e[10:])}
		if out[i].Len > MaxPatchLen {
			// apply_paravirt: BUG_ON(p->len > MAX_PATCH_LEN).
			return nil, fmt.Errorf(".parainstructions entry %d: length %d exceeds MAX_PATCH_LEN %d", i, out[i].Len, MaxPatchLen)
		}
	}
	return out, nil
}

// ParseSites decodes an s32 self-relative site list (.retpoline_sites,
// .return_sites, .smp_locks, .ibt_endbr_seal) at address base; name is
// the table's name for errors.
func ParseSites(name string, b []byte, base uint64) ([]uint64, error) {
	if len(b)%SiteSize != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a multiple of the %d-byte entry", name, len(b), SiteSize)
	}
	out := make([]uint64, len(b)/SiteSize)
	for i := range out {
		a := base + uint64(i*SiteSize)
		out[i] = a + uint64(int64(int32(le.Uint32(b[i*SiteSize:]))))
	}
	return out, nil
}

// Tables are one object's (vmlinux's or a module's) boot-patch site
// tables, in table order.
type Tables struct {
	Para         []ParaSite // .parainstructions
	Retpolines   []uint64   // .retpoline_sites
	Returns      []uint64   // .return_sites
	Alternatives []AltInstr // .altinstructions
	CallSites    []uint64   // .call_sites (6.12, 7.3)
	EndbrSeal    []uint64   // .ibt_endbr_seal (6.12, 7.3)
}
