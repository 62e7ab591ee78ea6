// Package ktab is the compressed kallsyms table as the kernel's build
// emits it (scripts/kallsyms.c), byte for byte: kallsyms_names with its
// 1- and 2-byte length headers, kallsyms_markers, kallsyms_seqs_of_names,
// kallsyms_token_table, kallsyms_token_index and kallsyms_offsets with the
// relative base, plus the extra tables the proposed patches add. Package
// kallsyms runs the lookups over it.
package ktab

import "github.com/kpsim/kpsim/sim"

// Symbol is one input symbol (a System.map or /proc/kallsyms line).
type Symbol struct {
	Addr   uint64
	Type   byte   // nm type letter as given ('T', 't', 'D', ...)
	Name   string // without the type
	Module string // "" for vmlinux; module symbols are kept apart, never compressed
}

// Tables is the build's output for vmlinux.
type Tables struct {
	// NumSyms is kallsyms_num_syms.
	NumSyms int
	// Names is kallsyms_names: NumSyms records, each a length header (one
	// byte, or two when the length is >= 0x80: low 7 bits | 0x80, then the
	// rest) followed by that many token bytes; the first expanded character
	// is the type letter.
	Names []byte
	// Markers is kallsyms_markers: the byte offset in Names of record 0,
	// 256, 512, ...
	Markers []uint32
	// SeqsOfNames is kallsyms_seqs_of_names: 3 bytes per symbol, most
	// significant first; entry j is the kallsyms index of the j-th symbol
	// in name order.
	SeqsOfNames []byte
	// TokenTable is kallsyms_token_table: 256 NUL-terminated strings.
	TokenTable []byte
	// TokenIndex is kallsyms_token_index: byte offset of token b's string.
	TokenIndex [256]uint16
	// Offsets is kallsyms_offsets, encoded as the options say (see
	// SymAddress); RelativeBase is kallsyms_relative_base.
	Offsets      []int32
	RelativeBase uint64
	// Text is the address of _text in the input (0 if absent): the tool
	// emits kallsyms_addresses and kallsyms_relative_base as
	// "_text + off", i.e. relative to it.
	Text uint64
	// Addresses is kallsyms_addresses, used instead of Offsets without
	// --base-relative.
	Addresses []uint64
	// Build options the tables were made with.
	BaseRelative   bool
	AbsolutePercpu bool
	AllSymbols     bool

	// Syms are the kept symbols in kallsyms index order (what the build
	// sorted; simulator-side, not kernel data). Type is the stored type
	// char: 'A' for per-cpu symbols under AbsolutePercpu, as the kernel
	// then prints them.
	Syms []Symbol

	// ModSyms are the module symbols of the input (Module != ""), in
	// input order; they are never compressed.
	ModSyms []Symbol
	// Warnings are the tool's non-fatal messages (6.1 skips names of
	// KSYM_NAME_LEN bytes or more with a message on stderr).
	Warnings []string

	// derived is the simulator's store of data derived from these
	// tables (see Derived); a copy of the struct gets a store of its own.
	derived sim.DerivedSlot
}

// SymAddress decodes kallsyms_offsets[i] as kernel/kallsyms.c:
// kallsyms_sym_address does for the options the table was built with.
//
// Models kernel/kallsyms.c:kallsyms_sym_address.
func (t *Tables) SymAddress(i int) uint64 {
	if !t.BaseRelative {
		return t.Addresses[i]
	}
	off := t.Offsets[i]
	if !t.AbsolutePercpu {
		return t.RelativeBase + uint64(uint32(off))
	}
	if off >= 0 {
		return uint64(off)
	}
	return t.RelativeBase - 1 - uint64(int64(off))
}
