// Package ktab is the compressed kallsyms table as the kernel's build
// emits it (scripts/kallsyms.c), byte for byte: kallsyms_names with its
// 1- and 2-byte length headers, kallsyms_markers, kallsyms_seqs_of_names,
// kallsyms_token_table, kallsyms_token_index and kallsyms_offsets with the
// relative base, plus the extra tables the proposed patches add. Package
// kallsyms runs the lookups over it.
package ktab

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

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
	// Encoding and SymAddress); RelativeBase is kallsyms_relative_base
	// (base-relative encodings only).
	Offsets      []int32
	RelativeBase uint64
	// OffsetsAddr is the link address of kallsyms_offsets, which the
	// PC-relative entries (7.3) are relative to: entry i lies at
	// OffsetsAddr + 4·i. Zero in the other encodings.
	OffsetsAddr uint64
	// Text is the address of _text in the input (0 if absent): the tool
	// emits kallsyms_addresses and kallsyms_relative_base as
	// "_text + off", i.e. relative to it.
	Text uint64
	// Addresses is kallsyms_addresses, used instead of Offsets without
	// --base-relative.
	Addresses []uint64
	// Build options the tables were made with (see Options).
	BaseRelative   bool
	AbsolutePercpu bool
	PCRelative     bool
	AllSymbols     bool
	// Gen is the generation whose scripts/kallsyms.c made the tables:
	// it decides write_src's object order (Objects) and, with the
	// options, the Encoding. GenUnknown is 6.1.
	Gen image.Generation

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

// Encoding is how the tables hold the addresses, from the build options
// and the generation's tool (see Encoding's constants).
func (t *Tables) Encoding() Encoding {
	return toolOf(t.Gen).encoding(t.BaseRelative, t.AbsolutePercpu, t.PCRelative)
}

// SymAddress decodes kallsyms_offsets[i] (kallsyms_addresses[i]) as
// kernel/kallsyms.c:kallsyms_sym_address does for the table's Encoding:
// the config options the function tests (CONFIG_KALLSYMS_BASE_RELATIVE
// and ABSOLUTE_PERCPU in 6.1, ABSOLUTE_PERCPU in 6.12, CONFIG_64BIT and
// CONFIG_RELOCATABLE in 7.3) are what the build flags were made from. One
// function, each encoding's branch marked with the versions whose
// function it is: this is the simulator's hottest table read, and it
// stays small enough to inline.
//
// Models kernel/kallsyms.c:kallsyms_sym_address (6.1, 6.12, 7.3).
func (t *Tables) SymAddress(i int) uint64 {
	if t.PCRelative {
		// 7.3, CONFIG_64BIT || CONFIG_RELOCATABLE:
		// offset_to_ptr(kallsyms_offsets + idx).
		return t.OffsetsAddr + 4*uint64(i) + uint64(int64(t.Offsets[i]))
	}
	if !t.BaseRelative {
		if plainEncodings[t.Gen] == EncodingAbsolute32 {
			// 7.3, !CONFIG_64BIT && !CONFIG_RELOCATABLE: the value.
			return uint64(uint32(t.Offsets[i]))
		}
		// 6.1, !CONFIG_KALLSYMS_BASE_RELATIVE: kallsyms_addresses[idx].
		return t.Addresses[i]
	}
	off := t.Offsets[i]
	if !t.AbsolutePercpu {
		// 6.1, 6.12 without CONFIG_KALLSYMS_ABSOLUTE_PERCPU: unsigned
		// offsets from kallsyms_relative_base.
		return t.RelativeBase + uint64(uint32(off))
	}
	// 6.1, 6.12 with CONFIG_KALLSYMS_ABSOLUTE_PERCPU: non-negative
	// offsets are absolute values, negative ones relative to
	// kallsyms_relative_base - 1.
	if off >= 0 {
		return uint64(off)
	}
	return t.RelativeBase - 1 - uint64(int64(off))
}
