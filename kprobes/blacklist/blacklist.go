// Package blacklist models the kprobe blacklist of kernel/kprobes.c: the
// list populate_kprobe_blacklist builds at boot (and
// add_module_kprobe_blacklist extends at MODULE_STATE_COMING), and the
// check within_kprobe_blacklist that check_kprobe_address_safe runs for
// every probe.
//
// Upstream (6.1.192, read from Debian's linux-source-6.1) the check is
// arch_within_kprobe_blacklist (the x86 default: [__kprobes_text_start,
// __kprobes_text_end)), then a walk of the whole kprobe_blacklist list
// (OpWalkEntry per node), then, when the symbol containing the address has
// a '.' in its name (foo.cold, foo.isra.0), the same two checks again for
// the base name's address. Behind the beyond-the-series switch
// sim.BlacklistIndex, LateInit builds an address index of the vmlinux
// entries (sorted, merged ranges) so the walk becomes a binary search plus
// a walk of the module entries only.
//
// What populate_kprobe_blacklist adds in 6.1 (checked against the source):
// one entry per _kprobe_blacklist (NOKPROBE_SYMBOL) address that is kernel
// text and known to kallsyms, [addr, addr+size) with kallsyms' size (the
// distance to the next symbol, not st_size); then one entry per symbol in
// [__kprobes_text_start, __kprobes_text_end) and in [__noinstr_text_start,
// __noinstr_text_end) (kprobe_add_area_blacklist); then x86's
// arch_populate_kprobe_blacklist, which adds the entry text
// [__entry_text_start, __entry_text_end) only — not the irqentry or
// softirqentry text. Module entries follow at the tail, per module:
// its _kprobe_blacklist, then one entry per symbol of its .kprobes.text and
// of its .noinstr.text (image.Module.Ranges; in the Debian 6.1 modules only
// kvm, kvm-intel and kvm-amd have noinstr text, none has kprobes text or a
// _kprobe_blacklist). x86's arch_within_kprobe_blacklist tests vmlinux's
// kprobes text only: a module's ranges count through the list.
package blacklist

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// FaultIndexAlloc makes the late-init allocation of the blacklist index
// fail; within_kprobe_blacklist then keeps walking the list.
var FaultIndexAlloc = sim.NewFaultPoint("kprobe_blacklist.index.alloc",
	"late-init allocation of the kprobe blacklist address index (blacklist-index) fails: the list walk stays linear")

// FaultEntryAlloc makes kprobe_add_ksym_blacklist's kmalloc of one entry
// fail (-ENOMEM). At boot populate_kprobe_blacklist stops there ("Failed to
// populate blacklist ..., kprobes not restricted"; the entries already
// added stay, PopulateError reports it); at a module's COMING
// add_module_kprobe_blacklist ignores it, and the module's remaining
// entries of that area are missing: a probe there is accepted.
var FaultEntryAlloc = sim.NewFaultPoint("kprobe_blacklist.entry.alloc",
	"kprobe_add_ksym_blacklist: kmalloc of a blacklist entry fails (-ENOMEM): populate_kprobe_blacklist stops (kprobes not restricted), add_module_kprobe_blacklist drops the rest of the area")

// EntryBytes is sizeof(struct kprobe_blacklist_entry) in 6.1.192: list_head
// 16, start_addr 8, end_addr 8, and the rcu_head 16 that "kprobes: Protect
// kprobe_blacklist with RCU" added (6.1.189/190). Mainline as read for the
// reference has no rcu_head: MainlineEntryBytes. kpsim charges EntryBytes.
const (
	EntryBytes         = 48
	MainlineEntryBytes = 32
)

// IndexEntryBytes is one indexed range: unsigned long start, end.
const IndexEntryBytes = 16

// Errors a caller can test with errors.Is (each also matches lib's shared
// reason: lib.ErrNotLateInit, lib.ErrIndexOff, lib.ErrIndexAlloc).
var (
	ErrNotLateInit = lib.TableError(lib.ErrNotLateInit, "kprobe_blacklist: index asked for before late init (the list walk is used until then)")
	ErrIndexOff    = lib.TableError(lib.ErrIndexOff, "kprobe_blacklist: no index: the blacklist-index switch is off")
	ErrIndexAlloc  = lib.TableError(lib.ErrIndexAlloc, "kprobe_blacklist: no index: its late-init allocation failed (fault kprobe_blacklist.index.alloc)")
)

// indexSpec is the blacklist-index's place in the generic late-init index.
var indexSpec = lib.IndexSpec{
	Name:   "kprobe_blacklist",
	Switch: sim.BlacklistIndex, Fault: FaultIndexAlloc,
	Fill: OpIndexFill, SortCmp: OpIndexSortCmp, Probe: OpIndexProbe,
	NotLateInit: ErrNotLateInit, Off: ErrIndexOff, Alloc: ErrIndexAlloc,
}

