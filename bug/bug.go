// Package bug models lib/bug.c:find_bug, the bug-table lookup that
// kernel/kprobes.c:check_kprobe_address_safe runs for every probe, in its
// upstream form (a linear walk of the core __bug_table, then of every
// loaded module's table on module_bug_list, newest module first) and, behind
// the beyond-the-series switch sim.BugIndex, with a late-init address index
// of the core table (the series' cover letter names the bug-entry lookup as
// the next "low hanging fruit"). Module tables stay linear under it; the
// second beyond-the-series switch sim.ModuleBugIndex gives each module an
// index built at module load (modindex.go).
//
// Upstream code read from Debian's linux-source-6.1 (6.1.192); the index is
// kpsim's own proposal, modelled like P1/P2.
package bug

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// FaultIndexAlloc makes the late-init allocation of the bug index fail;
// find_bug then stays linear.
var FaultIndexAlloc = sim.NewFaultPoint("bug.index.alloc",
	"late-init allocation of the bug-table address index (bug-index) fails: find_bug stays linear")

// Index entry layouts (bytes per indexed entry); counts are the same.
const (
	IndexPointer = 8 // struct bug_entry * array (the default)
	IndexOffset  = 4 // u32 positions in __bug_table
)

// Errors a caller can test with errors.Is.
var (
	ErrNotLateInit = errors.New("bug: index asked for before late init (find_bug is linear until then)")
	ErrIndexOff    = errors.New("bug: no index: the bug-index switch is off")
	ErrIndexAlloc  = errors.New("bug: no index: its late-init allocation failed (fault bug.index.alloc)")
	ErrBadTable    = errors.New("bug: malformed bug table")
)

// Finder is the one interface through which the registration pipeline
// asks for the bug entry at an address, whatever form is active.
type Finder interface {
	FindBug(c *sim.Counters, addr uint64) *image.BugEntry
}

var _ Finder = (*Table)(nil)

// EntryBytes returns sizeof(struct bug_entry) on x86-64
// (GENERIC_BUG_RELATIVE_POINTERS): 12 with CONFIG_DEBUG_BUGVERBOSE
// (bug_addr_disp, file_disp, line, flags), 8 without.
func EntryBytes(cfg image.Config) int {
	if cfg.BugVerbose {
		return 12
	}
	return 8
}

// Table models the kernel's bug tables as find_bug sees them.
// Not safe for concurrent use.
type Table struct {
	k  *image.Kernel
	sw sim.Switches
	f  *sim.Faults

	entryBytes int
	lateInit   bool
	idx        *Index
	idxErr     error
	fast       *fastScan // simulator fast path (EnableFastScan); nil: walk

	mods     map[*image.Module]*modIndex // module-bug-index (modindex.go)
	modBytes int64
}

// New returns the find_bug model of image k under switches sw; faults f
// (nil: none) may make the index allocation fail. find_bug has no
// boot-state rule, so unlike the reservation checks it takes no state.
// Every module in k.Modules is on module_bug_list (module_bug_finalize
// runs before MODULE_STATE_COMING and the entry goes at free time).
func New(k *image.Kernel, sw sim.Switches, f *sim.Faults) (*Table, error) {
	if k == nil {
		return nil, errors.New("bug: nil kernel image")
	}
	return &Table{k: k, sw: sw, f: f, entryBytes: IndexPointer}, nil
}

// SetIndexEntryBytes chooses the index layout charged by LateInit:
// IndexPointer (8, default) or IndexOffset (4). Call it before LateInit.
func (t *Table) SetIndexEntryBytes(n int) error {
	if n != IndexPointer && n != IndexOffset {
		return fmt.Errorf("bug: index entry size %d: want %d (pointer) or %d (u32 offset)", n, IndexPointer, IndexOffset)
	}
	if t.lateInit {
		return errors.New("bug: index layout must be chosen before late init")
	}
	t.entryBytes = n
	return nil
}

// FindBug returns the bug entry whose trapping instruction is at addr, or
// nil: the core table (linear walk, OpScanEntry per entry, or the index
// once built), then module_find_bug.
//
// Models lib/bug.c:find_bug.
func (t *Table) FindBug(c *sim.Counters, addr uint64) *image.BugEntry {
	if t.fast != nil && t.idx == nil && t.mods == nil && t.fast.miss(c, addr, true) {
		return nil
	}
	if t.idx != nil {
		if b := t.findBugIndexed(c, addr); b != nil {
			return b
		}
	} else if t.fast != nil && !t.fast.has(addr) {
		c.Add(OpScanEntry, t.fast.core)
	} else {
		for i := range t.k.BugEntries {
			c.Inc(OpScanEntry)
			if t.k.BugEntries[i].Addr == addr {
				return &t.k.BugEntries[i]
			}
		}
	}
	return t.moduleFindBug(c, addr)
}

