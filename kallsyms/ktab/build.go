package ktab

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// Options are scripts/kallsyms.c's command-line flags, for the
// generation Gen's tool. --lto-clang (6.1) is not modelled: it only
// changes the name sort of kallsyms_seqs_of_names for CONFIG_LTO_CLANG
// kernels. OptionsFor(gen) gives a Debian x86-64 kernel's flags; a flag
// the generation's tool does not have is an error of Build.
type Options struct {
	// AllSymbols is --all-symbols (CONFIG_KALLSYMS_ALL): keep symbols
	// outside the text ranges.
	AllSymbols bool
	// AbsolutePercpu is --absolute-percpu (CONFIG_KALLSYMS_ABSOLUTE_PERCPU,
	// x86-64 SMP in 6.1 and 6.12; gone in 7.3): per-cpu symbols become
	// absolute, type 'A'.
	AbsolutePercpu bool
	// BaseRelative is --base-relative (CONFIG_KALLSYMS_BASE_RELATIVE, 6.1):
	// kallsyms_offsets + kallsyms_relative_base instead of
	// kallsyms_addresses. 6.12's tool has no flag and is always
	// base-relative: BaseRelative must be set; 7.3 has neither.
	BaseRelative bool
	// PCRelative is 7.3's --pc-relative (CONFIG_64BIT ||
	// CONFIG_RELOCATABLE): kallsyms_offsets[i] holds the distance from
	// its own slot to the symbol, no kallsyms_relative_base.
	PCRelative bool
	// Gen is the generation whose scripts/kallsyms.c (and, from 6.12 on,
	// the scripts/mksysmap filter link-vmlinux.sh runs in front of it)
	// Build models: symbol filters, flags, write_src's object order.
	// GenUnknown is 6.1.
	Gen image.Generation
}

// addrRange models scripts/kallsyms.c:struct addr_range.
type addrRange struct {
	startSym, endSym string
	start, end       uint64
}

// symEntry models scripts/kallsyms.c:struct sym_entry. sym is type+name,
// compressed in place by the token table build.
type symEntry struct {
	addr           uint64
	seq            uint32
	startPos       uint32
	percpuAbsolute bool
	sym            []byte
	name           string // the uncompressed name (without type)
}

// Models scripts/kallsyms.c:check_symbol_range. A later definition of a
// range symbol overrides an earlier one, as in C.
func checkSymbolRange(name string, addr uint64, ranges []addrRange) {
	for i := range ranges {
		ar := &ranges[i]
		if name == ar.startSym {
			ar.start = addr
			return
		} else if name == ar.endSym {
			ar.end = addr
			return
		}
	}
}

// Models scripts/kallsyms.c:symbol_in_range (inclusive at both ends).
func symbolInRange(addr uint64, ranges []addrRange) bool {
	for _, ar := range ranges {
		if addr >= ar.start && addr <= ar.end {
			return true
		}
	}
	return false
}

// builder holds scripts/kallsyms.c's globals for one run.
type builder struct {
	opt         Options
	tool        *tool
	text        uint64 // _text
	offsetsAddr uint64 // kallsyms_offsets in the input (7.3 --pc-relative)
	hasOffsets  bool
	textRanges  [2]addrRange
	percpuRange [1]addrRange
	table       []*symEntry
	relBase     uint64
	warnings    []string

	tokenProfit  [0x10000]int32
	bestTable    [256][2]byte
	bestTableLen [256]byte
	pairSyms     [0x10000][]int32 // symbols that may contain each pair
}

