package ktab

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// Encoding is how a table holds the symbol addresses: which of
// kernel/kallsyms.c:kallsyms_sym_address's forms decodes it. The build
// flags (and so the kernel config) of each generation choose it.
type Encoding uint8

const (
	// EncodingAddresses is kallsyms_addresses: one PTR per symbol (6.1
	// without --base-relative, i.e. !CONFIG_KALLSYMS_BASE_RELATIVE).
	EncodingAddresses Encoding = iota
	// EncodingBaseRelative is kallsyms_offsets as u32 offsets from
	// kallsyms_relative_base (6.1 --base-relative, 6.12, without
	// --absolute-percpu).
	EncodingBaseRelative
	// EncodingBaseRelativeAbsolutePercpu is kallsyms_offsets with
	// --absolute-percpu (CONFIG_KALLSYMS_ABSOLUTE_PERCPU, x86-64 SMP in
	// 6.1 and 6.12): non-negative entries are absolute per-cpu addresses,
	// negative ones relative_base - 1 - off.
	EncodingBaseRelativeAbsolutePercpu
	// EncodingPCRelative is 7.3's --pc-relative (CONFIG_64BIT ||
	// CONFIG_RELOCATABLE): entry i is the s32 distance from
	// &kallsyms_offsets[i] to the symbol (`.long _text - . + off`); there
	// is no kallsyms_relative_base.
	EncodingPCRelative
	// EncodingAbsolute32 is 7.3 without --pc-relative (32-bit,
	// non-relocatable kernels): entry i is the address as a u32.
	EncodingAbsolute32
)