// moduleFindBug walks module_bug_list, newest module first (list_add_rcu
// at the head in module_bug_finalize), and each module's whole table; it
// does not first look for the module owning addr. One OpModuleVisit per
// module, one OpScanEntry per entry. Under sim.ModuleBugIndex a module
// with an index is searched through it instead (modindex.go).
//
// Models lib/bug.c:module_find_bug.
func (t *Table) moduleFindBug(c *sim.Counters, addr uint64) *image.BugEntry {
	if t.fast != nil && t.mods == nil && t.fast.miss(c, addr, false) {
		return nil
	}
	for m := len(t.k.Modules) - 1; m >= 0; m-- {
		mod := t.k.Modules[m]
		c.Inc(OpModuleVisit)
		if x := t.mods[mod]; x != nil {
			if b := x.find(c, addr); b != nil {
				return b
			}
			continue
		}
		if t.fast != nil && !t.fast.has(addr) {
			c.Add(OpScanEntry, uint64(len(mod.BugEntries)))
			continue
		}
		for i := range mod.BugEntries {
			c.Inc(OpScanEntry)
			if mod.BugEntries[i].Addr == addr {
				return &mod.BugEntries[i]
			}
		}
	}
	return nil
}

// Index is the bug-index: the core bug entries sorted by address.
type Index struct {
	lib.SortedIndex[*image.BugEntry]
}

// LateInit builds the bug index at late init when sim.BugIndex is on
// (OpIndexFill per entry, OpIndexSortCmp per sort comparison) and records
// "bug.index.bytes" and "bug.index.bytes_per_entry"; it also records the
// core table's own size as "bug.table.bytes". With the switch off it does
// nothing; when the allocation fault fires it builds nothing and returns
// nil. Two core entries at one address (one ud2 is one entry) are an error
// wrapping ErrBadTable. Only the first call acts.
func (t *Table) LateInit(c *sim.Counters) error {
	if t.lateInit {
		return nil
	}
	t.lateInit = true
	c.SetBytes("bug.table.bytes", int64(len(t.k.BugEntries)*EntryBytes(t.k.Config)))
	if !t.sw.Has(sim.BugIndex) {
		t.idxErr = ErrIndexOff
		return nil
	}
	if t.f.Fail(FaultIndexAlloc) {
		t.idxErr = ErrIndexAlloc
		return nil
	}
	sorted := make([]*image.BugEntry, len(t.k.BugEntries))
	for i := range t.k.BugEntries {
		c.Inc(OpIndexFill)
		sorted[i] = &t.k.BugEntries[i]
	}
	lib.SortByKey(sorted, func(b **image.BugEntry) uint64 { return (*b).Addr }, func() { c.Inc(OpIndexSortCmp) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Addr == sorted[i-1].Addr {
			t.idxErr = fmt.Errorf("%w: two core bug entries at %#x", ErrBadTable, sorted[i].Addr)
			return t.idxErr
		}
	}
	t.idx = &Index{lib.NewSortedIndex(sorted, t.entryBytes)}
	perEntry := int64(t.entryBytes)
	if t.sw.Has(sim.ReservationBtree) {
		// reservation-btree: the same keys in a maple-like B-tree.
		t.idx.UseTree(func(b *image.BugEntry) uint64 { return b.Addr }, c)
		perEntry = t.idx.Bytes() / int64(max(1, t.idx.Len()))
	}
	c.SetBytes("bug.index.bytes", t.idx.Bytes())
	c.SetBytes("bug.index.bytes_per_entry", perEntry)
	return nil
}

// Index returns the late-init index, or why there is none (ErrNotLateInit,
// ErrIndexOff, ErrIndexAlloc, or the ErrBadTable LateInit returned).
func (t *Table) Index() (*Index, error) {
	if !t.lateInit {
		return nil, ErrNotLateInit
	}
	if t.idx == nil {
		return nil, t.idxErr
	}
	return t.idx, nil
}

// Indexed reports whether FindBug currently uses the index.
func (t *Table) Indexed() bool { return t.idx != nil }

// findBugIndexed: binary search for the first entry with address >= addr
// (OpIndexProbe per step), then one exact-match test of the entry found
// (OpIndexEntry).
//
// Models the core part of lib/bug.c:find_bug with kpsim's bug-index
// (beyond the series).
func (t *Table) findBugIndexed(c *sim.Counters, addr uint64) *image.BugEntry {
	x := t.idx.Sorted
	lo := t.idx.Seek(addr, func(b *image.BugEntry) uint64 { return b.Addr }, func() { c.Inc(OpIndexProbe) }, c)
	if lo < len(x) {
		c.Inc(OpIndexEntry)
		if x[lo].Addr == addr {
			return x[lo]
		}
	}
	return nil
}
