package kprobes

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// This file derives the details of a Reason and the wording of trail
// steps. It is simulator work: it reads the image model directly (never
// the kernel services the pipeline counts through, and never with a
// counter), so a Reason costs no count and reads the same under every
// switch set.

// symbolOf returns the symbol holding addr as the reasons name it: the
// vmlinux or module text symbol whose [start, next symbol) contains addr,
// preferring a sized function among aliases.
func (kp *Kprobes) symbolOf(addr uint64) (string, uint64, bool) {
	k := kp.Image
	syms := k.Symbols
	if m := k.ModuleAt(addr); m != nil {
		syms = kp.moduleSymbols(m)
	}
	i := sort.Search(len(syms), func(i int) bool { return syms[i].Addr > addr }) - 1
	if i < 0 {
		return "", 0, false
	}
	at := syms[i].Addr
	best := i
	for j := i; j >= 0 && syms[j].Addr == at; j-- {
		if syms[j].IsText() && syms[j].Size > 0 {
			best = j
		}
	}
	return syms[best].Name, at, true
}

// moduleSymbols returns m's symbols in address order (cached).
func (kp *Kprobes) moduleSymbols(m *image.Module) []image.Symbol {
	if kp.whyCache.modSyms == nil {
		kp.whyCache.modSyms = map[*image.Module][]image.Symbol{}
	}
	s, ok := kp.whyCache.modSyms[m]
	if !ok {
		s = slices.Clone(m.Symbols)
		slices.SortStableFunc(s, func(a, b image.Symbol) int {
			switch {
			case a.Addr < b.Addr:
				return -1
			case a.Addr > b.Addr:
				return 1
			}
			return 0
		})
		kp.whyCache.modSyms[m] = s
	}
	return s
}

// symPlus formats addr as the kernel's %pS does: name+0xoff.
func (kp *Kprobes) symPlus(addr uint64) string {
	name, start, ok := kp.symbolOf(addr)
	if !ok {
		return fmt.Sprintf("%#x", addr)
	}
	return fmt.Sprintf("%s+%#x", name, addr-start)
}

// rel formats addr relative to the symbol start fn as "+N" (decimal, as
// kprobe_events offsets are usually written), or as name+N when addr lies
// in another symbol.
func (kp *Kprobes) rel(fn, addr uint64) string {
	name, start, ok := kp.symbolOf(addr)
	switch {
	case ok && start == fn:
		return fmt.Sprintf("+%d", addr-fn)
	case ok:
		return fmt.Sprintf("%s+%d", name, addr-start)
	}
	return fmt.Sprintf("%#x", addr)
}

// fnOf returns the start of the symbol holding addr (addr itself if none).
func (kp *Kprobes) fnOf(addr uint64) uint64 {
	if _, start, ok := kp.symbolOf(addr); ok {
		return start
	}
	return addr
}

// insnName names an instruction in a reason: its kprobes class when it
// has one (jcc, jmp, call, ret, ...), else its mnemonic.
func (kp *Kprobes) insnName(i x86.Insn, addr uint64) string {
	locs := kp.Image.McountLocs
	if m := kp.Image.ModuleAt(addr); m != nil {
		locs = m.McountLocs
	}
	if j, ok := slices.BinarySearch(locs, addr); ok && locs[j] == addr {
		// Recovered as the ideal NOP5 (__recover_probed_insn).
		return "__fentry__ call (an ftrace NOP5)"
	}
	switch i.Kind {
	case x86.KindOther:
	case x86.KindJmpIndirect:
		return "indirect jmp"
	case x86.KindCallIndirect:
		return "indirect call"
	default:
		return i.Kind.String()
	}
	if full, err := x86.Decode(nil, kp.Image.Text(addr, x86.MaxInsnSize)); err == nil && full.Mnemonic != "" {
		return full.Mnemonic
	}
	return fmt.Sprintf("opcode %#02x", i.Opcode[0])
}

