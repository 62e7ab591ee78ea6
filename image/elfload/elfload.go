// Package elfload loads an x86-64 vmlinux ELF (a full one with .symtab,
// or a stripped one with only section headers, as a distribution's
// bzImage decompresses to) into kpsim's kernel image model.
//
// Symbols come from .symtab when present, else from the embedded kallsyms
// tables (6.1, 6.12 or 7.3 layout, see ReadKallsyms). Text is read through the PT_LOAD
// program headers; the tables kprobes and its neighbours read
// (__jump_table, .static_call_sites, __bug_table, __ex_table,
// _kprobe_blacklist, __mcount_loc) are found by their __start_/__stop_
// bound symbols and put into the order the running kernel holds them.
//
// Load keeps the text as built. LoadWith with a CPU applies the boot-time
// patching of alternative_instructions (paravirt, retpolines, returns,
// alternatives: package alternative) for that CPU; static-call and
// jump-label init and ftrace's NOPing of the __fentry__ calls are not
// applied (they keep instruction lengths). Kernel.Notes says which.
package elfload

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/kconfig"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/lib"
)

// loader is one Load call.
type loader struct {
	opts   Options
	booted *Booted
	name   string
	data   []byte
	f      *elf.File
	progs  []*elf.Prog // PT_LOAD with file data
	syms   map[string]uint64
	k      *image.Kernel
	// capped lists functions whose next-symbol distance was cut
	// (kallsyms source only).
	capped []string
	// kcfgs are the configurations deciding build facts (configs);
	// bugVerboseFrom says which decided the bug_entry layout.
	kcfgs          []*kconfig.Config
	bugVerboseFrom string
}

// Load parses data (the bytes of the file called name) as an x86-64
// vmlinux and returns the image model. Errors name the file and the
// problem; malformed input never panics.
//
// The text is as built; LoadWith boot-patches it for a CPU.
func Load(name string, data []byte) (*image.Kernel, error) {
	k, _, err := LoadWith(name, data, Options{})
	return k, err
}

// LoadWith is Load with options: with o.CPU set, the text is patched as
// the kernel patches itself at boot on that CPU, in a private copy of
// data (data itself is not modified unless o.Owned), and Booted says what
// was done.
func LoadWith(name string, data []byte, o Options) (*image.Kernel, *Booted, error) {
	l := &loader{name: name, data: data, opts: o}
	k, err := l.load()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return k, l.booted, nil
}

func (l *loader) load() (*image.Kernel, error) {
	if len(l.data) < 4 || !bytes.Equal(l.data[:4], []byte(elf.ELFMAG)) {
		return nil, errors.New("not an ELF file")
	}
	if err := checkTruncated(l.data); err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(l.data))
	if err != nil {
		return nil, fmt.Errorf("malformed ELF (%v)", err)
	}
	l.f = f
	if l.opts.CPU != nil && !l.opts.Owned {
		l.data = bytes.Clone(l.data) // patched in place; the caller's bytes stay as built
	}
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("ELF for %v, not x86-64", f.Machine)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, fmt.Errorf("not a kernel ELF (%v %v, want ELFCLASS64 little-endian)", f.Class, f.Data)
	}
	if f.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("not a kernel ELF (type %v, want ET_EXEC)", f.Type)
	}
	if f.Section(".text") == nil || f.Section(".rodata") == nil {
		return nil, errors.New("not a kernel ELF (no .text and .rodata sections)")
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			if p.Off+p.Filesz < p.Off || p.Off+p.Filesz > uint64(len(l.data)) {
				return nil, fmt.Errorf("truncated file: PT_LOAD at %#x needs file bytes up to %#x, file has %#x", p.Vaddr, p.Off+p.Filesz, len(l.data))
			}
			l.progs = append(l.progs, p)
		}
	}
	if len(l.progs) == 0 {
		return nil, errors.New("not a kernel ELF (no PT_LOAD segment)")
	}

	k := &image.Kernel{Name: l.name}
	l.k = k
	if sec := f.Section(".symtab"); sec != nil {
		if err := l.symtabSymbols(); err != nil {
			return nil, err
		}
	} else {
		if _, err := l.kallsymsSymbols(); err != nil {
			return nil, err
		}
	}
	if err := l.generation(); err != nil {
		return nil, err
	}
	if err := l.regions(); err != nil {
		return nil, err
	}
	if err := l.tables(); err != nil {
		return nil, l.forcedGen(err)
	}
	l.config()
	l.ranges()
	l.returnSites()
	l.traceEvents()
	k.Notes = append(k.Notes, "modules are not loaded from real images")
	if l.opts.CPU != nil {
		bt, err := l.boot(l.opts)
		if err != nil {
			return nil, l.forcedGen(err)
		}
		l.booted = bt
	} else {
		k.Notes = append(k.Notes, "text is as built: boot-time patching (alternatives, paravirt, return thunks, static calls, ftrace NOPing of __fentry__ calls) is not applied")
		if c := &k.Config; c.RetThunk {
			k.Notes = append(k.Notes, "returns are as built (jmp __x86_return_thunk): ReturnsPatched=false; on a CPU that needs no return thunk, boot's apply_returns would rewrite them to ret; int3")
		}
	}
	if err := k.Validate(); err != nil {
		return nil, fmt.Errorf("loaded image is inconsistent: %w", err)
	}
	return k, nil
}

