package module

import (
	"fmt"
	"iter"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// Fault points of load_module (kernel/module/main.c, 6.1.192) and of the
// MODULE_STATE_COMING notifiers that allocate. Every one of them fails the
// load with -ENOMEM and leaves the image as it was, except the ftrace one,
// whose error ftrace_module_init ignores (see ftrace.FaultPagesAlloc).
var (
	FaultELFCopy = sim.NewFaultPoint("module.elf.alloc",
		"copy_module_from_user: __vmalloc of the whole .ko fails (-ENOMEM before anything is laid out)")
	FaultCoreAlloc = sim.NewFaultPoint("module.core.alloc",
		"move_module: module_alloc of the core layout fails (-ENOMEM)")
	FaultInitAlloc = sim.NewFaultPoint("module.init.alloc",
		"move_module: module_alloc of the init layout fails (-ENOMEM; module_memfree frees the core block)")
	FaultPercpuAlloc = sim.NewFaultPoint("module.percpu.alloc",
		"percpu_modalloc: __alloc_reserved_percpu of .data..percpu fails (-ENOMEM; goto unlink_mod frees both blocks)")
	FaultJumpLabelMod = sim.NewFaultPoint("module.jump_label.alloc",
		"jump_label_add_module: kzalloc of a static_key_mod (jlm, or jlm2 for a key not yet linked) fails: jump_label_del_module, the COMING notifier returns -ENOMEM and the load fails")
	FaultStaticCallMod = sim.NewFaultPoint("module.static_call.alloc",
		"static_call_add_module → __static_call_init: kzalloc of a static_call_mod fails: static_call_del_module, the COMING notifier returns -ENOMEM and the load fails")
)

// ErrNoMem wraps errno.ENOMEM with the step that failed; errors.Is(err,
// errno.ENOMEM) holds for every injected load failure.
func (o *object) enomem(step string) error {
	return fmt.Errorf("%s: %s: %w", o.path, step, errno.ENOMEM)
}

// jumpLabelAddModule models the allocations of
// kernel/jump_label.c:jump_label_add_module on m's sorted entries: per run of one key (the
// table is sorted by key, jump_label_sort_entries), a key inside the module
// needs nothing (static_key_set_entries); a key outside it kzallocs a
// static_key_mod (jlm), and a second one (jlm2) when the key is not linked
// yet (static_key_linked: no other loaded module uses it). On a failure
// jump_label_del_module undoes the keys already linked; the caller fails
// the load. linked holds the keys outside their home that loaded modules
// use; it is updated only when the whole module succeeded, which is what
// jump_label_del_module's unlinking leaves behind.
func (l *Loader) jumpLabelAddModule(o *object, lm *Loaded) error {
	var add []uint64
	for key := range keyRuns(lm.Module.JumpEntries, func(e image.JumpEntry) uint64 { return e.Key }) {
		if withinModule(lm, key) {
			continue
		}
		if l.opt.Faults.Fail(FaultJumpLabelMod) {
			return o.enomem("jump_label_add_module: kzalloc(static_key_mod)")
		}
		if !l.jlLinked[key] {
			if l.opt.Faults.Fail(FaultJumpLabelMod) {
				return o.enomem("jump_label_add_module: kzalloc(static_key_mod) for the key's first module user")
			}
			add = append(add, key)
		}
	}
	for _, k := range add {
		l.jlLinked[k] = true
	}
	return nil
}

// staticCallAddModule models the allocations of
// kernel/static_call_inline.c:__static_call_init for a module: per run of
// one key (sorted, static_call_sort_entries) a static_call_mod is
// kzalloc'ed, and a second one when the key still holds its vmlinux sites
// directly (static_call_key_sites: a vmlinux key with sites no module has
// converted to a mods list yet). A failure is -ENOMEM after
// static_call_del_module; the load fails.
func (l *Loader) staticCallAddModule(o *object, lm *Loaded) error {
	var conv []uint64
	for key := range keyRuns(lm.Module.StaticCallSites, func(s image.StaticCallSite) uint64 { return s.Key }) {
		if l.opt.Faults.Fail(FaultStaticCallMod) {
			return o.enomem("__static_call_init: kzalloc(static_call_mod)")
		}
		if l.scVmlinuxKey(key) && !l.scConverted[key] {
			if l.opt.Faults.Fail(FaultStaticCallMod) {
				return o.enomem("__static_call_init: kzalloc(static_call_mod) converting the key's vmlinux sites")
			}
			conv = append(conv, key)
		}
	}
	for _, k := range conv {
		l.scConverted[k] = true
	}
	return nil
}

// keyRuns yields the key of each run of entries with one key, in table
// order: the walk both COMING notifiers make over a table sorted by key.
func keyRuns[E any](entries []E, key func(E) uint64) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for i, e := range entries {
			k := key(e)
			if i > 0 && key(entries[i-1]) == k {
				continue
			}
			if !yield(k) {
				return
			}
		}
	}
}

// scVmlinuxKey: a key with call sites in vmlinux (static_call_init stored
// them in key->sites, type bit 0 set).
func (l *Loader) scVmlinuxKey(key uint64) bool {
	if l.scCore == nil {
		l.scCore = map[uint64]bool{}
		for _, s := range l.k.StaticCallSites {
			l.scCore[s.Key] = true
		}
	}
	return l.scCore[key]
}

// withinModule models within_module(addr, mod): any of the module's
// blocks (6.1: core or init; 6.4+: any mod_mem_type).
func withinModule(lm *Loaded, addr uint64) bool { return lm.mem.block(addr) != nil }

// ftraceAllocFails is ftrace_process_locs' ftrace_allocate_pages for the
// module's count records: the one fault point the ftrace model shares.
func (l *Loader) ftraceAllocFails(n int) bool {
	return n > 0 && l.opt.Faults.Fail(ftrace.FaultPagesAlloc)
}