// whyCache holds the simulator's sorted views of the tables reasons name.
type whyCache struct {
	modSyms map[*image.Module][]image.Symbol
	jumps   map[*image.Module][]image.JumpEntry // nil key: vmlinux
}

// jumpSiteKind names a jump-label site by its bytes.
func jumpSiteKind(code []byte) (string, int) {
	switch {
	case len(code) >= 5 && bytes.Equal(code[:5], x86.NOP5[:]):
		return "NOP5", 5
	case len(code) >= 2 && bytes.Equal(code[:2], x86.NOP2[:]):
		return "NOP2", 2
	case len(code) >= 1 && code[0] == x86.JMP32InsnOpcode:
		return "JMP32", 5
	case len(code) >= 1 && code[0] == x86.JMP8InsnOpcode:
		return "JMP8", 2
	}
	return "unsized", 1
}

// jumpEntries returns the jump entries of vmlinux (m nil) or m, sorted by
// code address (cached).
func (kp *Kprobes) jumpEntries(m *image.Module) []image.JumpEntry {
	if kp.whyCache.jumps == nil {
		kp.whyCache.jumps = map[*image.Module][]image.JumpEntry{}
	}
	s, ok := kp.whyCache.jumps[m]
	if !ok {
		src := kp.Image.JumpEntries
		if m != nil {
			src = m.JumpEntries
		}
		s = slices.Clone(src)
		slices.SortStableFunc(s, func(a, b image.JumpEntry) int {
			switch {
			case a.Code < b.Code:
				return -1
			case a.Code > b.Code:
				return 1
			}
			return 0
		})
		kp.whyCache.jumps[m] = s
	}
	return s
}

// jumpLabelDetail describes the jump-label site that reserves a byte of
// [start, end], relative to symbol fn: "NOP5 site at +5".
func (kp *Kprobes) jumpLabelDetail(fn, start, end uint64) string {
	var tables [][]image.JumpEntry
	tables = append(tables, kp.jumpEntries(nil))
	if m := kp.Image.ModuleAt(start); m != nil {
		tables = append(tables, kp.jumpEntries(m))
	}
	for _, t := range tables {
		i := sort.Search(len(t), func(i int) bool { return t[i].Code+x86.JMP32InsnSize > start })
		for ; i < len(t) && t[i].Code <= end; i++ {
			kind, size := jumpSiteKind(kp.Image.Text(t[i].Code, 5))
			if t[i].Code+uint64(size) > start {
				d := fmt.Sprintf("%s site at %s", kind, kp.rel(fn, t[i].Code))
				if key := kp.dataName(t[i].Key); key != "" {
					d += " (key " + key + ")"
				}
				return d
			}
		}
	}
	return fmt.Sprintf("a jump-label site overlaps [%s, %s]", kp.rel(fn, start), kp.rel(fn, end))
}

// dataName names a data address by its vmlinux symbol, or "".
func (kp *Kprobes) dataName(addr uint64) string {
	syms := kp.Image.Symbols
	i := sort.Search(len(syms), func(i int) bool { return syms[i].Addr > addr }) - 1
	if i >= 0 && syms[i].Addr == addr {
		return syms[i].Name
	}
	return ""
}

// staticCallDetail describes the static-call site that reserves a byte
// of [start, end]: "call site of static call foo at +12".
func (kp *Kprobes) staticCallDetail(fn, start, end uint64) string {
	sites := kp.Image.StaticCallSites
	if m := kp.Image.ModuleAt(start); m != nil {
		sites = append(slices.Clip(sites), m.StaticCallSites...)
	}
	var best *image.StaticCallSite
	for i := range sites {
		s := &sites[i]
		if s.Addr <= end && s.Addr+x86.CALLInsnSize > start && (best == nil || s.Addr < best.Addr) {
			best = s
		}
	}
	if best == nil {
		return fmt.Sprintf("a static-call site overlaps [%s, %s]", kp.rel(fn, start), kp.rel(fn, end))
	}
	kind := "call"
	if best.Tail {
		kind = "tail-call (jmp)"
	}
	d := fmt.Sprintf("%s site at %s", kind, kp.rel(fn, best.Addr))
	if key := kp.dataName(best.Key); key != "" {
		d += " of static call " + strings.TrimPrefix(key, "__SCK__")
	}
	return d
}