func entryStart(e Entry) uint64 { return e.Start }

// Checker is the one interface through which the registration pipeline
// asks whether an address is blacklisted, whatever form is active.
type Checker interface {
	WithinKprobeBlacklist(c *sim.Counters, addr uint64) bool
}

var _ Checker = (*List)(nil)

// Entry is one struct kprobe_blacklist_entry: [Start, End).
type Entry struct {
	Start, End uint64
	Module     *image.Module // nil for vmlinux entries
}

// List models the kprobe_blacklist list and its optional index.
// Not safe for concurrent use (updates run under kprobe_mutex).
type List struct {
	k    *image.Kernel
	sw   sim.Switches
	f    *sim.Faults
	syms Symbols

	entries     []Entry // list order: vmlinux entries first, then modules'
	populateErr error

	kprobesText image.Range
	haveKprobes bool

	idx     lib.LateIndex[Entry] // blacklist-index: merged vmlinux ranges, built by LateInit
	covered int                  // list entries the index replaces (the vmlinux ones)
	scan    listScanner          // the list walk, or its fast scan (EnableFastScan)
}

// listScanner answers the walk of the whole list: the walk itself
// (listWalk), or the simulator's fast scan with the walk's count
// (fastscan.go), chosen by EnableFastScan (and back to the walk when a
// module changes the list).
type listScanner interface {
	walkList(c *sim.Counters, addr uint64) bool
}

// listWalk is __within_kprobe_blacklist's walk of the whole list.
type listWalk struct{ l *List }

func (w listWalk) walkList(c *sim.Counters, addr uint64) bool {
	return walkEntries(c, w.l.entries, addr)
}

// walkEntries visits list nodes in order (OpWalkEntry each) until one
// contains addr.
func walkEntries(c *sim.Counters, es []Entry, addr uint64) bool {
	for _, e := range es {
		c.Inc(OpWalkEntry)
		if addr >= e.Start && addr < e.End {
			return true
		}
	}
	return false
}

// New models init_kprobes' populate_kprobe_blacklist over image k, then
// add_module_kprobe_blacklist for every module already loaded (all but
// UNFORMED ones, oldest first), counting the work on c. syms is the
// kallsyms service (nil: kallsyms.NewSorted(k)). A populate failure is not an
// error here: the kernel prints "Failed to populate blacklist" and runs
// with what it has; PopulateError reports it.
func New(c *sim.Counters, k *image.Kernel, sw sim.Switches, f *sim.Faults, syms Symbols) (*List, error) {
	if k == nil {
		return nil, errors.New("kprobe_blacklist: nil kernel image")
	}
	if syms == nil {
		syms = kallsyms.NewSorted(k)
	}
	l := &List{k: k, sw: sw, f: f, syms: syms}
	l.idx = lib.NewLateIndex(&indexSpec, entryStart, IndexEntryBytes)
	l.scan = listWalk{l}
	l.kprobesText, l.haveKprobes = k.Range(image.RangeKprobesText)
	l.populateErr = l.populateKprobeBlacklist(c)
	for _, m := range k.Modules {
		if m.State != image.ModuleUnformed {
			l.AddModule(c, m)
		}
	}
	return l, nil
}

// PopulateError returns the error populate_kprobe_blacklist stopped with, if any.
func (l *List) PopulateError() error { return l.populateErr }

// Entries returns a copy of the list, in list order.
func (l *List) Entries() []Entry { return append([]Entry(nil), l.entries...) }

// Bytes returns the list's memory: entries × EntryBytes (6.1.192).
func (l *List) Bytes() int64 { return int64(len(l.entries)) * EntryBytes }

// kernelTextAddress: core text, init text (the list is built at boot) or
// a formed module's text.
//
// Models kernel/extable.c:kernel_text_address (the parts that apply).
func (l *List) kernelTextAddress(addr uint64) bool {
	if r := l.k.RegionAt(addr); r != nil {
		if r.Module == "" {
			return true
		}
		m := l.k.ModuleAt(addr)
		return m != nil && m.State != image.ModuleUnformed
	}
	return false
}

// kprobeAddKsymBlacklist appends [entry, entry+size) (kallsyms size) at
// the tail; it returns the size, or an error where the kernel returns
// -EINVAL (not text, or unknown to kallsyms).
//
// Models kernel/kprobes.c:kprobe_add_ksym_blacklist.
func (l *List) kprobeAddKsymBlacklist(c *sim.Counters, entry uint64, mod *image.Module) (uint64, error) {
	if !l.kernelTextAddress(entry) {
		return 0, fmt.Errorf("kprobe_blacklist: %#x is not kernel text (-EINVAL)", entry)
	}
	size, _, ok := l.syms.LookupSizeOffset(c, entry)
	if !ok {
		return 0, fmt.Errorf("kprobe_blacklist: no symbol at %#x (-EINVAL)", entry)
	}
	if l.f.Fail(FaultEntryAlloc) {
		return 0, fmt.Errorf("kprobe_blacklist: kmalloc of the entry for %#x: %w", entry, errno.ENOMEM)
	}
	c.Inc(OpPopulateEntry)
	l.entries = append(l.entries, Entry{Start: entry, End: entry + size, Module: mod})
	return size, nil
}

