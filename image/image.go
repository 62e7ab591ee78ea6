// Package image is kpsim's kernel-image model: everything the modelled
// registration paths read from a kernel, in one source-agnostic value.
//
// A Kernel holds text bytes by address (core, init and module text),
// function symbols, the jump-label table, the static-call sites, the bug
// table, the exception table, the kprobe blacklist table and the section
// ranges kprobes refuses, the mcount (__fentry__) call locations, and the
// loaded modules with their own tables. The synthetic generator (package
// image/synth) fills it today; loaders for real vmlinux / bzImage files fill
// the same fields later, so nothing downstream knows where a Kernel came from.
//
// Addresses are absolute link-time virtual addresses (0xffffffff81000000...).
// Tables are stored the way the running kernel holds them after boot-time
// sorting: jump entries by (key, code), static-call sites by key, bug and
// exception entries in link order, the blacklist in table order.
package image

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/sim"
)

// Arch facts the model needs about how the kernel was built.
type Config struct {
	// IBT: CONFIG_X86_KERNEL_IBT, functions start with ENDBR64 and entry
	// probes land at +4 (arch_adjust_kprobe_addr).
	IBT bool `json:"ibt"`
	// Retpoline: CONFIG_RETPOLINE / CONFIG_MITIGATION_RETPOLINE; indirect
	// branches go through __x86_indirect_thunk_* and, in 6.1, can_optimize
	// treats jumps into the thunk range as indirect.
	Retpoline bool `json:"retpoline"`
	// RetThunk: CONFIG_RETHUNK; function returns were built as
	// "jmp __x86_return_thunk". Whether they are still live at run time is
	// ReturnsPatched.
	RetThunk bool `json:"rethunk"`
	// ReturnsPatched: at boot, apply_returns rewrote the return-thunk jumps
	// to "ret; int3" (a CPU that needs no return thunk). The text in the
	// model is the text as it runs.
	ReturnsPatched bool `json:"returns_patched"`
	// KprobesOnFtrace: CONFIG_KPROBES_ON_FTRACE.
	KprobesOnFtrace bool `json:"kprobes_on_ftrace"`
	// CFI: CONFIG_CFI_CLANG (kCFI preambles, __cfi_ / __pfx_ symbols).
	CFI bool `json:"cfi"`
	// BugVerbose: CONFIG_DEBUG_BUGVERBOSE, 12-byte bug entries instead of 8.
	BugVerbose bool `json:"bug_verbose"`
	// Version is the kernel release (linux_banner / the bzImage
	// kernel_version: "6.12.117+deb13-amd64"); "" for synthetic images.
	Version string `json:"version,omitempty"`
	// Gen is the kernel generation the image belongs to (Version's, or
	// --kernel-version's); GenUnknown reads as 6.1 for images made before
	// generations existed.
	Gen Generation `json:"generation"`
	// CallPadding: CONFIG_CALL_PADDING, 16 bytes of padding (and a
	// __pfx_ symbol) before every function.
	CallPadding bool `json:"call_padding"`
	// FunctionAlignment: CONFIG_FUNCTION_ALIGNMENT in bytes (0 unknown).
	FunctionAlignment int `json:"function_alignment,omitempty"`
	// Facts name each build fact above and where it came from.
	Facts []ConfigFact `json:"facts,omitempty"`
	// CPU names the boot CPU whose boot-time patching (paravirt,
	// retpolines, returns, alternatives: package alternative) the text
	// went through; "" when the text is as built (or, for the generator,
	// when no CPU was asked for).
	CPU string `json:"cpu,omitempty"`
}

// RegionKind says what a text region is.
type RegionKind uint8

const (
	CoreText   RegionKind = iota // [_stext, _etext)
	InitText                     // .init.text, freed after boot
	ModuleText                   // a module's core text
	ModuleInit                   // a module's init text
)

func (k RegionKind) String() string {
	switch k {
	case CoreText:
		return "core"
	case InitText:
		return "init"
	case ModuleText:
		return "module"
	case ModuleInit:
		return "module-init"
	}
	return fmt.Sprintf("RegionKind(%d)", k)
}

// Region is a contiguous run of text bytes.
type Region struct {
	Name   string // ".text", ".init.text", "mod_foo .text", ...
	Kind   RegionKind
	Module string // owning module, "" for vmlinux
	Start  uint64
	Bytes  []byte
}

