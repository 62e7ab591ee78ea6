package image

// BugEntryLayout is where struct bug_entry keeps its fields, in bytes
// from the entry's start (every pointer field is an s32 relative to its
// own address). A field at offset -1 is absent.
type BugEntryLayout struct {
	Size                      int
	Format, File, Line, Flags int
	Verbose                   bool
}

// BugEntryLayoutFor is the bug_entry of generation g, with or without
// CONFIG_DEBUG_BUGVERBOSE (file and line).
//
// 6.1 and 6.12 (include/asm-generic/bug.h, arch/x86/include/asm/bug.h
// ASM_BUG / _BUG_FLAGS): bug_addr_disp, [file_disp, line], flags; 12 or
// 8 bytes. 7.3 adds a format string (HAVE_ARCH_BUG_FORMAT, always on
// x86-64, for WARN's message) after bug_addr: bug_addr, format, [file,
// line], flags; 16 or 12 bytes (the .org in _BUG_FLAGS_ASM pads to
// sizeof(struct bug_entry)).
func BugEntryLayoutFor(g Generation, verbose bool) BugEntryLayout {
	switch g.Effective() {
	case Gen73:
		if verbose {
			return BugEntryLayout{Size: 16, Format: 4, File: 8, Line: 12, Flags: 14, Verbose: true}
		}
		return BugEntryLayout{Size: 12, Format: 4, File: -1, Line: -1, Flags: 8}
	default:
		if verbose {
			return BugEntryLayout{Size: 12, Format: -1, File: 4, Line: 8, Flags: 10, Verbose: true}
		}
		return BugEntryLayout{Size: 8, Format: -1, File: -1, Line: -1, Flags: 4}
	}
}