// kprobeAddAreaBlacklist adds one entry per symbol in [start, end),
// stepping by each symbol's size (1 for a zero size).
//
// Models kernel/kprobes.c:kprobe_add_area_blacklist.
func (l *List) kprobeAddAreaBlacklist(c *sim.Counters, start, end uint64, mod *image.Module) error {
	for entry := start; entry < end; {
		n, err := l.kprobeAddKsymBlacklist(c, entry, mod)
		if err != nil {
			return err
		}
		if n == 0 {
			n = 1
		}
		entry += n
	}
	return nil
}

// populateKprobeBlacklist: NOKPROBE_SYMBOL entries (an -EINVAL one is
// skipped), the kprobes text, the noinstr text, then x86's
// arch_populate_kprobe_blacklist (entry text).
//
// Models kernel/kprobes.c:populate_kprobe_blacklist.
func (l *List) populateKprobeBlacklist(c *sim.Counters) error {
	defer func() { c.SetBytes("kprobe_blacklist.list.bytes", l.Bytes()) }()
	for _, a := range l.k.Blacklist {
		if _, err := l.kprobeAddKsymBlacklist(c, a, nil); errors.Is(err, errno.ENOMEM) {
			return err // only -EINVAL continues
		}
	}
	for _, name := range []string{image.RangeKprobesText, image.RangeNoinstrText} {
		if r, ok := l.k.Range(name); ok {
			if err := l.kprobeAddAreaBlacklist(c, r.Start, r.End, nil); err != nil {
				return err
			}
		}
	}
	return l.archPopulateKprobeBlacklist(c)
}

// archPopulateKprobeBlacklist adds the entry text, nothing else (6.1).
//
// Models arch/x86/kernel/kprobes/core.c:arch_populate_kprobe_blacklist.
func (l *List) archPopulateKprobeBlacklist(c *sim.Counters) error {
	if r, ok := l.k.Range(image.RangeEntryText); ok {
		return l.kprobeAddAreaBlacklist(c, r.Start, r.End, nil)
	}
	return nil
}

// AddModule appends module m's entries at MODULE_STATE_COMING: each
// address of its _kprobe_blacklist (failures ignored, as the kernel does),
// then the symbols of its kprobes text and of its noinstr text (an area
// walk stops at its first failure, its error ignored).
//
// Models kernel/kprobes.c:add_module_kprobe_blacklist.
func (l *List) AddModule(c *sim.Counters, m *image.Module) {
	l.scan = listWalk{l} // the list changes: the fast scan no longer holds
	for _, a := range m.Blacklist {
		_, _ = l.kprobeAddKsymBlacklist(c, a, m)
	}
	for _, name := range []string{image.RangeKprobesText, image.RangeNoinstrText} {
		if r, ok := m.Range(name); ok && r.Start != 0 {
			_ = l.kprobeAddAreaBlacklist(c, r.Start, r.End, m)
		}
	}
	c.SetBytes("kprobe_blacklist.list.bytes", l.Bytes())
}

// RemoveModule drops module m's entries at MODULE_STATE_GOING: for each
// _kprobe_blacklist address a, every entry whose start lies in [a, a+1),
// then for its kprobes and noinstr text every entry starting in the range,
// the whole list walked each time (OpWalkEntry per node).
//
// Models kernel/kprobes.c:remove_module_kprobe_blacklist →
// kprobe_remove_area_blacklist / kprobe_remove_ksym_blacklist.
func (l *List) RemoveModule(c *sim.Counters, m *image.Module) {
	l.scan = listWalk{l} // the list changes: the fast scan no longer holds
	drop := func(start, end uint64) {
		kept := l.entries[:0]
		for _, e := range l.entries {
			c.Inc(OpWalkEntry)
			if e.Start >= start && e.Start < end {
				continue
			}
			kept = append(kept, e)
		}
		l.entries = kept
	}
	for _, a := range m.Blacklist {
		drop(a, a+1)
	}
	for _, name := range []string{image.RangeKprobesText, image.RangeNoinstrText} {
		if r, ok := m.Range(name); ok && r.Start != 0 {
			drop(r.Start, r.End)
		}
	}
	c.SetBytes("kprobe_blacklist.list.bytes", l.Bytes())
}