// End returns the first address after the region.
func (r *Region) End() uint64 { return r.Start + uint64(len(r.Bytes)) }

// Contains reports whether addr lies inside the region.
func (r *Region) Contains(addr uint64) bool { return addr >= r.Start && addr < r.End() }

// SymType is the nm / kallsyms type letter ('T', 't', 'W', 'D', ...).
type SymType byte

// Symbol is one function (or other) symbol. Names may repeat (static
// functions of different files); Size is the true function size when known
// (st_size, or the generator's), else the next-symbol distance.
type Symbol struct {
	Name   string
	Addr   uint64
	Size   uint64
	Type   SymType
	Module string // "" for vmlinux
}

// IsText reports whether the symbol is a function symbol.
func (s *Symbol) IsText() bool {
	switch s.Type {
	case 'T', 't', 'W', 'w':
		return true
	}
	return false
}

// IsPadding reports whether the symbol names the padding before a
// function rather than a function: objtool's __pfx_ symbols over the
// CONFIG_CALL_PADDING bytes and the kCFI preambles' __cfi_ symbols
// (6.2 and later). kallsyms lists them; they are not functions.
func (s *Symbol) IsPadding() bool {
	return strings.HasPrefix(s.Name, "__pfx_") || strings.HasPrefix(s.Name, "__cfi_")
}

// JumpEntry is one struct jump_entry, decoded to absolute addresses. The
// kernel stores code/target/key relative to the fields' own addresses and
// keeps two flag bits in the key's low bits (bit 0 branch, bit 1 init).
type JumpEntry struct {
	Code   uint64
	Target uint64
	Key    uint64 // static_key address, flag bits cleared
	Branch bool   // JUMP_TYPE_TRUE: bit 0 of the key field
	Init   bool   // site in init text: set at jump_label_init / module COMING
}

// StaticCallSite is one struct static_call_site, decoded.
type StaticCallSite struct {
	Addr uint64
	Key  uint64 // static_call_key address, flag bits cleared
	Tail bool   // STATIC_CALL_SITE_TAIL: a jmp, not a call
	Init bool   // STATIC_CALL_SITE_INIT: site in init text
}

// BugEntry is one struct bug_entry: the address of its ud2 and where it came from.
type BugEntry struct {
	Addr  uint64
	File  string
	Line  uint16
	Flags uint16 // BUGFLAG_WARNING (1), BUGFLAG_ONCE (2), BUGFLAG_DONE (4), ...
}

// ExEntry is one struct exception_table_entry.
type ExEntry struct {
	Insn  uint64
	Fixup uint64
}

// Range is a half-open address range [Start, End) with a name, such as
// the section ranges kprobes refuses ("__entry_text").
type Range struct {
	Name  string
	Start uint64
	End   uint64
}

// Contains reports whether addr lies in [Start, End).
func (r Range) Contains(addr uint64) bool { return addr >= r.Start && addr < r.End }

// Names of the ranges the model knows. Loaders fill the ones they find.
const (
	RangeEntryText        = "__entry_text"
	RangeIRQEntryText     = "__irqentry_text"
	RangeSoftIRQEntryText = "__softirqentry_text"
	RangeNoinstrText      = "__noinstr_text"
	RangeKprobesText      = "__kprobes_text"
	RangeIndirectThunk    = "__indirect_thunk" // 6.1: [start, end] inclusive end in can_optimize
)

// ModuleState is enum module_state.
type ModuleState uint8

const (
	ModuleLive ModuleState = iota
	ModuleComing
	ModuleGoing
	ModuleUnformed
)

func (s ModuleState) String() string {
	return [...]string{"live", "coming", "going", "unformed"}[s]
}

// TraceEvent is one static trace event: an entry of a _ftrace_events
// section (struct trace_event_call *), named as find_trace_event_call
// compares it: class->system and trace_event_name (call->tp->name for a
// TRACE_EVENT, call->name otherwise). An empty System and Name is an
// event known only to exist.
type TraceEvent struct{ System, Name string }

