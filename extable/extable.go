// Package extable models the kernel's exception-table search as kprobes
// reaches it (can_optimize, can_boost): kernel/extable.c:
// search_exception_tables → search_kernel_exception_table (bsearch of the
// core __ex_table, sorted at boot by sort_main_extable), then
// kernel/module/main.c:search_module_extables (__module_address, then a
// bsearch of that one module's table), then
// kernel/bpf/core.c:search_bpf_extables (modelled with no BPF program
// loaded: one empty latch-tree lookup). Debian 6.1.192.
package extable

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// EntryBytes is sizeof(struct exception_table_entry) on x86-64: s32 insn,
// s32 fixup, s32 data (relative: ex_to_insn adds the field's address).
const EntryBytes = 12

// Counted operations. Weights and their sources: weights.go.
var (
	OpSearch = sim.NewOp("extable.search", wSearch, rSearch,
		"one search_exception_tables call: the call chain and the empty-table checks, excluding the steps below")
	OpProbe = sim.NewOp("extable.bsearch.probe", wProbe, rProbe,
		"one bsearch step of lib/extable.c:search_extable: cmp_ex_search on one 12-byte relative exception_table_entry (core or module table)")
	OpBPFCheck = sim.NewOp("extable.bpf.check", wBPFCheck, rBPFCheck,
		"search_bpf_extables with no BPF program loaded: rcu_read_lock and bpf_prog_ksym_find's lookup in the empty bpf_tree")
)

// Extable is the modelled set of exception tables.
type Extable struct {
	core    []image.ExEntry
	modules []*module
	// mod_tree.addr_min / addr_max: __module_address rejects addresses
	// outside them before any tree walk.
	modMin, modMax uint64
}

type module struct {
	m       *image.Module
	table   []image.ExEntry // mod->extable .. + num_exentries (sorted; init entries trimmed once init is done)
	trimmed bool
}

// New builds the tables from k as the running kernel holds them: the core
// table sorted by insn (sort_main_extable), each module's sorted at load
// (post_relocation → sort_extable) and — for a module whose init text is
// gone (Init == nil) — trimmed of the init-text entries at either end
// (trim_init_extable). Unsorted input is sorted here, as sort_main_extable
// does at boot.
func New(k *image.Kernel) (*Extable, error) {
	e := &Extable{core: sortExtable(k.ExTable), modMin: ^uint64(0)}
	for _, m := range k.Modules {
		if err := e.LoadModule(m); err != nil {
			return nil, err
		}
		if m.Init == nil {
			e.trimInit(m, nil)
		}
	}
	return e, nil
}

// sortExtable models lib/extable.c:sort_extable (by insn address).
func sortExtable(t []image.ExEntry) []image.ExEntry {
	out := slices.Clone(t)
	slices.SortStableFunc(out, func(a, b image.ExEntry) int { return cmp.Compare(a.Insn, b.Insn) })
	return out
}

// LoadModule models the extable part of loading m: post_relocation sorts
// its table, mod_tree_insert widens mod_tree's bounds.
func (e *Extable) LoadModule(m *image.Module) error {
	for _, x := range e.modules {
		if x.m.Name == m.Name {
			return fmt.Errorf("extable: module %s already loaded", m.Name)
		}
	}
	e.modules = append(e.modules, &module{m: m, table: sortExtable(m.ExTable)})
	for _, r := range []*image.Region{m.Text, m.Init} {
		if r != nil && len(r.Bytes) > 0 {
			e.modMin = min(e.modMin, r.Start)
			e.modMax = max(e.modMax, r.End()-1)
		}
	}
	return nil
}

// FreeModuleInit models kernel/module/main.c:trim_init_extable, run by
// do_init_module once the module's init is done: entries whose insn lies
// in the init text are dropped from the start and the end of the sorted
// table (ones in the middle stay). init is the init region being freed
// (m.Init before it is cleared).
func (e *Extable) FreeModuleInit(m *image.Module, init *image.Region) {
	e.trimInit(m, init)
}