// checkTruncated reports an ELF64 whose program or section header table
// lies past the end of the data (a cut-off download or decompression),
// more clearly than debug/elf's EOF.
func checkTruncated(d []byte) error {
	if len(d) < 64 || d[elf.EI_CLASS] != byte(elf.ELFCLASS64) || d[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return nil
	}
	for _, h := range []struct {
		what      string
		off       uint64
		ent, nent uint16
	}{
		{"program headers", le.Uint64(d[0x20:]), le.Uint16(d[0x36:]), le.Uint16(d[0x38:])},
		{"section headers", le.Uint64(d[0x28:]), le.Uint16(d[0x3a:]), le.Uint16(d[0x3c:])},
	} {
		if h.off == 0 || h.nent == 0 {
			continue
		}
		end := h.off + uint64(h.ent)*uint64(h.nent)
		if end < h.off || end > uint64(len(d)) {
			return fmt.Errorf("truncated file (%s end at %#x, file has %#x bytes)", h.what, end, len(d))
		}
	}
	return nil
}

// read returns n file bytes at virtual address va (via PT_LOAD), or false.
func (l *loader) read(va, n uint64) ([]byte, bool) {
	for _, p := range l.progs {
		if va >= p.Vaddr && va-p.Vaddr < p.Filesz && n <= p.Filesz-(va-p.Vaddr) {
			off := p.Off + (va - p.Vaddr)
			return l.data[off : off+n], true
		}
	}
	return nil, false
}

// cstring reads a NUL-terminated string of at most 512 bytes at va.
func (l *loader) cstring(va uint64) string {
	for _, p := range l.progs {
		if va >= p.Vaddr && va-p.Vaddr < p.Filesz {
			off := p.Off + (va - p.Vaddr)
			end := min(p.Off+p.Filesz, off+512)
			b := l.data[off:end]
			if i := bytes.IndexByte(b, 0); i >= 0 {
				return string(b[:i])
			}
			return ""
		}
	}
	return ""
}

func (l *loader) sym(name string) (uint64, bool) {
	a, ok := l.syms[name]
	return a, ok
}

// indexSyms records the first address of every symbol name.
func (l *loader) indexSyms() {
	l.syms = make(map[string]uint64, len(l.k.Symbols))
	for _, s := range l.k.Symbols {
		if _, ok := l.syms[s.Name]; !ok {
			l.syms[s.Name] = s.Addr
		}
	}
}