// Module is one loaded module with its own tables.
type Module struct {
	Name            string
	State           ModuleState
	Text            *Region // core text
	Init            *Region // init text, nil once freed
	Symbols         []Symbol
	JumpEntries     []JumpEntry
	StaticCallSites []StaticCallSite
	BugEntries      []BugEntry
	ExTable         []ExEntry
	Blacklist       []uint64 // the module's _kprobe_blacklist table
	McountLocs      []uint64
	// TraceEvents are the module's _ftrace_events entries
	// (mod->trace_events, find_module_sections), in section order, which
	// trace_module_add_events puts on ftrace_events and tr->events; nil
	// when the module does not say (a synthetic module: the tracing layer
	// takes a documented default, trace.ConfigFor).
	TraceEvents []TraceEvent
	// Ranges are the module's own section ranges add_module_kprobe_blacklist
	// walks: RangeKprobesText (.kprobes.text) and RangeNoinstrText
	// (.noinstr.text), when the module has them (find_module_sections).
	Ranges []Range
}

// Range returns the module's named section range and whether it has it.
func (m *Module) Range(name string) (Range, bool) {
	for _, r := range m.Ranges {
		if r.Name == name {
			return r, true
		}
	}
	return Range{}, false
}

// Contains reports whether addr is in the module's core or init text.
func (m *Module) Contains(addr uint64) bool {
	return (m.Text != nil && m.Text.Contains(addr)) || (m.Init != nil && m.Init.Contains(addr))
}

// InitContains reports whether addr is in the module's init text.
func (m *Module) InitContains(addr uint64) bool { return m.Init != nil && m.Init.Contains(addr) }

// Kernel is the whole image model.
type Kernel struct {
	// Name says where the image came from ("synthetic seed=1", a path).
	Name   string
	Config Config

	// Text regions of vmlinux, sorted by address: core text first, then
	// init text. Module text lives in Modules.
	Regions []*Region

	// Symbols of vmlinux sorted by address (ties keep their given order).
	// Duplicate names are allowed.
	Symbols []Symbol

	JumpEntries     []JumpEntry      // __start___jump_table .. __stop___jump_table, run-time order
	StaticCallSites []StaticCallSite // __start_static_call_sites .., run-time order
	BugEntries      []BugEntry       // __start___bug_table .. __stop___bug_table
	ExTable         []ExEntry        // __start___ex_table .. (sorted by insn at boot)
	Blacklist       []uint64         // _kprobe_blacklist: NOKPROBE_SYMBOL addresses, table order
	Ranges          []Range          // section ranges (entry text, kprobes text, thunks, ...)
	McountLocs      []uint64         // __mcount_loc: __fentry__ call sites, sorted
	Modules         []*Module        // load order (oldest first)

	// TraceEvents are vmlinux's _ftrace_events entries
	// (__start_ftrace_events .. __stop_ftrace_events), in section order,
	// which event_trace_enable puts on ftrace_events at boot; nil when
	// the image does not say (synthetic images: the tracing layer takes
	// Debian 6.1's, trace.ConfigFor).
	TraceEvents []TraceEvent

	// ReturnSites are the return-thunk jumps objtool listed in
	// .return_sites (real images; the generator emits patched returns).
	ReturnSites []uint64

	// PVOps is vmlinux's pv_ops (struct paravirt_patch_template), one
	// function pointer per slot, as boot left it: module_finalize's
	// apply_paravirt patches module sites from it. Nil when unknown
	// (synthetic images).
	PVOps []uint64

	// Notes are caveats a loader records about what it could not fill.
	Notes []string

	// derived is the simulator's data derived from this image; see
	// Derived. A copy of the struct (a test editing an image) gets a
	// store of its own.
	derived sim.DerivedSlot
}

// Derived returns the store of the simulator's data derived from this
// image (the reservation tables' fast scans, booted ftrace records,
// kallsyms tables), built once and shared read-only by every run over
// it; it goes when the image goes. It is not part of the image: no model
// reads it. A copy of the Kernel struct starts with an empty store.
func (k *Kernel) Derived() *sim.Derived { return k.derived.For(k) }

// CoreText returns the core text region ([_stext, _etext)), or nil.
func (k *Kernel) CoreText() *Region {
	for _, r := range k.Regions {
		if r.Kind == CoreText {
			return r
		}
	}
	return nil
}