// bugDetail describes the bug entry at addr: "WARN at +14 (fs/read_write.c:450)".
func (kp *Kprobes) bugDetail(fn, addr uint64) string {
	entries := kp.Image.BugEntries
	if m := kp.Image.ModuleAt(addr); m != nil {
		entries = m.BugEntries
	}
	for _, b := range entries {
		if b.Addr != addr {
			continue
		}
		kind := "BUG"
		if b.Flags&1 != 0 { // BUGFLAG_WARNING
			kind = "WARN"
		}
		d := fmt.Sprintf("%s at %s (ud2 with a __bug_table entry)", kind, kp.rel(fn, addr))
		if b.File != "" {
			d = fmt.Sprintf("%s at %s (%s:%d)", kind, kp.rel(fn, addr), b.File, b.Line)
		}
		return d
	}
	return fmt.Sprintf("__bug_table entry at %s", kp.rel(fn, addr))
}

// blacklistDetail says which part of populate_kprobe_blacklist covers
// addr: "blacklisted (entry text)", or for a compiler clone whose base
// name is blacklisted, "blacklisted (NOKPROBE_SYMBOL) via its base name foo".
func (kp *Kprobes) blacklistDetail(addr uint64) string {
	if why := kp.blacklistClass(addr); why != "" {
		return "blacklisted (" + why + ")"
	}
	name, _, ok := kp.symbolOf(addr)
	if i := strings.IndexByte(name, '.'); ok && i > 0 {
		base := name[:i]
		if a, ok := kp.firstByName(base); ok {
			if why := kp.blacklistClass(a); why != "" {
				return fmt.Sprintf("blacklisted (%s) via its base name %s (%s cut at '.')", why, base, name)
			}
		}
	}
	return "blacklisted"
}

// firstByName is kallsyms_lookup_name's answer for name (the lowest
// vmlinux address, then modules in load order), read from the image.
func (kp *Kprobes) firstByName(name string) (uint64, bool) {
	for _, s := range kp.Image.Symbols {
		if s.Name == name {
			return s.Addr, true
		}
	}
	for _, m := range kp.Image.Modules {
		for _, s := range m.Symbols {
			if s.Name == name {
				return s.Addr, true
			}
		}
	}
	return 0, false
}

// blacklistClass is the first populate_kprobe_blacklist source covering
// addr, in the kernel's order ("" if none): arch_within_kprobe_blacklist's
// .kprobes.text, then the list's NOKPROBE_SYMBOL entries, the .kprobes.text
// and .noinstr.text symbols, the entry text, and module entries.
func (kp *Kprobes) blacklistClass(addr uint64) string {
	k := kp.Image
	if r, ok := k.Range(image.RangeKprobesText); ok && r.Contains(addr) {
		return ".kprobes.text"
	}
	_, start, ok := kp.symbolOf(addr)
	if m := k.ModuleAt(addr); m != nil {
		if ok && slices.Contains(m.Blacklist, start) {
			return "NOKPROBE_SYMBOL in module " + m.Name
		}
		return ""
	}
	if ok && slices.Contains(k.Blacklist, start) {
		return "NOKPROBE_SYMBOL"
	}
	if r, ok := k.Range(image.RangeNoinstrText); ok && r.Contains(addr) {
		return ".noinstr.text"
	}
	if r, ok := k.Range(image.RangeEntryText); ok && r.Contains(addr) {
		return "entry text"
	}
	return ""
}