// nmType computes nm's type letter for an ELF symbol.
func nmType(f *elf.File, s *elf.Symbol) image.SymType {
	bind := elf.ST_BIND(s.Info)
	var c byte
	switch {
	case s.Section == elf.SHN_ABS:
		c = 'a'
	case s.Section == elf.SHN_UNDEF:
		c = 'u'
	case s.Section == elf.SHN_COMMON:
		c = 'c'
	case int(s.Section) < len(f.Sections):
		sec := f.Sections[s.Section]
		switch {
		case sec.Flags&elf.SHF_EXECINSTR != 0:
			c = 't'
		case sec.Type == elf.SHT_NOBITS:
			c = 'b'
		case sec.Flags&elf.SHF_WRITE != 0:
			c = 'd'
		default:
			c = 'r'
		}
	default:
		c = '?'
	}
	if bind == elf.STB_WEAK {
		if c == 't' || c == 'u' {
			return 'W'
		}
		if s.Section != elf.SHN_UNDEF {
			return 'V'
		}
		return 'w'
	}
	if bind == elf.STB_GLOBAL && c >= 'a' && c <= 'z' {
		c -= 'a' - 'A'
	}
	return image.SymType(c)
}

// symtabSymbols takes the symbols of .symtab with their st_size.
func (l *loader) symtabSymbols() error {
	es, err := l.f.Symbols()
	if err != nil {
		return fmt.Errorf("reading .symtab: %v", err)
	}
	out := make([]image.Symbol, 0, len(es))
	for i := range es {
		s := &es[i]
		switch elf.ST_TYPE(s.Info) {
		case elf.STT_FILE, elf.STT_SECTION:
			continue
		}
		if s.Name == "" || s.Section == elf.SHN_UNDEF {
			continue
		}
		out = append(out, image.Symbol{Name: s.Name, Addr: s.Value, Size: s.Size, Type: nmType(l.f, s)})
	}
	if len(out) == 0 {
		return errors.New(".symtab has no symbols")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	l.k.Symbols = out
	l.indexSyms()
	l.k.Notes = append(l.k.Notes, "symbols from .symtab: function sizes are st_size")
	return nil
}

// kallsymsSymbols decodes the embedded kallsyms tables and sizes the
// functions (see sizeFunctions).
func (l *loader) kallsymsSymbols() (*ktab.Tables, error) {
	t, _, err := readKallsyms(l.f)
	if err != nil {
		return nil, err
	}
	out := make([]image.Symbol, len(t.Syms))
	for i, s := range t.Syms {
		out[i] = image.Symbol{Name: s.Name, Addr: s.Addr, Type: image.SymType(s.Type)}
	}
	l.k.Symbols = out
	l.indexSyms()
	l.sizeFunctions()
	l.k.Notes = append(l.k.Notes, fmt.Sprintf("symbols from the embedded kallsyms tables (%d symbols, %s layout, %s encoding; no .symtab): function sizes are next-symbol distances as kallsyms_lookup_size_offset computes them, %d capped at trailing padding (%s)", len(out), t.Gen, t.Encoding(), len(l.capped), strings.Join(l.capped, ", ")))
	return t, nil
}

// SizeCapMin is the next-symbol distance above which a function's size
// is examined for trailing padding.
const SizeCapMin = 64 << 10

// sizeFunctions sets Size of every symbol to the distance to the next
// symbol with a higher address (kernel/kallsyms.c:get_symbol_pos); the
// last symbol gets 0. Rule for the few text symbols whose distance is
// SizeCapMin (64 KiB) or more (a function followed by section alignment
// padding up to a page or 2 MiB boundary): their size is cut after the
// last byte that is not padding (int3 0xcc or 0x00 fill), rounded up to 16
// bytes (the function alignment) but not past the next symbol. Their
// names are listed in Kernel.Notes. Sizes under the limit keep their
// padding, exactly as the kernel's own lookups see it.
func (l *loader) sizeFunctions() {
	s := l.k.Symbols
	j := 0
	for i := range s {
		if j <= i {
			j = i + 1
		}
		for j < len(s) && s[j].Addr <= s[i].Addr {
			j++
		}
		if j == len(s) {
			break
		}
		s[i].Size = s[j].Addr - s[i].Addr
	}
	for i := range s {
		if !s[i].IsText() || s[i].Size < SizeCapMin {
			continue
		}
		b, ok := l.read(s[i].Addr, s[i].Size)
		if !ok {
			continue
		}
		e := len(b)
		for e > 0 && (b[e-1] == 0xcc || b[e-1] == 0) {
			e--
		}
		n := min(uint64((e+15)&^15), s[i].Size)
		if n < s[i].Size {
			l.capped = append(l.capped, fmt.Sprintf("%s %#x→%#x", s[i].Name, s[i].Size, n))
			s[i].Size = n
		}
	}
}

// regions reads core and init text.
func (l *loader) regions() error {
	add := func(name string, kind image.RegionKind, startSym, endSym string) error {
		start, ok1 := l.sym(startSym)
		end, ok2 := l.sym(endSym)
		if !ok1 || !ok2 {
			return fmt.Errorf("not a kernel ELF (no %s/%s symbols)", startSym, endSym)
		}
		if end < start {
			return fmt.Errorf("%s %#x is below %s %#x", endSym, end, startSym, start)
		}
		b, ok := l.read(start, end-start)
		if !ok {
			return fmt.Errorf("%s [%#x, %#x) is not in the file's PT_LOAD segments", name, start, end)
		}
		l.k.Regions = append(l.k.Regions, &image.Region{Name: name, Kind: kind, Start: start, Bytes: b})
		return nil
	}
	if err := add(".text", image.CoreText, "_stext", "_etext"); err != nil {
		return err
	}
	if err := add(".init.text", image.InitText, "_sinittext", "_einittext"); err != nil {
		return err
	}
	// .exit.text sits inside [__init_begin, __init_end) on x86 and is
	// freed with init memory; the jump-label and bug tables reference it
	// (jump_label_init marks those entries init). It is kept as a second
	// InitText region so those entries point into text; Kernel.InitText()
	// still returns .init.text.
	if sec := l.f.Section(".exit.text"); sec != nil && sec.Size > 0 && sec.Flags&elf.SHF_EXECINSTR != 0 {
		ib, ok1 := l.sym("__init_begin")
		ie, ok2 := l.sym("__init_end")
		if ok1 && ok2 && sec.Addr >= ib && sec.Addr+sec.Size <= ie {
			if b, ok := l.read(sec.Addr, sec.Size); ok {
				l.k.Regions = append(l.k.Regions, &image.Region{Name: ".exit.text", Kind: image.InitText, Start: sec.Addr, Bytes: b})
				l.k.Notes = append(l.k.Notes, fmt.Sprintf(".exit.text [%#x, %#x) is loaded as a second init-text region (x86 keeps it in the init section, freed after boot; jump and bug entries point into it)", sec.Addr, sec.Addr+sec.Size))
			}
		}
	}
	slices.SortFunc(l.k.Regions, func(a, b *image.Region) int {
		if a.Start < b.Start {
			return -1
		}
		if a.Start > b.Start {
			return 1
		}
		return 0
	})
	return nil
}

// span returns the bytes between __start_X and __stop_X. ok is false
// when the pair is absent (an empty table is ok with no bytes).
func (l *loader) span(start, stop string) (base uint64, b []byte, ok bool, err error) {
	s, ok1 := l.sym(start)
	e, ok2 := l.sym(stop)
	if !ok1 && !ok2 {
		return 0, nil, false, nil
	}
	if ok1 != ok2 {
		return 0, nil, false, fmt.Errorf("%s/%s: only one bound symbol present", start, stop)
	}
	if e < s {
		return 0, nil, false, fmt.Errorf("%s %#x is below %s %#x", stop, e, start, s)
	}
	if e == s {
		return s, nil, true, nil
	}
	data, in := l.read(s, e-s)
	if !in {
		return 0, nil, false, fmt.Errorf("[%s, %s) = [%#x, %#x) is not in the file's PT_LOAD segments", start, stop, s, e)
	}
	return s, data, true, nil
}

// Bound symbol pairs of the tables (include/asm-generic/vmlinux.lds.h, 6.1).
var tableBounds = []struct{ Name, Start, Stop string }{
	{"__jump_table", "__start___jump_table", "__stop___jump_table"},
	{"static_call_sites", "__start_static_call_sites", "__stop_static_call_sites"},
	{"__bug_table", "__start___bug_table", "__stop___bug_table"},
	{"__ex_table", "__start___ex_table", "__stop___ex_table"},
	{"_kprobe_blacklist", "__start_kprobe_blacklist", "__stop_kprobe_blacklist"},
	{"__mcount_loc", "__start_mcount_loc", "__stop_mcount_loc"},
}

// initContains is init_section_contains(addr, 1): [__init_begin, __init_end).
func (l *loader) initContains() func(uint64) bool {
	b, ok1 := l.sym("__init_begin")
	e, ok2 := l.sym("__init_end")
	if !ok1 || !ok2 {
		r := l.k.InitText()
		return func(a uint64) bool { return r != nil && r.Contains(a) }
	}
	return func(a uint64) bool { return a >= b && a < e }
}

func (l *loader) tables() error {
	k := l.k
	inInit := l.initContains()
	var missing []string
	for _, tb := range tableBounds {
		base, b, ok, err := l.span(tb.Start, tb.Stop)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, tb.Name)
			continue
		}
		switch tb.Name {
		case "__jump_table":
			e, err := decodeJumpTable(b, base)
			if err != nil {
				return err
			}
			// jump_label_init: sort by (key, code), then mark init sites.
			lib.SortJumpEntries(e)
			for i := range e {
				e[i].Init = inInit(e[i].Code)
			}
			k.JumpEntries = e
		case "static_call_sites":
			s, err := decodeStaticCallSites(b, base)
			if err != nil {
				return err
			}
			// static_call_init: sort by key, then set INIT for init sites.
			lib.SortStaticCallSites(s)
			for i := range s {
				if inInit(s[i].Addr) {
					s[i].Init = true
				}
			}
			k.StaticCallSites = s
		case "__bug_table":
			lay := l.bugLayout(len(b))
			e, err := decodeBugTable(b, base, lay, l.cstring)
			if err != nil {
				return err
			}
			k.BugEntries = e
			k.Config.BugVerbose = lay.Verbose
		case "__ex_table":
			e, err := decodeExTable(b, base)
			if err != nil {
				return err
			}
			// x86 sorts it at build time (scripts/sorttable,
			// main_extable_sort_needed = 0); sort_main_extable would
			// sort by insn otherwise.
			if !slices.IsSortedFunc(e, func(a, b image.ExEntry) int { return cmp.Compare(a.Insn, b.Insn) }) {
				slices.SortStableFunc(e, func(a, b image.ExEntry) int { return cmp.Compare(a.Insn, b.Insn) })
				k.Notes = append(k.Notes, "__ex_table was not sorted at build time: sorted by insn as sort_main_extable does")
			}
			k.ExTable = e
		case "_kprobe_blacklist":
			p, err := decodePtrs(tb.Name, b)
			if err != nil {
				return err
			}
			k.Blacklist = p
		case "__mcount_loc":
			p, err := decodePtrs(tb.Name, b)
			if err != nil {
				return err
			}
			k.McountLocs, _ = processMcountLocs(p)
		}
	}
	if len(missing) > 0 {
		k.Notes = append(k.Notes, "tables absent (no __start_/__stop_ symbols): "+strings.Join(missing, ", "))
	}
	if n := len(k.McountLocs); n > 0 {
		outside := 0
		for _, a := range k.McountLocs {
			if k.LookupFunction(a) == nil {
				outside++
			}
		}
		if outside > 0 {
			k.Notes = append(k.Notes, fmt.Sprintf("%d of %d __mcount_loc entries lie in no function symbol (bodies of overridden __weak functions); 6.1 ftrace_process_locs keeps them (it skips only NULL entries)", outside, n))
		}
	}
	return nil
}