// InitText returns the init text region, or nil.
func (k *Kernel) InitText() *Region {
	for _, r := range k.Regions {
		if r.Kind == InitText {
			return r
		}
	}
	return nil
}

// Range returns the named section range and whether the image has it.
func (k *Kernel) Range(name string) (Range, bool) {
	for _, r := range k.Ranges {
		if r.Name == name {
			return r, true
		}
	}
	return Range{}, false
}

// ModuleTextAddress returns the module whose core or init text holds addr,
// skipping MODULE_STATE_UNFORMED modules.
//
// Models kernel/module/main.c:__module_text_address (the lookup, not its cost).
func (k *Kernel) ModuleTextAddress(addr uint64) *Module {
	for _, m := range k.Modules {
		if m.State != ModuleUnformed && m.Contains(addr) {
			return m
		}
	}
	return nil
}

// RegionAt returns the text region (vmlinux or module) holding addr, or nil.
func (k *Kernel) RegionAt(addr uint64) *Region {
	for _, r := range k.Regions {
		if r.Contains(addr) {
			return r
		}
	}
	if m := k.ModuleAt(addr); m != nil {
		if m.Text != nil && m.Text.Contains(addr) {
			return m.Text
		}
		return m.Init
	}
	return nil
}

// ModuleAt returns the module whose text holds addr, or nil.
func (k *Kernel) ModuleAt(addr uint64) *Module {
	for _, m := range k.Modules {
		if m.Contains(addr) {
			return m
		}
	}
	return nil
}

// Text returns up to n text bytes starting at addr, stopping at the end of
// the region holding addr; nil when addr is in no region. This is the
// simulator's read, not the kernel's (the kernel's copy_from_kernel_nofault
// is modelled by callers).
func (k *Kernel) Text(addr uint64, n int) []byte {
	r := k.RegionAt(addr)
	if r == nil {
		return nil
	}
	off := addr - r.Start
	end := off + uint64(n)
	if end > uint64(len(r.Bytes)) {
		end = uint64(len(r.Bytes))
	}
	return r.Bytes[off:end]
}

// TextBytes returns the total size of vmlinux and module text.
func (k *Kernel) TextBytes() uint64 {
	var n uint64
	for _, r := range k.Regions {
		n += uint64(len(r.Bytes))
	}
	for _, m := range k.Modules {
		if m.Text != nil {
			n += uint64(len(m.Text.Bytes))
		}
		if m.Init != nil {
			n += uint64(len(m.Init.Bytes))
		}
	}
	return n
}

// Functions returns the text symbols of vmlinux that are functions (not
// __pfx_/__cfi_ padding), in address order.
func (k *Kernel) Functions() []Symbol {
	out := make([]Symbol, 0, len(k.Symbols))
	for _, s := range k.Symbols {
		if s.IsText() && !s.IsPadding() {
			out = append(out, s)
		}
	}
	return out
}

// SymbolAt returns the index in Symbols of the last symbol whose address is
// <= addr (the candidate containing addr), or -1.
func (k *Kernel) SymbolAt(addr uint64) int {
	i := sort.Search(len(k.Symbols), func(i int) bool { return k.Symbols[i].Addr > addr })
	return i - 1
}

// LookupFunction returns the text symbol that contains addr, or nil.
// Non-text symbols between functions are skipped.
func (k *Kernel) LookupFunction(addr uint64) *Symbol {
	for i := k.SymbolAt(addr); i >= 0; i-- {
		s := &k.Symbols[i]
		if !s.IsText() || s.Size == 0 {
			continue // data or a zero-size marker such as _stext
		}
		if addr < s.Addr+s.Size {
			return s
		}
		return nil
	}
	return nil
}

// SymbolsByName returns every vmlinux symbol with the given name, in
// address order (simulator index; the kernel's lookup is modelled in
// package kallsyms and the kprobes name resolver).
func (k *Kernel) SymbolsByName(name string) []Symbol {
	var out []Symbol
	for _, s := range k.Symbols {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// NameCounts counts the symbols of each name, vmlinux and module symbols
// together (simulator helper: which names are unique).
func (k *Kernel) NameCounts() map[string]int {
	count := map[string]int{}
	for _, s := range k.Symbols {
		count[s.Name]++
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			count[s.Name]++
		}
	}
	return count
}
