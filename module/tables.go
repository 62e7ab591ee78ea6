package module

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
)

// Table sizes (bytes per entry) as find_module_sections' section_objs and
// the arch code divide them.
const (
	JumpEntrySize       = 16 // struct jump_entry: s32 code, s32 target, long key
	StaticCallSiteSize  = 8  // struct static_call_site: s32 addr, s32 key
	BugEntrySize        = 12 // struct bug_entry with CONFIG_DEBUG_BUGVERBOSE
	BugEntrySizeShort   = 8  // without
	McountLocSize       = 8  // unsigned long
	ExEntrySize         = 12 // struct exception_table_entry: s32 insn, s32 fixup, int data
	BlacklistEntrySize  = 8  // unsigned long
	AltInstrSize        = 12 // struct alt_instr (packed)
	ParaSiteSize        = 16 // struct paravirt_patch_site (aligned to 8)
	SiteSize            = 4  // .retpoline_sites, .return_sites, .smp_locks, .orc_unwind_ip
	jumpTypeMask        = 3  // JUMP_TYPE_MASK: bit 0 branch, bit 1 init
	staticCallSiteFlags = 3  // STATIC_CALL_SITE_TAIL | STATIC_CALL_SITE_INIT
)

// Counts are a module's table sizes in entries, as the kernel divides the
// section sizes (sh_size / entry size).
type Counts struct {
	JumpEntries     int `json:"jump_entries"`
	StaticCallSites int `json:"static_call_sites"`
	BugEntries      int `json:"bug_entries"`
	McountLocs      int `json:"mcount_locations"`
	ExEntries       int `json:"exception_entries"`
	Blacklist       int `json:"blacklist_entries"`
	AltInstrs       int `json:"altinstructions"`
	ParaSites       int `json:"parainstructions"`
	RetpolineSites  int `json:"retpoline_sites"`
	ReturnSites     int `json:"return_sites"`
	SMPLocks        int `json:"smp_locks"`
}

// entries returns the section's relocated bytes and its address, split
// into size-byte entries; a size that does not divide is an error, as a
// table whose entries straddle its end would be garbage.
func (o *object) entries(mem *Memory, name string, size int) (uint64, []byte, error) {
	i := o.find(name)
	if i == 0 {
		return 0, nil, nil
	}
	s := o.secs[i]
	if s.size%uint64(size) != 0 {
		return 0, nil, o.errorf("section %s: size %d is not a multiple of its %d-byte entries", name, s.size, size)
	}
	return s.addr, mem.at(s.addr, int(s.size)), nil
}

func rel32(b []byte, at uint64) uint64 {
	return at + uint64(int64(int32(binary.LittleEndian.Uint32(b))))
}

// readTables decodes the relocated tables into m, in the order and form
// the running kernel holds them once the module is LIVE:
//   - __jump_table sorted by (key, code), init bit set for init-text sites
//     (jump_label_add_module → jump_label_sort_entries, jump_entry_set_init);
//   - .static_call_sites with trampoline keys replaced by the real keys,
//     init bit set, sorted by key (static_call_add_module,
//     __static_call_init);
//   - __bug_table in table order (module_bug_finalize);
//   - __mcount_loc sorted (ftrace_module_init → ftrace_process_locs);
//   - __ex_table sorted by insn (post_relocation → sort_extable; the init
//     entries are trimmed by the extable model for a module whose init is
//     gone, as trim_init_extable does);
//   - _kprobe_blacklist in table order, .kprobes.text and .noinstr.text as
//     ranges (find_module_sections).
func (l *Loader) readTables(o *object, mem *Memory, m *image.Module, c *Counts) error {
	le := binary.LittleEndian
	// within_module_init: any init block (6.1: the init layout; 6.4+ the
	// init mod_mem_types).
	inInit := func(a uint64) bool {
		b := mem.block(a)
		return b != nil && b.Init
	}

	at, b, err := o.entries(mem, "__jump_table", JumpEntrySize)
	if err != nil {
		return err
	}
	for off := 0; off < len(b); off += JumpEntrySize {
		e := at + uint64(off)
		key := e + 8 + le.Uint64(b[off+8:])
		code := rel32(b[off:], e)
		m.JumpEntries = append(m.JumpEntries, image.JumpEntry{Code: code, Target: rel32(b[off+4:], e+4),
			Key: key &^ jumpTypeMask, Branch: key&1 != 0, Init: inInit(code)})
	}
	lib.SortJumpEntries(m.JumpEntries)
	c.JumpEntries = len(m.JumpEntries)

	if at, b, err = o.entries(mem, ".static_call_sites", StaticCallSiteSize); err != nil {
		return err
	}
	for off := 0; off < len(b); off += StaticCallSiteSize {
		e := at + uint64(off)
		addr := rel32(b[off:], e)
		skey := rel32(b[off+4:], e+4)
		key := skey &^ staticCallSiteFlags
		if l.kernelTextAddress(key) {
			k, ok := l.trampKeyLookup(key)
			if !ok {
				return o.errorf("static-call site %#x: key field points at text %#x that is no static-call trampoline: Failed to fixup __raw_static_call() usage (static_call_add_module: -EINVAL)", addr, key)
			}
			key = k
		}
		m.StaticCallSites = append(m.StaticCallSites, image.StaticCallSite{Addr: addr, Key: key, Tail: skey&1 != 0, Init: inInit(addr)})
	}
	lib.SortStaticCallSites(m.StaticCallSites)
	c.StaticCallSites = len(m.StaticCallSites)

	bl := l.gen.bugEntry(l.k.Config.BugVerbose)
	if at, b, err = o.entries(mem, "__bug_table", bl.size); err != nil {
		return err
	}
	for off := 0; off < len(b); off += bl.size {
		e := at + uint64(off)
		be := image.BugEntry{Addr: rel32(b[off:], e), Flags: le.Uint16(b[off+bl.flag:])}
		if bl.file >= 0 {
			be.File, _ = mem.cstring(rel32(b[off+bl.file:], e+uint64(bl.file)))
			be.Line = le.Uint16(b[off+bl.line:])
		}
		m.BugEntries = append(m.BugEntries, be)
	}
	c.BugEntries = len(m.BugEntries)

	if _, b, err = o.entries(mem, "__mcount_loc", McountLocSize); err != nil {
		return err
	}
	for off := 0; off < len(b); off += McountLocSize {
		m.McountLocs = append(m.McountLocs, le.Uint64(b[off:]))
	}
	slices.Sort(m.McountLocs)
	c.McountLocs = len(m.McountLocs)

	if at, b, err = o.entries(mem, "__ex_table", ExEntrySize); err != nil {
		return err
	}
	for off := 0; off < len(b); off += ExEntrySize {
		e := at + uint64(off)
		m.ExTable = append(m.ExTable, image.ExEntry{Insn: rel32(b[off:], e), Fixup: rel32(b[off+4:], e+4)})
	}
	slices.SortStableFunc(m.ExTable, func(a, b image.ExEntry) int { return cmp.Compare(a.Insn, b.Insn) })
	c.ExEntries = len(m.ExTable)

	if _, b, err = o.entries(mem, "_kprobe_blacklist", BlacklistEntrySize); err != nil {
		return err
	}
	for off := 0; off < len(b); off += BlacklistEntrySize {
		m.Blacklist = append(m.Blacklist, le.Uint64(b[off:]))
	}
	c.Blacklist = len(m.Blacklist)

	for _, r := range []struct{ sec, name string }{{".kprobes.text", image.RangeKprobesText}, {".noinstr.text", image.RangeNoinstrText}} {
		if i := o.find(r.sec); i != 0 && o.secs[i].size > 0 {
			s := o.secs[i]
			m.Ranges = append(m.Ranges, image.Range{Name: r.name, Start: s.addr, End: s.addr + s.size})
		}
	}

	m.TraceEvents = o.traceEvents(mem)

	for _, t := range []struct {
		name string
		size int
		n    *int
	}{{".altinstructions", l.gen.altInstrSize, &c.AltInstrs}, {".parainstructions", ParaSiteSize, &c.ParaSites},
		{".retpoline_sites", SiteSize, &c.RetpolineSites}, {".return_sites", SiteSize, &c.ReturnSites},
		{".smp_locks", SiteSize, &c.SMPLocks}} {
		if i := o.find(t.name); i != 0 {
			*t.n = int(o.secs[i].size) / t.size
		}
	}
	return nil
}

