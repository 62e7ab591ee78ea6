package bug

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// The module-bug-index (sim.ModuleBugIndex, beyond the series): the
// bug-index leaves module_find_bug's walk over every module's whole table,
// which is what find_bug costs on a host with modules once the core table
// is indexed (kpsim's Debian 6.1 KVM-host list: 130 modules, 3,727 module
// bug entries against 7,743 in vmlinux). The proposal: module_bug_finalize,
// which already runs at every module load, also builds a sorted array of
// pointers to the module's entries; module_find_bug keeps walking
// module_bug_list (newest first, so a tie between modules resolves as
// before) but per module tests the address against the index's first and
// last entry and binary-searches only when it is inside. The two bounds are
// kept in struct module beside bug_table and num_bugs, on the line the
// list step loads anyway, so the range test is two compares, not two
// loads through the index. A module whose
// index allocation failed keeps the linear scan of its table. Entries at
// one address keep their table order (ties sorted by position), so the
// entry returned is the one the linear scan returns.

// FaultModuleIndexAlloc makes module_bug_finalize's index allocation fail;
// that module's table stays linear.
var FaultModuleIndexAlloc = sim.NewFaultPoint("bug.module_index.alloc",
	"module_bug_finalize's allocation of a module's bug-table index (module-bug-index) fails: that module's table stays linear")

var (
	// OpModIndexRange is one module's [first, last] range test.
	OpModIndexRange = sim.NewOp("bug.module_index.range", 2,
		"two compares against struct module fields on the line the module_bug_list step (bug.module.visit) already loaded: no memory access of its own",
		"module-bug-index: the test of addr against a module's lowest and highest bug address (kept in struct module)")
	// OpModIndexProbe is one binary-search step over a module's index.
	OpModIndexProbe = sim.NewOp("bug.module_index.probe", indexProbeNs*ghz,
		"BenchmarkCostIndexProbe: binary search over pointers into a bug table, 1.27 ns/step at 2.6 GHz",
		"one binary-search step over a module's bug index")
	// OpModIndexEntry is the exact-match test of the entry found.
	OpModIndexEntry = sim.NewOp("bug.module_index.entry", indexProbeNs*ghz,
		"same access as a search step: BenchmarkCostIndexProbe, 1.27 ns at 2.6 GHz",
		"the exact-match test of the entry a module's bug-index search lands on")
	// OpModIndexFill is one slot filled at module load.
	OpModIndexFill = sim.NewOp("bug.module_index.fill", scanEntryNs*ghz,
		"sequential read of the module's bug table and store: the streaming pattern of BenchmarkCostScanEntry, 0.93 ns at 2.6 GHz",
		"one module bug entry stored into its module's index at module_bug_finalize")
	// OpModIndexSortCmp is one comparison of the module-load sort.
	OpModIndexSortCmp = sim.NewOp("bug.module_index.sort.cmp", indexProbeNs*ghz,
		"heapsort compare through two slots: BenchmarkCostIndexProbe, 1.27 ns at 2.6 GHz",
		"one comparison (and its swap) of sort() ordering a module's bug index by (address, table position)")
)

// modBoundsBytes is the two unsigned longs the index adds to struct module.
const modBoundsBytes = 16

// modIndex is one module's bug entries sorted by address (ties: table order).
type modIndex struct {
	sorted []*image.BugEntry
	lo, hi uint64 // lowest and highest bug address, kept in struct module
}

// FinalizeModules runs ModuleBugFinalize for every module already in the
// image, oldest first (their load order).
func (t *Table) FinalizeModules(c *sim.Counters) {
	for _, m := range t.k.Modules {
		t.ModuleBugFinalize(c, m)
	}
}

// ModuleBugFinalize builds module m's index when sim.ModuleBugIndex is on
// (OpModIndexFill per entry, OpModIndexSortCmp per comparison of the
// kernel's sort()) and adds its size (a pointer per entry plus the two
// bounds in struct module) to "bug.module_index.bytes". Switch
// off or allocation fault: nothing, the module's table is scanned. The
// module is on module_bug_list either way (the image's module list).
//
// Models lib/bug.c:module_bug_finalize with kpsim's module-bug-index.
func (t *Table) ModuleBugFinalize(c *sim.Counters, m *image.Module) {
	if !t.sw.Has(sim.ModuleBugIndex) || len(m.BugEntries) == 0 {
		return
	}
	if t.f.Fail(FaultModuleIndexAlloc) {
		return
	}
	pos := make([]int, len(m.BugEntries))
	for i := range pos {
		c.Inc(OpModIndexFill)
		pos[i] = i
	}
	e := m.BugEntries
	lib.KernelSort(len(pos), func(a, b int) int {
		c.Inc(OpModIndexSortCmp)
		x, y := &e[pos[a]], &e[pos[b]]
		switch {
		case x.Addr < y.Addr:
			return -1
		case x.Addr > y.Addr:
			return 1
		}
		return pos[a] - pos[b]
	}, func(a, b int) { pos[a], pos[b] = pos[b], pos[a] })
	x := &modIndex{sorted: make([]*image.BugEntry, len(pos))}
	for i, p := range pos {
		x.sorted[i] = &e[p]
	}
	x.lo, x.hi = x.sorted[0].Addr, x.sorted[len(pos)-1].Addr
	if t.mods == nil {
		t.mods = map[*image.Module]*modIndex{}
	}
	t.mods[m] = x
	t.modBytes += int64(len(x.sorted)*t.idx.EntryBytes()) + modBoundsBytes
	c.SetBytes("bug.module_index.bytes", t.modBytes)
}

// ModuleIndexed reports whether module m's table is searched through its index.
func (t *Table) ModuleIndexed(m *image.Module) bool { return t.mods[m] != nil }

// find searches one module's index: range test, then the first entry at
// or above addr and its exact-match test.
func (x *modIndex) find(c *sim.Counters, addr uint64) *image.BugEntry {
	s := x.sorted
	c.Inc(OpModIndexRange)
	if addr < x.lo || addr > x.hi {
		return nil
	}
	lo := lib.LowerBound(len(s), func(i int) uint64 { return s[i].Addr }, addr, func() { c.Inc(OpModIndexProbe) })
	if lo < len(s) {
		c.Inc(OpModIndexEntry)
		if s[lo].Addr == addr {
			return s[lo]
		}
	}
	return nil
}
