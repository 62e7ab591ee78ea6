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
	IndexPointer = lib.IndexPointer // struct bug_entry * array (the default)
	IndexOffset  = lib.IndexOffset  // u32 positions in __bug_table
)

// Errors a caller can test with errors.Is (each also matches lib's shared
// reason: lib.ErrNotLateInit, lib.ErrIndexOff, lib.ErrIndexAlloc,
// lib.ErrBadTable).
var (
	ErrNotLateInit = lib.TableError(lib.ErrNotLateInit, "bug: index asked for before late init (find_bug is linear until then)")
	ErrIndexOff    = lib.TableError(lib.ErrIndexOff, "bug: no index: the bug-index switch is off")
	ErrIndexAlloc  = lib.TableError(lib.ErrIndexAlloc, "bug: no index: its late-init allocation failed (fault bug.index.alloc)")
	ErrBadTable    = lib.TableError(lib.ErrBadTable, "bug: malformed bug table")
)

// indexSpec is the bug-index's place in the generic late-init index.
var indexSpec = lib.IndexSpec{
	Name: "bug", TableBytes: "bug.table.bytes",
	Switch: sim.BugIndex, Fault: FaultIndexAlloc,
	Fill: OpIndexFill, SortCmp: OpIndexSortCmp, Probe: OpIndexProbe,
	NotLateInit: ErrNotLateInit, Off: ErrIndexOff, Alloc: ErrIndexAlloc,
}

func bugAddr(b *image.BugEntry) uint64 { return b.Addr }

// Finder is the one interface through which the registration pipeline
// asks for the bug entry at an address, whatever form is active.
type Finder interface {
	FindBug(c *sim.Counters, addr uint64) *image.BugEntry
}

var _ Finder = (*Table)(nil)

// EntryBytes returns sizeof(struct bug_entry) on x86-64
// (GENERIC_BUG_RELATIVE_POINTERS) of the image's generation
// (image.BugEntryLayoutFor): 6.1 and 6.12 12 with CONFIG_DEBUG_BUGVERBOSE
// (bug_addr_disp, file_disp, line, flags), 8 without; 7.3 adds a
// format_disp (HAVE_ARCH_BUG_FORMAT): 16 and 12.
func EntryBytes(cfg image.Config) int {
	return image.BugEntryLayoutFor(cfg.Gen, cfg.BugVerbose).Size
}

// Table models the kernel's bug tables as find_bug sees them.
// Not safe for concurrent use.
type Table struct {
	k  *image.Kernel
	sw sim.Switches
	f  *sim.Faults

	idx  lib.LateIndex[*image.BugEntry] // bug-index, built by LateInit
	scan tableScanner                   // the table walk, or its fast scan (EnableFastScan)

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
	t := &Table{k: k, sw: sw, f: f, scan: tableWalk{}}
	t.idx = lib.NewLateIndex(&indexSpec, bugAddr, IndexPointer)
	return t, nil
}

// tableScanner answers the linear walk of one bug table: the walk itself
// (tableWalk), or the simulator's fast scan with the walk's counts
// (fastscan.go), chosen once by EnableFastScan.
type tableScanner interface {
	scanTable(c *sim.Counters, es []image.BugEntry, addr uint64) *image.BugEntry
}

// tableWalk compares every entry of a table with addr in table order
// (OpScanEntry each), the first equal one returned: the loops of find_bug
// and module_find_bug.
type tableWalk struct{}

func (tableWalk) scanTable(c *sim.Counters, es []image.BugEntry, addr uint64) *image.BugEntry {
	for i := range es {
		c.Inc(OpScanEntry)
		if es[i].Addr == addr {
			return &es[i]
		}
	}
	return nil
}

// SetIndexEntryBytes chooses the index layout charged by LateInit:
// IndexPointer (8, default) or IndexOffset (4). Call it before LateInit.
func (t *Table) SetIndexEntryBytes(n int) error { return t.idx.SetEntryBytes(n) }

// FindBug returns the bug entry whose trapping instruction is at addr, or
// nil: the core table (linear walk, OpScanEntry per entry, or the index
// once built), then module_find_bug.
//
// Models lib/bug.c:find_bug.
func (t *Table) FindBug(c *sim.Counters, addr uint64) *image.BugEntry {
	if t.idx.Built() != nil {
		if b := t.findBugIndexed(c, addr); b != nil {
			return b
		}
	} else if b := t.scan.scanTable(c, t.k.BugEntries, addr); b != nil {
		return b
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
	for m := len(t.k.Modules) - 1; m >= 0; m-- {
		mod := t.k.Modules[m]
		c.Inc(OpModuleVisit)
		if x := t.mods[mod]; x != nil {
			if b := x.find(c, addr); b != nil {
				return b
			}
			continue
		}
		if b := t.scan.scanTable(c, mod.BugEntries, addr); b != nil {
			return b
		}
	}
	return nil
}

// Index is the bug-index: the core bug entries sorted by address.
type Index struct {
	*lib.SortedIndex[*image.BugEntry]
}

// LateInit builds the bug index at late init when sim.BugIndex is on
// (OpIndexFill per entry, OpIndexSortCmp per sort comparison) and records
// "bug.index.bytes" and "bug.index.bytes_per_entry"; it also records the
// core table's own size as "bug.table.bytes". With the switch off it does
// nothing; when the allocation fault fires it builds nothing and returns
// nil. Two core entries at one address (one ud2 is one entry) are an error
// wrapping ErrBadTable. Only the first call acts.
func (t *Table) LateInit(c *sim.Counters) error {
	es := t.k.BugEntries
	return t.idx.LateInit(c, lib.Build[*image.BugEntry]{
		Switches: t.sw, Faults: t.f,
		TableBytes: int64(len(es) * EntryBytes(t.k.Config)),
		N:          len(es),
		Entry:      func(i int) *image.BugEntry { return &es[i] },
		Finish:     checkOnePerAddr,
	})
}

// checkOnePerAddr: no two entries, in address order, share an address.
func checkOnePerAddr(sorted []*image.BugEntry) ([]*image.BugEntry, error) {
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Addr == sorted[i-1].Addr {
			return nil, fmt.Errorf("%w: two core bug entries at %#x", ErrBadTable, sorted[i].Addr)
		}
	}
	return sorted, nil
}

// Index returns the late-init index, or why there is none (ErrNotLateInit,
// ErrIndexOff, ErrIndexAlloc, or the ErrBadTable LateInit returned).
func (t *Table) Index() (*Index, error) {
	x, err := t.idx.Get()
	if err != nil {
		return nil, err
	}
	return &Index{x}, nil
}

// Indexed reports whether FindBug currently uses the index.
func (t *Table) Indexed() bool { return t.idx.Built() != nil }

// findBugIndexed: binary search for the first entry with address >= addr
// (OpIndexProbe per step), then one exact-match test of the entry found
// (OpIndexEntry).
//
// Models the core part of lib/bug.c:find_bug with kpsim's bug-index
// (beyond the series).
func (t *Table) findBugIndexed(c *sim.Counters, addr uint64) *image.BugEntry {
	x := t.idx.Built().Sorted
	lo := t.idx.Seek(c, addr)
	if lo < len(x) {
		c.Inc(OpIndexEntry)
		if x[lo].Addr == addr {
			return x[lo]
		}
	}
	return nil
}