// processMcountLocs returns the records 6.1 ftrace_process_locs creates
// for vmlinux: the table sorted (at build time with
// CONFIG_BUILDTIME_MCOUNT_SORT, else by sort()), NULL entries skipped,
// nothing else dropped. skipped counts the NULLs.
//
// Models kernel/trace/ftrace.c:ftrace_process_locs (6.1).
func processMcountLocs(p []uint64) (out []uint64, skipped int) {
	s := slices.Clone(p)
	if !slices.IsSorted(s) {
		slices.Sort(s)
	}
	out = s[:0]
	for _, a := range s {
		if a == 0 {
			skipped++
			continue
		}
		out = append(out, a)
	}
	return out, skipped
}

// ranges fills the section ranges kprobes refuses.
func (l *loader) ranges() {
	for _, r := range []struct{ name, start, end string }{
		{image.RangeEntryText, "__entry_text_start", "__entry_text_end"},
		{image.RangeIRQEntryText, "__irqentry_text_start", "__irqentry_text_end"},
		{image.RangeSoftIRQEntryText, "__softirqentry_text_start", "__softirqentry_text_end"},
		{image.RangeNoinstrText, "__noinstr_text_start", "__noinstr_text_end"},
		{image.RangeKprobesText, "__kprobes_text_start", "__kprobes_text_end"},
		{image.RangeIndirectThunk, "__indirect_thunk_start", "__indirect_thunk_end"},
	} {
		s, ok1 := l.sym(r.start)
		e, ok2 := l.sym(r.end)
		if ok1 && ok2 && s <= e {
			l.k.Ranges = append(l.k.Ranges, image.Range{Name: r.name, Start: s, End: e})
		}
	}
}

