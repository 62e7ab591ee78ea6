package elfload

import (
	"fmt"

	"github.com/kpsim/kpsim/image"
)

// Entry sizes of the x86-64 6.1 tables.
const (
	JumpEntrySize      = 16 // struct jump_entry: s32 code, s32 target, s64 key
	StaticCallSiteSize = 8  // struct static_call_site: s32 addr, s32 key
	BugEntrySize       = 12 // struct bug_entry, CONFIG_DEBUG_BUGVERBOSE + relative pointers
	BugEntrySizeShort  = 8  // struct bug_entry without CONFIG_DEBUG_BUGVERBOSE
	ExEntrySize        = 12 // struct exception_table_entry: s32 insn, fixup, data
	PtrSize            = 8  // _kprobe_blacklist and __mcount_loc entries
)

func rel32(b []byte, fieldAddr uint64) uint64 {
	return fieldAddr + uint64(int64(int32(le.Uint32(b))))
}

func checkSpan(what string, b []byte, size int) error {
	if len(b)%size != 0 {
		return fmt.Errorf("%s: %d bytes is not a multiple of the %d-byte entry", what, len(b), size)
	}
	return nil
}

// decodeJumpTable decodes a link-order __jump_table whose first entry is
// at address base. Init is left false: jump_label_init sets it.
//
// Models include/linux/jump_label.h:jump_entry_code, jump_entry_target,
// jump_entry_key and jump_entry_is_branch.
func decodeJumpTable(b []byte, base uint64) ([]image.JumpEntry, error) {
	if err := checkSpan("__jump_table", b, JumpEntrySize); err != nil {
		return nil, err
	}
	out := make([]image.JumpEntry, len(b)/JumpEntrySize)
	for i := range out {
		e := b[i*JumpEntrySize:]
		a := base + uint64(i*JumpEntrySize)
		key := int64(le.Uint64(e[8:]))
		out[i] = image.JumpEntry{
			Code:   rel32(e, a),
			Target: rel32(e[4:], a+4),
			Key:    a + 8 + uint64(key&^3),
			Branch: key&1 != 0,
		}
	}
	return out, nil
}

// decodeStaticCallSites decodes link-order .static_call_sites at base.
// Init keeps the build-time bit (objtool never sets it); the loader sets
// it as static_call_init does.
//
// Models kernel/static_call_inline.c:static_call_addr/static_call_key/static_call_is_tail.
func decodeStaticCallSites(b []byte, base uint64) ([]image.StaticCallSite, error) {
	if err := checkSpan("static_call_sites", b, StaticCallSiteSize); err != nil {
		return nil, err
	}
	out := make([]image.StaticCallSite, len(b)/StaticCallSiteSize)
	for i := range out {
		e := b[i*StaticCallSiteSize:]
		a := base + uint64(i*StaticCallSiteSize)
		k := rel32(e[4:], a+4)
		out[i] = image.StaticCallSite{Addr: rel32(e, a), Key: k &^ 3, Tail: k&1 != 0, Init: k&2 != 0}
	}
	return out, nil
}

// decodeBugTable decodes __bug_table entries of size (12 with
// CONFIG_DEBUG_BUGVERBOSE, 8 without) at base; file resolves a file-name
// address to its string ("" when unreadable).
//
// Models lib/bug.c:bug_addr and bug_get_file_line (relative pointers).
func decodeBugTable(b []byte, base uint64, size int, file func(uint64) string) ([]image.BugEntry, error) {
	if size != BugEntrySize && size != BugEntrySizeShort {
		return nil, fmt.Errorf("__bug_table: unsupported entry size %d", size)
	}
	if err := checkSpan("__bug_table", b, size); err != nil {
		return nil, err
	}
	out := make([]image.BugEntry, len(b)/size)
	for i := range out {
		e := b[i*size:]
		a := base + uint64(i*size)
		be := image.BugEntry{Addr: rel32(e, a)}
		if size == BugEntrySize {
			if file != nil {
				be.File = file(rel32(e[4:], a+4))
			}
			be.Line = le.Uint16(e[8:])
			be.Flags = le.Uint16(e[10:])
		} else {
			be.Flags = le.Uint16(e[4:]) // s32 bug_addr_disp, u16 flags, 2 bytes padding
		}
		out[i] = be
	}
	return out, nil
}

// decodeExTable decodes __ex_table at base (the data field, a type and
// register encoding, is not modelled).
//
// Models arch/x86/include/asm/extable.h: ex_to_insn / ex_fixup_addr.
func decodeExTable(b []byte, base uint64) ([]image.ExEntry, error) {
	if err := checkSpan("__ex_table", b, ExEntrySize); err != nil {
		return nil, err
	}
	out := make([]image.ExEntry, len(b)/ExEntrySize)
	for i := range out {
		e := b[i*ExEntrySize:]
		a := base + uint64(i*ExEntrySize)
		out[i] = image.ExEntry{Insn: rel32(e, a), Fixup: rel32(e[4:], a+4)}
	}
	return out, nil
}

// decodePtrs decodes an array of absolute u64 addresses.
func decodePtrs(what string, b []byte) ([]uint64, error) {
	if err := checkSpan(what, b, PtrSize); err != nil {
		return nil, err
	}
	out := make([]uint64, len(b)/PtrSize)
	for i := range out {
		out[i] = le.Uint64(b[i*PtrSize:])
	}
	return out, nil
}