// WithinKprobeBlacklist reports whether addr must not be probed: the
// section range and the list (or index), then, for a symbol whose name has
// a '.', the same for the base name's address.
//
// Models kernel/kprobes.c:within_kprobe_blacklist.
func (l *List) WithinKprobeBlacklist(c *sim.Counters, addr uint64) bool {
	if l.withinKprobeBlacklist(c, addr) {
		return true
	}
	name, ok := l.syms.LookupSymbolName(c, addr)
	if !ok {
		return false
	}
	i := strings.IndexByte(name, '.')
	if i < 0 {
		return false
	}
	if base, ok := l.syms.LookupName(c, name[:i]); ok && base != 0 {
		return l.withinKprobeBlacklist(c, base)
	}
	return false
}

// withinKprobeBlacklist: arch_within_kprobe_blacklist, then the list walk
// (OpWalkEntry per node, first hit returns) or, with the index, a binary
// search over the vmlinux ranges and a walk of the module entries.
//
// Models kernel/kprobes.c:__within_kprobe_blacklist.
func (l *List) withinKprobeBlacklist(c *sim.Counters, addr uint64) bool {
	if l.archWithinKprobeBlacklist(c, addr) {
		return true
	}
	if l.idx.Built() != nil {
		return l.searchIndex(c, addr) || walkEntries(c, l.entries[l.covered:], addr)
	}
	return l.scan.walkList(c, addr)
}

// archWithinKprobeBlacklist is the weak default x86 uses:
// [__kprobes_text_start, __kprobes_text_end).
//
// Models kernel/kprobes.c:arch_within_kprobe_blacklist.
func (l *List) archWithinKprobeBlacklist(c *sim.Counters, addr uint64) bool {
	c.Inc(OpArchCheck)
	return l.haveKprobes && l.kprobesText.Contains(addr)
}

// Index is the blacklist-index: the vmlinux entries present at late init
// (the first Covered() list nodes), as sorted, merged, disjoint ranges.
// Bytes is Len() × IndexEntryBytes, or the B-tree's nodes
// (reservation-btree).
type Index struct {
	*lib.SortedIndex[Entry]
	covered int
}

// Covered returns how many list entries the index replaces.
func (x *Index) Covered() int { return x.covered }

// searchIndex: the last range starting at or below addr (OpIndexProbe per
// binary-search step), then one containment test (OpIndexEntry).
//
// Models __within_kprobe_blacklist's list walk with kpsim's
// blacklist-index (beyond the series).
func (l *List) searchIndex(c *sim.Counters, addr uint64) bool {
	// The first range with start > addr, i.e. start >= addr+1 (no range
	// starts at the top of the address space).
	lo := l.idx.Seek(c, addr+1)
	if lo == 0 {
		return false
	}
	c.Inc(OpIndexEntry)
	return addr < l.idx.Built().Sorted[lo-1].End
}

// LateInit builds the blacklist index when sim.BlacklistIndex is on: the
// vmlinux entries (those populate_kprobe_blacklist added) sorted by start
// (OpIndexFill per entry, OpIndexSortCmp per comparison of sort()), then
// merged into disjoint ranges (entries may repeat or overlap: a
// NOKPROBE_SYMBOL function in noinstr text is listed twice). It records
// "kprobe_blacklist.index.bytes". Module entries stay on the list and are
// walked after the search. Switch off: nothing; allocation fault: nothing,
// nil returned, the walk stays linear. Only the first call acts.
func (l *List) LateInit(c *sim.Counters) error {
	if l.idx.Ran() {
		return nil // an initcall runs once
	}
	// The vmlinux entries: the list's head, before the first module's.
	for l.covered < len(l.entries) && l.entries[l.covered].Module == nil {
		l.covered++
	}
	return l.idx.LateInit(c, lib.Build[Entry]{
		Switches: l.sw, Faults: l.f,
		N:     l.covered,
		Entry: func(i int) Entry { return l.entries[i] },
		Finish: func(sorted []Entry) ([]Entry, error) {
			return mergeRanges(sorted), nil
		},
	})
}

// mergeRanges merges ranges sorted by start into disjoint ones; an empty
// range never matches and goes.
func mergeRanges(sorted []Entry) []Entry {
	var out []Entry
	for _, e := range sorted {
		if e.End <= e.Start {
			continue
		}
		if k := len(out); k > 0 && e.Start <= out[k-1].End {
			out[k-1].End = max(out[k-1].End, e.End)
			continue
		}
		out = append(out, Entry{Start: e.Start, End: e.End})
	}
	return out
}

// Index returns the late-init index, or why there is none (ErrNotLateInit,
// ErrIndexOff, ErrIndexAlloc).
func (l *List) Index() (*Index, error) {
	x, err := l.idx.Get()
	if err != nil {
		return nil, err
	}
	return &Index{x, l.covered}, nil
}

// Indexed reports whether the check currently uses the index.
func (l *List) Indexed() bool { return l.idx.Built() != nil }