// Build runs generation opt.Gen's scripts/kallsyms.c pipeline on syms,
// given in input (System.map or `nm -n`) order: from 6.12 on first the
// scripts/mksysmap filter link-vmlinux.sh runs in front of the tool (a
// no-op on a System.map, which is its output), then read_map (filters of
// read_symbol/is_ignored_symbol, the text and per-cpu ranges),
// shrink_table (symbol_valid), make_percpus_absolute, sort_symbols,
// record_relative_base, optimize_token_table and write_src. The tables are
// byte-identical to what the tool emits for the same input and flags and,
// for 7.3's --pc-relative, to what the linker makes of its
// `.long _text - . + off` when kallsyms_offsets lies where the input's
// kallsyms_offsets symbol says (see Tables.OffsetsAddr).
//
// Module symbols (Module != "") are not compressed: they are returned in
// Tables.ModSyms in input order and take no part in the build (the real
// tool never sees them). Names of KSYM_NAME_LEN bytes or more are skipped
// with a warning in Tables.Warnings, as read_symbol does. A name that is
// empty or contains a NUL or C whitespace byte, or a type that is NUL or
// whitespace (from 6.12 on: or not ASCII), cannot come out of the tool's
// parser and is an error. Other errors are the tool's own failures: a
// flag the generation's tool lacks, no valid symbol (6.1), an address out
// of range of the relative encoding.
func Build(syms []Symbol, opt Options) (*Tables, error) {
	tl := toolOf(opt.Gen)
	if err := tl.check(opt); err != nil {
		return nil, err
	}
	b := &builder{opt: opt, tool: tl}
	b.textRanges = [2]addrRange{{startSym: "_stext", endSym: "_etext"}, {startSym: "_sinittext", endSym: "_einittext"}}
	b.percpuRange = [1]addrRange{{startSym: "__per_cpu_start", endSym: "__per_cpu_end", start: math.MaxUint64, end: 0}}
	t := &Tables{BaseRelative: opt.BaseRelative, AbsolutePercpu: opt.AbsolutePercpu, PCRelative: opt.PCRelative,
		AllSymbols: opt.AllSymbols, Gen: opt.Gen}
	if err := b.readMap(syms, t); err != nil {
		return nil, err
	}
	if err := b.shrinkTable(); err != nil {
		return nil, err
	}
	if tl.compareNamesBuf {
		for _, s := range b.table {
			if len(s.name) == KSYM_NAME_LEN-1 {
				// type + 511 + NUL = 513 bytes into char[512]: 6.1's tool is
				// undefined here (observed: a corrupted seqs table).
				b.warnings = append(b.warnings, fmt.Sprintf("Symbol %s: a 511-byte name overflows 6.1 compare_names' %d-byte buffer; the real tool's kallsyms_seqs_of_names is undefined, this model sorts it as intended.", s.name, KSYM_NAME_LEN))
			}
		}
	}
	if opt.AbsolutePercpu {
		b.makePercpusAbsolute()
	}
	b.sortSymbols()
	if opt.BaseRelative {
		b.recordRelativeBase()
	}
	// Keep the uncompressed type+name for Syms before compression.
	t.Syms = make([]Symbol, len(b.table))
	for i, s := range b.table {
		t.Syms[i] = Symbol{Addr: s.addr, Type: s.sym[0], Name: s.name}
	}
	b.optimizeTokenTable()
	if err := b.writeSrc(t); err != nil {
		return nil, err
	}
	t.Warnings = b.warnings
	t.Text = b.text
	return t, nil
}

