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

// decodeEntries decodes the table what of size-byte entries at base: dec
// reads one entry e whose first field is at address a.
func decodeEntries[E any](what string, b []byte, base uint64, size int, dec func(e []byte, a uint64) E) ([]E, error) {
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a multiple of the %d-byte entry", what, len(b), size)
	}
	out := make([]E, len(b)/size)
	for i := range out {
		out[i] = dec(b[i*size:], base+uint64(i*size))
	}
	return out, nil
}

// decodeJumpTable decodes a link-order __jump_table whose first entry is
// at address base. Init is left false: jump_label_init sets it.
//
// Models include/linux/jump_label.h:jump_entry_code, jump_entry_target,
// jump_entry_key and jump_entry_is_branch.
func decodeJumpTable(b []byte, base uint64) ([]image.JumpEntry, error) {
	return decodeEntries("__jump_table", b, base, JumpEntrySize, func(e []byte, a uint64) image.JumpEntry {
		key := int64(le.Uint64(e[8:]))
		return image.JumpEntry{
			Code:   rel32(e, a),
			Target: rel32(e[4:], a+4),
			Key:    a + 8 + uint64(key&^3),
			Branch: key&1 != 0,
		}
	})
}

// decodeStaticCallSites decodes link-order .static_call_sites at base.
// Init keeps the build-time bit (objtool never sets it); the loader sets
// it as static_call_init does.
//
// Models kernel/static_call_inline.c:static_call_addr/static_call_key/static_call_is_tail.
func decodeStaticCallSites(b []byte, base uint64) ([]image.StaticCallSite, error) {
	return decodeEntries("static_call_sites", b, base, StaticCallSiteSize, func(e []byte, a uint64) image.StaticCallSite {
		k := rel32(e[4:], a+4)
		return image.StaticCallSite{Addr: rel32(e, a), Key: k &^ 3, Tail: k&1 != 0, Init: k&2 != 0}
	})
}

// decodeBugTable decodes __bug_table entries laid out as lay (the
// generation's struct bug_entry, image.BugEntryLayoutFor) at base; file
// resolves a file-name address to its string ("" when unreadable).
//
// Models lib/bug.c:bug_addr and bug_get_file_line (relative pointers).
func decodeBugTable(b []byte, base uint64, lay image.BugEntryLayout, file func(uint64) string) ([]image.BugEntry, error) {
	return decodeEntries("__bug_table", b, base, lay.Size, func(e []byte, a uint64) image.BugEntry {
		be := image.BugEntry{Addr: rel32(e, a)}
		if lay.File >= 0 && file != nil {
			be.File = file(rel32(e[lay.File:], a+uint64(lay.File)))
		}
		if lay.Line >= 0 {
			be.Line = le.Uint16(e[lay.Line:])
		}
		be.Flags = le.Uint16(e[lay.Flags:])
		return be
	})
}

// decodeExTable decodes __ex_table at base (the data field, a type and
// register encoding, is not modelled).
//
// Models arch/x86/include/asm/extable.h: ex_to_insn / ex_fixup_addr.
func decodeExTable(b []byte, base uint64) ([]image.ExEntry, error) {
	return decodeEntries("__ex_table", b, base, ExEntrySize, func(e []byte, a uint64) image.ExEntry {
		return image.ExEntry{Insn: rel32(e, a), Fixup: rel32(e[4:], a+4)}
	})
}

// decodePtrs decodes an array of absolute u64 addresses.
func decodePtrs(what string, b []byte) ([]uint64, error) {
	return decodeEntries(what, b, 0, PtrSize, func(e []byte, _ uint64) uint64 { return le.Uint64(e) })
}