// kernelTextAddress: vmlinux text or a loaded module's text.
//
// Models kernel/extable.c:kernel_text_address (the parts that apply at
// module load).
func (l *Loader) kernelTextAddress(a uint64) bool { return l.k.RegionAt(a) != nil }

// trampKeyLookup maps a static-call trampoline address to its key. The
// kernel walks vmlinux's static_call_tramp_key table
// (__start_static_call_tramp_key, filled by EXPORT_STATIC_CALL_TRAMP); the
// image has no such table, so kpsim pairs __SCT__name with __SCK__name by
// name, which is how DECLARE_STATIC_CALL names both.
//
// Models kernel/static_call_inline.c:tramp_key_lookup.
func (l *Loader) trampKeyLookup(tramp uint64) (uint64, bool) {
	if l.tramps == nil {
		l.tramps = map[uint64]uint64{}
		for _, s := range l.k.Symbols {
			if name, ok := cutPrefix(s.Name, "__SCT__"); ok {
				if key, ok := l.vmlinux["__SCK__"+name]; ok {
					l.tramps[s.Addr] = key
				}
			}
		}
	}
	k, ok := l.tramps[tramp]
	return k, ok
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// traceEvents reads the relocated _ftrace_events section (mod->trace_events,
// find_module_sections: section_objs of sizeof(struct trace_event_call *)):
// each entry's call, its class->system and its name (tp->name when the
// name/tp union points into the module's __tracepoints section, as every
// TRACE_EVENT's does, else the name itself). struct trace_event_call
// begins with a list_head, the class and the union in 6.1.192, 6.12.117
// and 7.3; a class with its system string. A module without the section
// has no events (an empty, non-nil list); an entry that cannot be read is
// kept unnamed.
func (o *object) traceEvents(mem *Memory) []image.TraceEvent {
	out := []image.TraceEvent{}
	i := o.find("_ftrace_events")
	if i == 0 {
		return out
	}
	s := o.secs[i]
	b := mem.at(s.addr, int(s.size))
	var tpLo, tpHi uint64
	if j := o.find("__tracepoints"); j != 0 {
		tpLo, tpHi = o.secs[j].addr, o.secs[j].addr+o.secs[j].size
	}
	ptr := func(a uint64) uint64 {
		if p := mem.at(a, 8); p != nil {
			return binary.LittleEndian.Uint64(p)
		}
		return 0
	}
	for off := 0; off+8 <= len(b); off += 8 {
		call := binary.LittleEndian.Uint64(b[off:])
		var ev image.TraceEvent
		if class := ptr(call + 16); class != 0 {
			ev.System, _ = mem.cstring(ptr(class))
		}
		if n := ptr(call + 24); n != 0 {
			if n >= tpLo && n < tpHi {
				n = ptr(n) // tp->name
			}
			ev.Name, _ = mem.cstring(n)
		}
		out = append(out, ev)
	}
	return out
}