// readMap reads the input as link-vmlinux.sh feeds it to the tool: from
// 6.12 on through scripts/mksysmap first.
//
// Models scripts/kallsyms.c:read_map and read_symbol (6.1, 6.12, 7.3).
func (b *builder) readMap(syms []Symbol, t *Tables) error {
	b.table = make([]*symEntry, 0, len(syms))
	for i := range syms {
		s := &syms[i]
		if s.Module != "" {
			t.ModSyms = append(t.ModSyms, *s)
			continue
		}
		if s.Name == "" {
			return fmt.Errorf("ktab: symbol %d: empty name", i)
		}
		if s.Type == 0 || isSpace(s.Type) {
			return fmt.Errorf("ktab: symbol %d (%q): type %#02x is not a printable type character", i, s.Name, s.Type)
		}
		if b.tool.mksysmap != nil && b.tool.mksysmap(s.Name, s.Type) {
			continue
		}
		if b.tool.asciiType && s.Type >= 0x80 {
			return fmt.Errorf("ktab: symbol %d (%q): type %#02x is not ASCII (%s read_symbol: \"line format error\")", i, s.Name, s.Type, b.tool.gen)
		}
		for j := 0; j < len(s.Name); j++ {
			if c := s.Name[j]; c == 0 || isSpace(c) {
				return fmt.Errorf("ktab: symbol %d (%q): name contains byte %#02x", i, s.Name, c)
			}
		}
		if len(s.Name) >= KSYM_NAME_LEN {
			b.warnings = append(b.warnings, fmt.Sprintf("Symbol %s too long for kallsyms (%d >= %d).", s.Name, len(s.Name), KSYM_NAME_LEN))
			continue
		}
		if s.Name == "_text" {
			b.text = s.Addr
		}
		if s.Name == ObjOffsets {
			// Not the tool's: where the linker puts the object that
			// the PC-relative entries are relative to.
			b.offsetsAddr, b.hasOffsets = s.Addr, true
		}
		if b.tool.isIgnoredSymbol(s.Name, s.Type) {
			continue
		}
		checkSymbolRange(s.Name, s.Addr, b.textRanges[:])
		checkSymbolRange(s.Name, s.Addr, b.percpuRange[:])
		sym := make([]byte, 1+len(s.Name))
		sym[0] = s.Type
		copy(sym[1:], s.Name)
		b.table = append(b.table, &symEntry{addr: s.Addr, startPos: uint32(len(b.table)), sym: sym, name: s.Name})
	}
	return nil
}

// From 6.12 on __start_* and __stop_* (section bounds) are kept outside
// the text ranges too.
//
// Models scripts/kallsyms.c:symbol_valid (6.1, 6.12, 7.3).
func (b *builder) symbolValid(s *symEntry) bool {
	if !b.opt.AllSymbols {
		if b.tool.startStopValid && (strings.HasPrefix(s.name, "__start_") || strings.HasPrefix(s.name, "__stop_")) {
			return true
		}
		if !symbolInRange(s.addr, b.textRanges[:]) {
			return false
		}
		// Corner case: drop symbols at _etext/_einittext other than those.
		tr, ir := &b.textRanges[0], &b.textRanges[1]
		if (s.addr == tr.end && s.name != tr.endSym) || (s.addr == ir.end && s.name != ir.endSym) {
			return false
		}
	}
	return true
}

// An empty result is the tool's failure in 6.1 only.
//
// Models scripts/kallsyms.c:shrink_table (6.1, 6.12, 7.3).
func (b *builder) shrinkTable() error {
	pos := 0
	for _, s := range b.table {
		if b.symbolValid(s) {
			b.table[pos] = s
			pos++
		}
	}
	clear(b.table[pos:])
	b.table = b.table[:pos]
	if pos == 0 && b.tool.emptyFails {
		return errors.New("ktab: no valid symbol (6.1 shrink_table: \"No valid symbol.\")")
	}
	return nil
}

// Models scripts/kallsyms.c:make_percpus_absolute: symbols inside
// [__per_cpu_start, __per_cpu_end] get type 'A' and the absolute flag.
func (b *builder) makePercpusAbsolute() {
	for _, s := range b.table {
		if symbolInRange(s.addr, b.percpuRange[:]) {
			s.sym[0] = 'A'
			s.percpuAbsolute = true
		}
	}
}

// Models scripts/kallsyms.c:may_be_linker_script_provide_symbol.
func mayBeLinkerScriptProvideSymbol(name string) bool {
	n := len(name)
	if n < 8 || name[0] != '_' || name[1] != '_' {
		return false
	}
	return strings.HasPrefix(name[2:], "start_") ||
		strings.HasPrefix(name[2:], "stop_") ||
		strings.HasPrefix(name[2:], "end_") ||
		strings.HasSuffix(name, "_start") ||
		strings.HasSuffix(name, "_end")
}

func isWeak(t byte) bool { return t == 'w' || t == 'W' }

func leadingUnderscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// compareSymbols is a total order (start_pos is unique), so any correct
// sort reproduces qsort's result.
//
// Models scripts/kallsyms.c:compare_symbols (6.1).
func compareSymbols(sa, sb *symEntry) int {
	if c := cmp.Compare(sa.addr, sb.addr); c != 0 {
		return c
	}
	// Weakness is read from sym[0], after make_percpus_absolute.
	if wa, wb := b2i(isWeak(sa.sym[0])), b2i(isWeak(sb.sym[0])); wa != wb {
		return wa - wb
	}
	if wa, wb := b2i(mayBeLinkerScriptProvideSymbol(sa.name)), b2i(mayBeLinkerScriptProvideSymbol(sb.name)); wa != wb {
		return wa - wb
	}
	if wa, wb := leadingUnderscores(sa.name), leadingUnderscores(sb.name); wa != wb {
		return wa - wb
	}
	return cmp.Compare(sa.startPos, sb.startPos)
}

// Models scripts/kallsyms.c:sort_symbols.
func (b *builder) sortSymbols() { slices.SortFunc(b.table, compareSymbols) }

// Models scripts/kallsyms.c:record_relative_base: the first non-absolute
// symbol in sorted order (0 when all are absolute).
func (b *builder) recordRelativeBase() {
	for _, s := range b.table {
		if !s.percpuAbsolute {
			b.relBase = s.addr
			return
		}
	}
}

// pairKey is the token_profit index of pair (a, b): first byte low.
func pairKey(a, c byte) int { return int(a) | int(c)<<8 }

// Models scripts/kallsyms.c:learn_symbol.
func (b *builder) learnSymbol(sym []byte) {
	for i := 0; i+1 < len(sym); i++ {
		b.tokenProfit[pairKey(sym[i], sym[i+1])]++
	}
}

// Models scripts/kallsyms.c:forget_symbol.
func (b *builder) forgetSymbol(sym []byte) {
	for i := 0; i+1 < len(sym); i++ {
		b.tokenProfit[pairKey(sym[i], sym[i+1])]--
	}
}

// note records symbol idx in the lists of the pairs of sym; with only >= 0
// just the pairs containing byte only. A list may hold an index twice or
// hold stale indices; compressSymbols re-checks each symbol.
func (b *builder) note(idx int32, sym []byte, only int) {
	for i := 0; i+1 < len(sym); i++ {
		if only >= 0 && int(sym[i]) != only && int(sym[i+1]) != only {
			continue
		}
		k := pairKey(sym[i], sym[i+1])
		l := b.pairSyms[k]
		if n := len(l); n > 0 && l[n-1] == idx {
			continue
		}
		b.pairSyms[k] = append(l, idx)
	}
}

// Models scripts/kallsyms.c:build_initial_tok_table.
func (b *builder) buildInitialTokTable() {
	for i, s := range b.table {
		b.learnSymbol(s.sym)
		b.note(int32(i), s.sym, -1)
	}
}

// Models scripts/kallsyms.c:find_token: first position of the pair.
func findToken(str []byte, a, c byte) int {
	for i := 0; i+1 < len(str); i++ {
		if str[i] == a && str[i+1] == c {
			return i
		}
	}
	return -1
}