// returnSites reads .return_sites: one s32 per site, relative to the
// entry's own address (objtool's list of "jmp __x86_return_thunk").
func (l *loader) returnSites() {
	sec := l.f.Section(".return_sites")
	if sec == nil || sec.Size%4 != 0 {
		return
	}
	b, ok := l.read(sec.Addr, sec.Size)
	if !ok {
		return
	}
	for i := 0; i+4 <= len(b); i += 4 {
		rel := int64(int32(binary.LittleEndian.Uint32(b[i:])))
		l.k.ReturnSites = append(l.k.ReturnSites, uint64(int64(sec.Addr)+int64(i)+rel))
	}
}

// traceEvents reads _ftrace_events: an array of struct trace_event_call
// pointers. struct trace_event_call begins (6.1.192, 6.12.117, 7.3) with
// a list_head (16 bytes), the class pointer and the name/tp union; a
// class begins with its system string; a struct tracepoint with its
// name. The union holds a tracepoint (TRACE_EVENT_FL_TRACEPOINT: every
// TRACE_EVENT) when it points at a __tracepoint_* symbol, else the
// name. An entry whose call cannot be read is kept unnamed.
func (l *loader) traceEvents() {
	_, b, ok, err := l.span("__start_ftrace_events", "__stop_ftrace_events")
	if err != nil || !ok || len(b)%8 != 0 {
		return
	}
	tps := map[uint64]bool{}
	for _, s := range l.k.Symbols {
		if strings.HasPrefix(s.Name, "__tracepoint_") {
			tps[s.Addr] = true
		}
	}
	ptr := func(va uint64) uint64 {
		if p, ok := l.read(va, 8); ok {
			return binary.LittleEndian.Uint64(p)
		}
		return 0
	}
	evs := make([]image.TraceEvent, 0, len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		call := binary.LittleEndian.Uint64(b[i:])
		var ev image.TraceEvent
		if class := ptr(call + 16); class != 0 {
			if sys := ptr(class); sys != 0 {
				ev.System = l.cstring(sys)
			}
		}
		if n := ptr(call + 24); n != 0 {
			if tps[n] {
				n = ptr(n) // tp->name
			}
			if n != 0 {
				ev.Name = l.cstring(n)
			}
		}
		evs = append(evs, ev)
	}
	l.k.TraceEvents = evs
}