func (e *Extable) trimInit(m *image.Module, init *image.Region) {
	var x *module
	for _, mm := range e.modules {
		if mm.m == m {
			x = mm
		}
	}
	if x == nil || x.trimmed {
		return
	}
	x.trimmed = true
	inInit := func(a uint64) bool {
		if init != nil {
			return init.Contains(a)
		}
		// Init already gone from the image: everything outside core text.
		return m.Text == nil || !m.Text.Contains(a)
	}
	t := x.table
	for len(t) > 0 && inInit(t[0].Insn) {
		t = t[1:]
	}
	for len(t) > 0 && inInit(t[len(t)-1].Insn) {
		t = t[:len(t)-1]
	}
	x.table = t
}

// Core returns the core table in its run-time (sorted) order.
func (e *Extable) Core() []image.ExEntry { return e.core }

// ModuleTable returns module name's table as searched, or nil.
func (e *Extable) ModuleTable(name string) []image.ExEntry {
	for _, x := range e.modules {
		if x.m.Name == name {
			return x.table
		}
	}
	return nil
}

// Bytes returns the tables' footprint (12 bytes an entry).
func (e *Extable) Bytes() int64 {
	n := int64(len(e.core))
	for _, x := range e.modules {
		n += int64(len(x.table))
	}
	return n * EntryBytes
}

// searchExtable models lib/extable.c:search_extable: bsearch
// (lib/bsearch.c:__inline_bsearch) with cmp_ex_search.
func searchExtable(c *sim.Counters, t []image.ExEntry, addr uint64) *image.ExEntry {
	base, num := 0, len(t)
	var probes uint64 // added once (this runs for every instruction can_optimize walks)
	defer func() { c.Add(OpProbe, probes) }()
	for num > 0 {
		pivot := base + num>>1
		probes++
		insn := t[pivot].Insn
		if addr == insn {
			return &t[pivot]
		}
		if addr > insn {
			base = pivot + 1
			num--
		}
		num >>= 1
	}
	return nil
}

// SearchKernel models kernel/extable.c:search_kernel_exception_table.
func (e *Extable) SearchKernel(c *sim.Counters, addr uint64) *image.ExEntry {
	return searchExtable(c, e.core, addr)
}

// moduleAddress models kernel/module/main.c:__module_address: outside
// [mod_tree.addr_min, addr_max] → NULL at once; else one mod_tree lookup
// (counted as kallsyms.OpModLookup, the op of that lookup); an UNFORMED
// module is not returned.
func (e *Extable) moduleAddress(c *sim.Counters, addr uint64) *module {
	if len(e.modules) == 0 || addr < e.modMin || addr > e.modMax {
		return nil
	}
	c.Inc(kallsyms.OpModLookup)
	for _, x := range e.modules {
		if x.m.Contains(addr) {
			if x.m.State == image.ModuleUnformed {
				return nil
			}
			return x
		}
	}
	return nil
}

// SearchModule models kernel/module/main.c:search_module_extables: only
// the module holding addr (__module_address) is searched, and only if it
// has entries.
func (e *Extable) SearchModule(c *sim.Counters, addr uint64) *image.ExEntry {
	x := e.moduleAddress(c, addr)
	if x == nil || len(x.table) == 0 {
		return nil
	}
	return searchExtable(c, x.table, addr)
}

// SearchBPF models kernel/bpf/core.c:search_bpf_extables with no BPF
// program loaded: bpf_prog_ksym_find finds nothing.
func (e *Extable) SearchBPF(c *sim.Counters, addr uint64) *image.ExEntry {
	c.Inc(OpBPFCheck)
	return nil
}

// Search models kernel/extable.c:search_exception_tables: the core table,
// then the owning module's, then the BPF programs'; the first hit wins.
func (e *Extable) Search(c *sim.Counters, addr uint64) *image.ExEntry {
	c.Inc(OpSearch)
	if x := e.SearchKernel(c, addr); x != nil {
		return x
	}
	if x := e.SearchModule(c, addr); x != nil {
		return x
	}
	return e.SearchBPF(c, addr)
}