// compressSymbols replaces every non-overlapping occurrence of the pair
// (a, c), scanning left to right and resuming after each new byte, by idx
// in every symbol that contains it, re-counting the changed symbols.
// Instead of the C loop over all symbols it visits the symbols listed for
// the pair (the 2026 tool's per-pair lists); profits are sums over
// symbols, so the visiting order does not change any count, and the pair
// can never reappear once replaced (idx is a fresh byte), so its list is
// dropped. The C code's find_token also looks at one byte past the end of
// the shrunk string (always the NUL terminator); tokens never contain NUL
// before slot 0 is filled, and slot 0 is filled last, so that read never
// matches and is not modelled.
//
// Models scripts/kallsyms.c:compress_symbols.
func (b *builder) compressSymbols(a, c byte, idx byte) {
	k := pairKey(a, c)
	list := b.pairSyms[k]
	b.pairSyms[k] = nil
	for _, si := range list {
		s := b.table[si]
		p := findToken(s.sym, a, c)
		if p < 0 {
			continue
		}
		b.forgetSymbol(s.sym)
		sym := s.sym
		w := p
		for r := p; r < len(sym); {
			if r+1 < len(sym) && sym[r] == a && sym[r+1] == c {
				sym[w] = idx
				r += 2
			} else {
				sym[w] = sym[r]
				r++
			}
			w++
		}
		s.sym = sym[:w]
		b.learnSymbol(s.sym)
		b.note(si, s.sym, int(idx))
	}
}

// Models scripts/kallsyms.c:find_best_token: the largest profit, ties to
// the smallest key (strict > in a 0..0xffff scan from -10000).
func (b *builder) findBestToken() int {
	best, bestProfit := 0, int32(-10000)
	for i, p := range b.tokenProfit {
		if p > bestProfit {
			best, bestProfit = i, p
		}
	}
	return best
}

// Models scripts/kallsyms.c:optimize_result.
func (b *builder) optimizeResult() {
	for i := 255; i >= 0; i-- {
		if b.bestTableLen[i] != 0 {
			continue
		}
		best := b.findBestToken()
		if b.tokenProfit[best] == 0 {
			break
		}
		b.bestTableLen[i] = 2
		b.bestTable[i] = [2]byte{byte(best), byte(best >> 8)}
		b.compressSymbols(byte(best), byte(best>>8), byte(i))
	}
}

// Models scripts/kallsyms.c:insert_real_symbols_in_table.
func (b *builder) insertRealSymbolsInTable() {
	for _, s := range b.table {
		for _, c := range s.sym {
			b.bestTable[c][0] = c
			b.bestTableLen[c] = 1
		}
	}
}

// Models scripts/kallsyms.c:optimize_token_table.
func (b *builder) optimizeTokenTable() {
	b.buildInitialTokTable()
	b.insertRealSymbolsInTable()
	b.optimizeResult()
	b.pairSyms = [0x10000][]int32{}
}

// Models scripts/kallsyms.c:expand_symbol.
func (b *builder) expandSymbol(data []byte, out []byte) []byte {
	for _, c := range data {
		if b.bestTable[c][0] == c && b.bestTableLen[c] == 1 {
			out = append(out, c)
		} else {
			out = b.expandSymbol(b.bestTable[c][:b.bestTableLen[c]], out)
		}
	}
	return out
}

// writeSrc fills every object (their order and alignment are
// Tables.Objects' and LabelAlign's).
//
// Models scripts/kallsyms.c:write_src (6.1, 6.12, 7.3): the contents of
// every object, without the assembler framing and alignment.
func (b *builder) writeSrc(t *Tables) error {
	n := len(b.table)
	t.NumSyms = n
	if err := b.writeAddresses(t); err != nil {
		return err
	}

	size := 0
	for _, s := range b.table {
		size += len(s.sym) + 2
	}
	names := make([]byte, 0, size)
	t.Markers = make([]uint32, (n+255)/256)
	for i, s := range b.table {
		if i&0xff == 0 {
			t.Markers[i>>8] = uint32(len(names))
		}
		s.seq = uint32(i)
		l := len(s.sym)
		if l == 0 {
			return errors.New("ktab: kallsyms failure: unexpected zero symbol length")
		}
		if l > 0x3fff {
			return errors.New("ktab: kallsyms failure: unexpected huge symbol length")
		}
		if l <= 0x7f {
			names = append(names, byte(l))
		} else {
			names = append(names, byte(l&0x7f|0x80), byte(l>>7&0x7f))
		}
		names = append(names, s.sym...)
	}
	t.Names = names

	// sort_symbols_by_name / compare_names: strcmp of the expanded names
	// without the type char (the expansion is the original name), then
	// address, then seq.
	order := slices.Clone(b.table)
	slices.SortFunc(order, func(sa, sb *symEntry) int {
		if c := strings.Compare(sa.name, sb.name); c != 0 {
			return c
		}
		if c := cmp.Compare(sa.addr, sb.addr); c != 0 {
			return c
		}
		return cmp.Compare(sa.seq, sb.seq)
	})
	t.SeqsOfNames = make([]byte, 3*n)
	for j, s := range order {
		t.SeqsOfNames[3*j] = byte(s.seq >> 16)
		t.SeqsOfNames[3*j+1] = byte(s.seq >> 8)
		t.SeqsOfNames[3*j+2] = byte(s.seq)
	}

	var tt []byte
	for i := range 256 {
		t.TokenIndex[i] = uint16(len(tt))
		tt = b.expandSymbol(b.bestTable[i][:b.bestTableLen[i]], tt)
		tt = append(tt, 0)
	}
	t.TokenTable = tt
	return nil
}