func (e Encoding) String() string {
	switch e {
	case EncodingAddresses:
		return "absolute addresses (kallsyms_addresses)"
	case EncodingBaseRelative:
		return "base-relative (kallsyms_offsets + kallsyms_relative_base)"
	case EncodingBaseRelativeAbsolutePercpu:
		return "base-relative + absolute per-cpu (kallsyms_offsets + kallsyms_relative_base)"
	case EncodingPCRelative:
		return "PC-relative (kallsyms_offsets, no kallsyms_relative_base)"
	case EncodingAbsolute32:
		return "absolute 32-bit (kallsyms_offsets, no kallsyms_relative_base)"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// Object labels, as write_src names them.
const (
	ObjOffsets      = "kallsyms_offsets"
	ObjAddresses    = "kallsyms_addresses"
	ObjRelativeBase = "kallsyms_relative_base"
	ObjNumSyms      = "kallsyms_num_syms"
	ObjNames        = "kallsyms_names"
	ObjMarkers      = "kallsyms_markers"
	ObjSeqsOfNames  = "kallsyms_seqs_of_names"
	ObjTokenTable   = "kallsyms_token_table"
	ObjTokenIndex   = "kallsyms_token_index"
)

// tool is one generation's scripts/kallsyms.c, with the scripts/mksysmap
// filter link-vmlinux.sh runs in front of it from 6.12 on: the facts and
// functions that differ, chosen once from Options.Gen (Tables.Gen).
type tool struct {
	gen image.Generation
	// mksysmap drops a symbol before the tool reads it (6.12, 7.3
	// link-vmlinux.sh: `nm -n | sed -f scripts/mksysmap`); nil in 6.1,
	// whose tool read `nm -n` itself and filtered in is_ignored_symbol.
	mksysmap        func(name string, typ byte) bool
	isIgnoredSymbol func(name string, typ byte) bool
	// startStopValid: symbol_valid keeps __start_* and __stop_* outside
	// the text ranges (6.12, 7.3).
	startStopValid bool
	// emptyFails: shrink_table exits with "No valid symbol." (6.1).
	emptyFails bool
	// asciiType: read_symbol exits with "line format error" on a type
	// byte outside ASCII (6.12, 7.3 getline parser).
	asciiType bool
	// compareNamesBuf: compare_names expands both names into
	// char[KSYM_NAME_LEN] (6.1), which a 511-byte name overflows.
	compareNamesBuf bool
	// The flags the tool has: --base-relative (6.1), always base-relative
	// (6.12), --absolute-percpu (6.1, 6.12), --pc-relative (7.3).
	hasBaseRelative, alwaysBaseRelative, hasAbsolutePercpu, hasPCRelative bool
	// plain is the encoding without any relative flag.
	plain Encoding
	// percpuAsData: BuildInput gives the per-cpu symbols that a decoded
	// image lists as 'A' (make_percpus_absolute's type) back their data
	// type, as `nm -n` showed them to the build, so that
	// is_ignored_symbol does not drop them (6.12). Off for 6.1: kpsim's
	// 6.1 figures were first checked with those symbols dropped from a
	// decoded bzImage's rebuild (383 of 94,266 on Debian's 6.1.192), and
	// correcting that is a counted change of its own (docs/generations.md).
	percpuAsData bool
	// align is write_src's label alignment on x86-64 (ALGN = .balign 8
	// in 6.1 and 6.12, .balign 4 in 7.3).
	align int
	// order lists write_src's objects as it emits them, for
	// relative-base encodings (6.1, 6.12) or the others; offsets stands
	// for kallsyms_offsets or kallsyms_addresses.
	orderRel, orderPlain []string
}

var tool61 = &tool{
	gen:               image.Gen61,
	isIgnoredSymbol:   isIgnoredSymbol61,
	emptyFails:        true,
	compareNamesBuf:   true,
	hasBaseRelative:   true,
	hasAbsolutePercpu: true,
	plain:             EncodingAddresses,
	align:             8,
	orderRel: []string{ObjOffsets, ObjRelativeBase, ObjNumSyms, ObjNames, ObjMarkers,
		ObjSeqsOfNames, ObjTokenTable, ObjTokenIndex},
	orderPlain: []string{ObjAddresses, ObjNumSyms, ObjNames, ObjMarkers,
		ObjSeqsOfNames, ObjTokenTable, ObjTokenIndex},
}

var tool612 = &tool{
	gen:                image.Gen612,
	mksysmap:           mksysmap612,
	isIgnoredSymbol:    isIgnoredSymbol612,
	startStopValid:     true,
	asciiType:          true,
	alwaysBaseRelative: true,
	hasAbsolutePercpu:  true,
	percpuAsData:       true,
	plain:              EncodingBaseRelative, // never used: always base-relative
	align:              8,
	orderRel: []string{ObjNumSyms, ObjNames, ObjMarkers, ObjTokenTable, ObjTokenIndex,
		ObjOffsets, ObjRelativeBase, ObjSeqsOfNames},
}

var tool73 = &tool{
	gen:             image.Gen73,
	mksysmap:        mksysmap73,
	isIgnoredSymbol: isIgnoredSymbol612, // unchanged since 6.12
	startStopValid:  true,
	asciiType:       true,
	hasPCRelative:   true,
	plain:           EncodingAbsolute32,
	align:           4,
	orderPlain: []string{ObjNumSyms, ObjNames, ObjMarkers, ObjTokenTable, ObjTokenIndex,
		ObjOffsets, ObjSeqsOfNames},
}

// plainEncodings is each generation's encoding without a relative flag
// (tool.plain), indexed by Generation (a byte: no bounds check) for
// SymAddress.
var plainEncodings = func() (e [256]Encoding) {
	for g := range e {
		e[g] = toolOf(image.Generation(g)).plain
	}
	return e
}()

// toolOf returns generation g's tool; GenUnknown reads as 6.1.
func toolOf(g image.Generation) *tool {
	switch g.Effective() {
	case image.Gen612:
		return tool612
	case image.Gen73:
		return tool73
	}
	return tool61
}

// check refuses flags the generation's tool does not have.
func (tl *tool) check(opt Options) error {
	switch {
	case opt.BaseRelative && !tl.hasBaseRelative && !tl.alwaysBaseRelative:
		return fmt.Errorf("ktab: %s scripts/kallsyms has no --base-relative (use ktab.OptionsFor)", tl.gen)
	case !opt.BaseRelative && tl.alwaysBaseRelative:
		return fmt.Errorf("ktab: %s scripts/kallsyms always writes kallsyms_offsets + kallsyms_relative_base: set BaseRelative (use ktab.OptionsFor)", tl.gen)
	case opt.AbsolutePercpu && !tl.hasAbsolutePercpu:
		return fmt.Errorf("ktab: %s scripts/kallsyms has no --absolute-percpu (use ktab.OptionsFor)", tl.gen)
	case opt.PCRelative && !tl.hasPCRelative:
		return fmt.Errorf("ktab: %s scripts/kallsyms has no --pc-relative (use ktab.OptionsFor)", tl.gen)
	}
	return nil
}

// encoding is the encoding the flags choose.
func (tl *tool) encoding(baseRelative, absolutePercpu, pcRelative bool) Encoding {
	switch {
	case pcRelative:
		return EncodingPCRelative
	case baseRelative && absolutePercpu:
		return EncodingBaseRelativeAbsolutePercpu
	case baseRelative:
		return EncodingBaseRelative
	}
	return tl.plain
}

// order is write_src's object order for encoding e.
func (tl *tool) order(e Encoding) []string {
	if e == EncodingBaseRelative || e == EncodingBaseRelativeAbsolutePercpu {
		return tl.orderRel
	}
	return tl.orderPlain
}

// OptionsFor returns the flags link-vmlinux.sh passes scripts/kallsyms for
// a Debian x86-64 kernel of generation g (CONFIG_KALLSYMS_ALL=y in all
// three; 6.1: CONFIG_KALLSYMS_BASE_RELATIVE and ABSOLUTE_PERCPU; 6.12:
// ABSOLUTE_PERCPU, always base-relative; 7.3: --pc-relative for
// CONFIG_64BIT), with Gen = g. GenUnknown gives 6.1's flags.
func OptionsFor(g image.Generation) Options {
	switch g.Effective() {
	case image.Gen612:
		return Options{Gen: g, AllSymbols: true, AbsolutePercpu: true, BaseRelative: true}
	case image.Gen73:
		return Options{Gen: g, AllSymbols: true, PCRelative: true}
	}
	return Options{Gen: g, AllSymbols: true, AbsolutePercpu: true, BaseRelative: true}
}

// ObjectOrder lists the objects generation g's write_src emits for
// encoding e, in .rodata order (each label aligned to LabelAlign(g)).
func ObjectOrder(g image.Generation, e Encoding) []string {
	return slices.Clone(toolOf(g).order(e))
}

// LabelAlign is write_src's label alignment on x86-64 for generation g:
// 8 (ALGN, .balign 8) in 6.1 and 6.12, 4 (.balign 4) in 7.3.
func LabelAlign(g image.Generation) int { return toolOf(g).align }

// Encodings lists the encodings generation g's tool can write, the
// Debian x86-64 one first.
func Encodings(g image.Generation) []Encoding {
	switch g.Effective() {
	case image.Gen612:
		return []Encoding{EncodingBaseRelativeAbsolutePercpu, EncodingBaseRelative}
	case image.Gen73:
		return []Encoding{EncodingPCRelative, EncodingAbsolute32}
	}
	return []Encoding{EncodingBaseRelativeAbsolutePercpu, EncodingBaseRelative, EncodingAddresses}
}

// Symbol names dropped exactly (6.1 is_ignored_symbol: ignored_symbols).
var ignoredSymbols = []string{
	"kallsyms_addresses",
	"kallsyms_offsets",
	"kallsyms_relative_base",
	"kallsyms_num_syms",
	"kallsyms_names",
	"kallsyms_markers",
	"kallsyms_token_table",
	"kallsyms_token_index",
	"kallsyms_seqs_of_names",
	"_SDA_BASE_",
	"_SDA2_BASE_",
}

// 6.1 is_ignored_symbol: ignored_prefixes.
var ignoredPrefixes = []string{
	"__efistub_",
	"__kvm_nvhe_$",
	"__kvm_nvhe_.L",
	"__AArch64ADRPThunk_",
	"__ARMV5PILongThunk_",
	"__ARMV7PILongThunk_",
	"__ThumbV7PILongThunk_",
	"__LA25Thunk_",
	"__microLA25Thunk_",
	"__kcfi_typeid_",
}

// 6.1 is_ignored_symbol: ignored_suffixes.
var ignoredSuffixes = []string{"_from_arm", "_from_thumb", "_veneer"}

// 6.1 is_ignored_symbol: ignored_matches.
var ignoredMatches = []string{".long_branch.", ".plt_branch."}

// isIgnoredSymbol61 reports whether the build drops the symbol outright.
//
// Models scripts/kallsyms.c:is_ignored_symbol (6.1).
func isIgnoredSymbol61(name string, typ byte) bool {
	if slices.Contains(ignoredSymbols, name) {
		return true
	}
	for _, p := range ignoredPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range ignoredSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	for _, m := range ignoredMatches {
		if strings.Contains(name, m) {
			return true
		}
	}
	switch typ {
	case 'U', 'u', 'N', 'n':
		return true
	}
	return isIgnoredAbsolute(name, typ)
}

// isIgnoredAbsolute: most absolute symbols are dropped; a few useful
// ones (ia64) are kept.
func isIgnoredAbsolute(name string, typ byte) bool {
	if typ != 'A' && typ != 'a' {
		return false
	}
	switch name {
	case "__kernel_syscall_via_break", "__kernel_syscall_via_epc", "__kernel_sigtramp", "__gp":
		return false
	}
	return true
}

// isIgnoredSymbol612 reports whether the build drops the symbol outright;
// the name lists moved to scripts/mksysmap in 6.12, so the kallsyms_*
// objects themselves are kept.
//
// Models scripts/kallsyms.c:is_ignored_symbol (6.12, 7.3).
func isIgnoredSymbol612(name string, typ byte) bool {
	if typ == 'u' || typ == 'n' {
		return true
	}
	return isIgnoredAbsolute(name, typ)
}

// mksysmapRule is one /pattern/d line of scripts/mksysmap, applied to
// the `addr type name` line; prefix rules match " pattern" (the name's
// start), suffix rules "pattern$".
type mksysmapRule struct {
	prefix, suffix, exact, contains string
	re                              *regexp.Regexp // matched against the name
}

// mksysmapRules612 is 6.12's scripts/mksysmap, past its type rule
// (`/ [aNUw] /d`).
var mksysmapRules612 = []mksysmapRule{
	{prefix: "$"},
	{prefix: ".L"},
	{prefix: "__efistub_"},
	{prefix: "__pi_$"},
	{prefix: "__pi_.L"},
	{prefix: "__kvm_nvhe_$"},
	{prefix: "__kvm_nvhe_.L"},
	{re: regexp.MustCompile(`^__[[:alnum:]]*Thunk_`)},
	{prefix: "__kcfi_typeid_"},
	{prefix: "__kvm_nvhe___kcfi_typeid_"},
	{prefix: "__pi___kcfi_typeid_"},
	{prefix: "__crc_"},
	{prefix: "__kstrtab_"},
	{prefix: "__kstrtabns_"},
	{suffix: "_from_arm"},
	{suffix: "_from_thumb"},
	{suffix: "_veneer"},
	{exact: "L0"},
	{exact: "_SDA_BASE_"},
	{exact: "_SDA2_BASE_"},
	{contains: ".long_branch."},
	{contains: ".plt_branch."},
}

// mksysmapRules73 adds 7.3's MODULE_DEVICE_TABLE and MODULE_INFO rules.
var mksysmapRules73 = append(slices.Clone(mksysmapRules612),
	mksysmapRule{prefix: "__mod_device_table__"},
	mksysmapRule{re: regexp.MustCompile(`^__UNIQUE_ID_modinfo_[0-9]*$`)},
)

func (r *mksysmapRule) match(name string) bool {
	switch {
	case r.re != nil:
		return r.re.MatchString(name)
	case r.prefix != "":
		return strings.HasPrefix(name, r.prefix)
	case r.suffix != "":
		return strings.HasSuffix(name, r.suffix)
	case r.exact != "":
		return name == r.exact
	}
	return strings.Contains(name, r.contains)
}

func mksysmapDrops(rules []mksysmapRule, name string, typ byte) bool {
	switch typ {
	case 'a', 'N', 'U', 'w':
		return true
	}
	for i := range rules {
		if rules[i].match(name) {
			return true
		}
	}
	return false
}

// mksysmap612 reports whether 6.12's scripts/mksysmap deletes the line:
// local absolute, debugging, undefined and local weak symbols, and the
// name patterns (local labels, thunks, CFI type ids, __crc_, __kstrtab_,
// ...).
//
// Models scripts/mksysmap (6.12).
func mksysmap612(name string, typ byte) bool { return mksysmapDrops(mksysmapRules612, name, typ) }

// mksysmap73 reports whether 7.3's scripts/mksysmap deletes the line:
// 6.12's rules plus __mod_device_table__* and __UNIQUE_ID_modinfo_N.
//
// Models scripts/mksysmap (7.3).
func mksysmap73(name string, typ byte) bool { return mksysmapDrops(mksysmapRules73, name, typ) }

// Filtered reports why the build of generation g drops a symbol before
// compressing it: "mksysmap" (6.12, 7.3 scripts/mksysmap), "ignored"
// (scripts/kallsyms.c:is_ignored_symbol) or "" when it is read. It does
// not apply symbol_valid (the text ranges without --all-symbols).
func Filtered(g image.Generation, s Symbol) string {
	tl := toolOf(g)
	if tl.mksysmap != nil && tl.mksysmap(s.Name, s.Type) {
		return "mksysmap"
	}
	if tl.isIgnoredSymbol(s.Name, s.Type) {
		return "ignored"
	}
	return ""
}

// BuildInput returns syms as Build should read them when they came from
// an image's own kallsyms tables rather than from `nm -n`: with opt's
// absolute per-cpu encoding, symbols in [__per_cpu_start, __per_cpu_end]
// that the tables list as 'A' get back the data type nm gave them where
// the generation's tool needs it (tool.percpuAsData). syms is not
// changed; without a change the same slice is returned.
func BuildInput(opt Options, syms []Symbol) []Symbol {
	if !opt.AbsolutePercpu || !toolOf(opt.Gen).percpuAsData {
		return syms
	}
	var lo, hi uint64
	var okLo, okHi bool
	for _, s := range syms {
		switch s.Name {
		case "__per_cpu_start":
			lo, okLo = s.Addr, true
		case "__per_cpu_end":
			hi, okHi = s.Addr, true
		}
	}
	if !okLo || !okHi {
		return syms
	}
	out := syms
	for i, s := range syms {
		if s.Type == 'A' && s.Addr >= lo && s.Addr <= hi {
			if &out[0] == &syms[0] {
				out = slices.Clone(syms)
			}
			out[i].Type = 'D'
		}
	}
	return out
}