// writeAddresses fills kallsyms_offsets (and kallsyms_relative_base) or
// kallsyms_addresses for the table's encoding: write_src's address loop.
func (b *builder) writeAddresses(t *Tables) error {
	n := len(b.table)
	switch t.Encoding() {
	case EncodingAddresses:
		t.Addresses = make([]uint64, n)
		for i, s := range b.table {
			t.Addresses[i] = s.addr
		}
		return nil
	case EncodingPCRelative:
		return b.writePCRelative(t)
	case EncodingAbsolute32:
		// 7.3 without --pc-relative: ".long %#x", (unsigned int)addr.
		t.Offsets = make([]int32, n)
		for i, s := range b.table {
			t.Offsets[i] = int32(uint32(s.addr))
		}
		return nil
	}
	t.RelativeBase = b.relBase
	t.Offsets = make([]int32, n)
	for i, s := range b.table {
		var off int64
		var overflow bool
		switch {
		case !b.opt.AbsolutePercpu:
			off = int64(s.addr - b.relBase)
			overflow = off < 0 || off > math.MaxUint32
		case s.percpuAbsolute:
			off = int64(s.addr)
			overflow = off < 0 || off > math.MaxInt32
		default:
			off = int64(b.relBase - s.addr - 1)
			overflow = off < math.MinInt32 || off >= 0
		}
		if overflow {
			kind := "relative"
			if s.percpuAbsolute {
				kind = "absolute"
			}
			return fmt.Errorf("ktab: kallsyms failure: %s symbol value %#x out of range in relative mode", kind, s.addr)
		}
		t.Offsets[i] = int32(off)
	}
	return nil
}

// writePCRelative is 7.3's --pc-relative: the tool checks addr - _text
// fits an int and emits `.long _text - . + (addr - _text)`; the linker
// resolves it (R_X86_64_PC32) to addr - &kallsyms_offsets[i], which is
// what Offsets holds, with kallsyms_offsets at OffsetsAddr: the address of
// the input's kallsyms_offsets symbol (the final link puts the object
// where the previous pass did: link-vmlinux.sh checks System.map equals
// the map kallsyms was fed), or _text when the input has none.
func (b *builder) writePCRelative(t *Tables) error {
	t.OffsetsAddr = b.text
	if b.hasOffsets {
		t.OffsetsAddr = b.offsetsAddr
	}
	t.Offsets = make([]int32, len(b.table))
	for i, s := range b.table {
		if off := int64(s.addr - b.text); off < math.MinInt32 || off > math.MaxInt32 {
			return fmt.Errorf("ktab: kallsyms failure: relative symbol value %#x out of range", s.addr)
		}
		slot := t.OffsetsAddr + 4*uint64(i)
		v := int64(s.addr - slot)
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("ktab: link failure: kallsyms_offsets[%d] at %#x: symbol %s at %#x is out of R_X86_64_PC32 range", i, slot, s.name, s.addr)
		}
		t.Offsets[i] = int32(v)
	}
	return nil
}
