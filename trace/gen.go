package trace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// genFacts is how the tracing front doors differ between the three kernel
// generations kpsim reads (6.1.192, 6.12.117, 7.3~rc7), chosen once, in
// New, from the image's generation. Every fact is named after the kernel
// behaviour and cites the C; the model functions that differ materially
// have a second form named after the kernel function (gen.go below), and
// the choice between them is made here, not in the model.
type genFacts struct {
	gen image.Generation

	// validateProbeSymbol: trace_kprobe.c:validate_probe_symbol (6.12.117,
	// 7.3). __trace_kprobe_create (6.12) / trace_kprobe_create_internal
	// (7.3) call it right after traceprobe_split_symbol_offset, before
	// kprobe_on_func_entry, and a failure is "goto parse_error" (6.12) /
	// "return -EINVAL" (7.3): -EINVAL for both a duplicate and a missing
	// name. It also validates MOD:SYM when MOD is loaded. 6.1.192 runs
	// number_of_same_symbols after kprobe_on_func_entry, only for a name
	// without ':', and keeps its -EADDRNOTAVAIL / -ENOENT ("goto error").
	// create_local_trace_kprobe (perf) calls it too, keeping the errno.
	validateProbeSymbol bool
	// sameSymbols is number_of_same_symbols(mod, name) of 6.12.117 or 7.3
	// (numberOfSameSymbols612, numberOfSameSymbols73); nil on 6.1, whose
	// number_of_same_symbols(name) is numberOfSameSymbols.
	sameSymbols func(t *Tracing, mod, name string) int

	// tooManyArgsE2BIG: __trace_kprobe_create (6.12.117) /
	// trace_kprobe_create_internal (7.3): "if (argc > MAX_TRACE_ARGS)
	// return -E2BIG" before alloc_trace_kprobe. 6.1.192's parse loop is
	// "i < argc && i < MAX_TRACE_ARGS": the arguments after the 128th are
	// ignored. tooManyArgsLogged: only 7.3 logs TOO_MANY_ARGS (6.12 jumps
	// to out without trace_probe_log_err).
	tooManyArgsE2BIG  bool
	tooManyArgsLogged bool
	// maxArgstrLen is MAX_ARGSTR_LEN (trace_probe.h: 63 in 6.1.192 and
	// 6.12.117, 255 in 7.3) and argTooLong the errno of
	// trace_probe.c:traceprobe_parse_probe_arg_body for a longer fetch
	// argument body (ARG_TOO_LONG): -EINVAL in 6.1, -E2BIG in 6.12 and 7.3.
	maxArgstrLen int
	argTooLong   errno.Errno

	// eventfs: trace_events.c:event_create_dir / event_subsystem_dir
	// (6.12.117, 7.3) make one eventfs_inode each through
	// fs/tracefs/event_inode.c:eventfs_create_dir (alloc_ei: kzalloc +
	// kstrdup_const of the name; the files are eventfs_entry callbacks,
	// created only on lookup), where 6.1.192 creates the tracefs directory
	// and every file at once (tracefs_create_dir, trace_create_file).
	eventfs bool
	// defineFieldsFirst: trace_events.c:event_create_dir (7.3) calls
	// event_define_fields before event_subsystem_dir and
	// eventfs_create_dir (6.1 and 6.12: after the event's directory).
	defineFieldsFirst bool
	// eiFreeCallbacks: the deferred callbacks that free a removed
	// eventfs_inode (event_inode.c:release_ei): 6.12.117 call_srcu
	// (free_ei_srcu) then call_rcu (free_ei_rcu): 2; 7.3 call_srcu
	// (free_ei_rcu): 1.
	eiFreeCallbacks int
	// eventEntries: the eventfs_entry array of trace_events.c:
	// event_create_dir with the Debian configs (HIST_TRIGGERS, PERF_EVENTS,
	// BPF_EVENTS on; HIST_TRIGGERS_DEBUG, TRACE_EVENT_INJECT off): enable,
	// filter, trigger, format, id, hist (6.12.117: 6), plus btf_ids (7.3:
	// 7). Only named in the trail: entries are created on lookup.
	eventEntries int

	// eventCreateDir is event_create_dir: eventCreateDir (6.1.192) or
	// eventCreateDir612 (6.12.117, 7.3); subsystemDirCreate,
	// subsystemDirRemove and eventDirRemove count a group's or an event's
	// directory made or removed (tracefs in 6.1, eventfs after).
	eventCreateDir     func(t *Tracing, ev *Event)
	subsystemDirCreate func(t *Tracing, group string)
	subsystemDirRemove func(t *Tracing)
	eventDirRemove     func(t *Tracing)

	// eventTypeIDA: trace_output.c:register_trace_event (6.12.117, 7.3)
	// takes a dynamic event's id from alloc_trace_event_type, an
	// ida_alloc_range(__TRACE_LAST_TYPE, TRACE_EVENT_TYPE_MAX): the lowest
	// free id, so a deleted event's id is reused at once, with no
	// ftrace_find_event check; __unregister_trace_event ida_free's it.
	// 6.1.192 hands out next_event_type++ (checked with ftrace_find_event)
	// and only past TRACE_EVENT_TYPE_MAX walks ftrace_event_list for a gap
	// (trace_search_list). registerTraceEvent is registerTraceEvent
	// (6.1.192) or registerTraceEvent612.
	eventTypeIDA       bool
	registerTraceEvent func(t *Tracing) int

	// createCbAllocs: trace_kprobe.c:trace_kprobe_create_cb (7.3) kzallocs
	// the traceprobe_parse_context before the p/r check (so also for a
	// command that ends in -ECANCELED), and trace_kprobe_create_internal
	// kmallocs gbuf (an event name given) or ebuf (none), abuf, and a
	// kmemdup of MAXACTIVE; 6.1.192 and 6.12.117 keep all on the stack.
	createCbAllocs bool
	// perfCopyFunc is trace_event_perf.c:perf_kprobe_init's copy of the
	// function name: perfKprobeInitFunc (6.1.192: kzalloc of KSYM_NAME_LEN
	// and strncpy_from_user) or perfKprobeInitFunc612 (6.12.117, 7.3:
	// strndup_user(func, KSYM_NAME_LEN), which allocates strlen+1 and
	// returns a too-long name as -E2BIG before allocating).
	perfCopyFunc func(t *Tracing, fn string) *probeErr
	// matchHeadBuf: trace_kprobe.c:trace_kprobe_match_command_head
	// (6.1.192, 6.12.117) snprintf's "SYM[+OFF]" into buf[MAX_ARGSTR_LEN +
	// 1] = 64 bytes and strcmp's it (so a head over 63 characters never
	// matches); 7.3 compares the symbol and the offset directly: 0.
	matchHeadBuf int
}

// genFactsFor returns the facts of generation g (GenUnknown: 6.1).
func genFactsFor(g image.Generation) genFacts {
	f := genFactsOf(g)
	f.registerTraceEvent = (*Tracing).registerTraceEvent
	if f.eventTypeIDA {
		f.registerTraceEvent = (*Tracing).registerTraceEvent612
	}
	if f.eventfs {
		f.eventCreateDir = (*Tracing).eventCreateDir612
		f.subsystemDirCreate = func(t *Tracing, group string) { t.eventfsCreateDir(group, 2) }
		f.subsystemDirRemove = (*Tracing).eventfsRemoveDir
		f.eventDirRemove = (*Tracing).eventfsRemoveDir
	} else {
		f.eventCreateDir = (*Tracing).eventCreateDir
		f.subsystemDirCreate = func(t *Tracing, _ string) { t.counters().Add(opDentry, filesPerGroup) }
		f.subsystemDirRemove = func(t *Tracing) { t.counters().Add(opDentryRm, filesPerGroup) }
		f.eventDirRemove = func(t *Tracing) { t.counters().Add(opDentryRm, filesPerEvent) }
	}
	return f
}

func genFactsOf(g image.Generation) genFacts {
	switch g.Effective() {
	case image.Gen612:
		return genFacts{
			gen:                 image.Gen612,
			validateProbeSymbol: true,
			sameSymbols:         (*Tracing).numberOfSameSymbols612,
			tooManyArgsE2BIG:    true,
			maxArgstrLen:        63,
			argTooLong:          errno.E2BIG,
			eventfs:             true,
			eiFreeCallbacks:     2,
			eventEntries:        6,
			eventTypeIDA:        true,
			perfCopyFunc:        (*Tracing).perfKprobeInitFunc612,
			matchHeadBuf:        64,
		}
	case image.Gen73:
		return genFacts{
			gen:                 image.Gen73,
			validateProbeSymbol: true,
			sameSymbols:         (*Tracing).numberOfSameSymbols73,
			tooManyArgsE2BIG:    true,
			tooManyArgsLogged:   true,
			maxArgstrLen:        255,
			argTooLong:          errno.E2BIG,
			eventfs:             true,
			defineFieldsFirst:   true,
			eiFreeCallbacks:     1,
			eventEntries:        7,
			eventTypeIDA:        true,
			createCbAllocs:      true,
			perfCopyFunc:        (*Tracing).perfKprobeInitFunc612,
		}
	}
	return genFacts{
		gen:          image.Gen61,
		maxArgstrLen: 63,
		argTooLong:   errno.EINVAL,
		perfCopyFunc: (*Tracing).perfKprobeInitFunc,
		matchHeadBuf: 64,
	}
}

// genOf is the image's generation (an absent image: 6.1).
func genOf(k *image.Kernel) image.Generation {
	if k == nil {
		return image.Gen61
	}
	return k.Config.Gen.Effective()
}

// since612 marks a reason or trail step that exists only in 6.12 and 7.3.
const since612 = "6.12+"

// Ops of the 6.12/7.3 paths (never counted on 6.1).
const (
	wEiCreate = 60
	rEiCreate = "eventfs_create_dir without its two allocations (counted as kmalloc): kref_init, two INIT_LIST_HEADs, an uncontended eventfs_mutex lock/unlock (~20 cycles each) and list_add_tail_rcu on L1-hot lines ≈ 60 cycles"
	wEiRemove = 80
	rEiRemove = "eventfs_remove_rec of one eventfs_inode: eventfs_mutex, list_del_rcu, smp_wmb, kref_put and release_ei's loop over the entries' release callbacks ≈ 80 cycles"
	wIDA      = 100
	rIDA      = "ida_alloc_range / ida_free: xa_lock, a one- or two-level xarray descent (L2 hits, ~14 cycles each) and a find_next_zero_bit / clear_bit in a 1024-bit leaf bitmap ≈ 100 cycles"
	wCallRCU  = 40
	rCallRCU  = "call_rcu / call_srcu: local_irq_save and rcu_segcblist_enqueue on this CPU's callback list ≈ 40 cycles (the grace period runs later, off the caller's path)"
)

var (
	opEiCreate = sim.NewOp("eventfs.create_dir", wEiCreate, rEiCreate, "one eventfs_inode created by eventfs_create_dir (6.12+: an event's or a new group's directory; no dentry, no inode)")
	opEiRemove = sim.NewOp("eventfs.remove_dir", wEiRemove, rEiRemove, "one eventfs_inode removed by eventfs_remove_dir (6.12+)")
	opIDA      = sim.NewOp("trace.event_type.ida", wIDA, rIDA, "one ida_alloc_range or ida_free of a trace event id (6.12+ register_trace_event, __unregister_trace_event)")
	opCallRCU  = sim.NewOp("rcu.call", wCallRCU, rCallRCU, "one deferred RCU or SRCU callback queued (6.12+ eventfs free_ei: call_srcu, and call_rcu in 6.12)")
)

// findModuleLive models kernel/trace/trace_kprobe.c:try_module_get_by_name
// (6.12.117, 7.3): find_module (the modules list, newest first, formed
// modules compared by name) and try_module_get, which fails for a module
// that is going away. nil: not loaded or going.
func (t *Tracing) findModuleLive(name string) *image.Module {
	c := t.counters()
	mods := t.d.Image.Modules
	for j := len(mods) - 1; j >= 0; j-- {
		m := mods[j]
		if m.State == image.ModuleUnformed {
			continue
		}
		c.Inc(opStrcmp)
		if m.Name == name {
			c.Inc(opConst) // try_module_get (and module_put after the check)
			if m.State == image.ModuleGoing {
				return nil
			}
			return m
		}
	}
	return nil
}

// moduleOnEachSymbolOf models kernel/module/kallsyms.c:
// module_kallsyms_on_each_symbol(modname, ...) (6.12.117, 7.3) with a
// module name: the modules list newest first, the formed ones compared by
// name, then only that module's symtab (each entry a module.kallsyms.sym,
// SHN_UNDEF skipped), and the walk stops after it.
func (t *Tracing) moduleOnEachSymbolOf(modname string, fn func(name string)) {
	c := t.counters()
	mods := t.d.Image.Modules
	for j := len(mods) - 1; j >= 0; j-- {
		m := mods[j]
		if m.State == image.ModuleUnformed {
			continue
		}
		c.Inc(opStrcmp)
		if m.Name != modname {
			continue
		}
		c.Add(kallsyms.OpModSym, uint64(len(m.Symbols)))
		for _, s := range m.Symbols {
			if s.Addr != 0 {
				fn(s.Name)
			}
		}
		return
	}
}

// numberOfSameSymbols612 models kernel/trace/trace_kprobe.c:
// number_of_same_symbols(mod, func_name) (6.12.117): without a module, the
// vmlinux matches (kallsyms_on_each_match_symbol) and then every module
// symbol; with one, only that module's symbols.
func (t *Tracing) numberOfSameSymbols612(mod, name string) int {
	if mod == "" {
		return t.numberOfSameSymbols(name)
	}
	return t.moduleSameSymbols(mod, name)
}

// numberOfSameSymbols73 models kernel/trace/trace_kprobe.c:
// number_of_same_symbols(mod, func_name) (7.3): "If the symbol is found in
// vmlinux, use vmlinux resolution only": without a module, a vmlinux count
// above 0 is returned before the modules are walked, so a module symbol no
// longer shadows a vmlinux one.
func (t *Tracing) numberOfSameSymbols73(mod, name string) int {
	if mod != "" {
		return t.moduleSameSymbols(mod, name)
	}
	c := t.counters()
	count := 0
	t.d.Syms.OnEachMatchSymbol(c, name, func(uint64) int { count++; return 0 })
	if count > 0 {
		return count
	}
	t.d.Syms.ModuleOnEachSymbol(c, func(s string, _ *image.Module, _ uint64) int {
		c.Inc(opStrcmp)
		if s == name {
			count++
		}
		return 0
	})
	return count
}

// moduleSameSymbols is number_of_same_symbols with a module name (6.12.117,
// 7.3): count_mod_symbols over that module's symtab only.
func (t *Tracing) moduleSameSymbols(mod, name string) int {
	c := t.counters()
	count := 0
	t.moduleOnEachSymbolOf(mod, func(s string) {
		c.Inc(opStrcmp)
		if s == name {
			count++
		}
	})
	return count
}

// validateProbeSymbol models kernel/trace/trace_kprobe.c:
// validate_probe_symbol → validate_module_probe_symbol (6.12.117, 7.3): for
// MOD:SYM, try_module_get_by_name(MOD); a module that is not loaded (or is
// going away) skips the check; otherwise number_of_same_symbols(MOD or
// NULL, SYM) must be 1: more is -EADDRNOTAVAIL, none -ENOENT. The caller
// decides what errno it returns (tracefs: -EINVAL; perf: this one).
func (t *Tracing) validateProbeSymbol(symbol, check string, back sim.Phase) *probeErr {
	if symbol == "" {
		return nil
	}
	c := t.counters()
	c.Enter(PhaseSymbols)
	defer c.Enter(back)
	mod, sym := "", symbol
	if i := strings.IndexByte(symbol, ':'); i >= 0 {
		mod, sym = symbol[:i], symbol[i+1:]
		if t.findModuleLive(mod) == nil {
			t.note("validate_probe_symbol", strconv.Quote(symbol), fmt.Sprintf("0: module %q not loaded: not checked (%s)", mod, since612))
			return nil
		}
	}
	n := t.g.sameSymbols(t, mod, sym)
	var walk string
	switch {
	case mod != "":
		walk = fmt.Sprintf("module %s's symbols only (%s)", mod, since612)
	case t.g.gen == image.Gen73 && n > 0:
		walk = "vmlinux match walk; found in vmlinux, so the modules are not walked (7.3)"
	default:
		walk = fmt.Sprintf("vmlinux match walk, then all %d module symbols compared", t.d.Syms.ModuleSymbols())
	}
	t.note("number_of_same_symbols", strconv.Quote(symbol), fmt.Sprintf("%d (%s)", n, walk))
	fn := "validate_probe_symbol (" + since612 + ")"
	switch {
	case n > 1:
		return refuse(errno.EADDRNOTAVAIL, check, fmt.Sprintf("%s: symbol is not unique (%d copies)", fn, n))
	case n == 0:
		return refuse(errno.ENOENT, check, fmt.Sprintf("%s: symbol %q not found", fn, symbol))
	}
	return nil
}

// parseError is the tracefs path's answer to a failed
// validate_probe_symbol: "goto parse_error" in __trace_kprobe_create
// (6.12.117), "return -EINVAL" in trace_kprobe_create_internal (7.3):
// -EINVAL, whatever validate_probe_symbol returned (the error_log still
// says NON_UNIQ_SYMBOL or BAD_PROBE_ADDR).
func (t *Tracing) parseError(perr *probeErr) *probeErr {
	fn := "__trace_kprobe_create: goto parse_error"
	if t.g.gen == image.Gen73 {
		fn = "trace_kprobe_create_internal: return -EINVAL"
	}
	perr.reason.Detail += fmt.Sprintf(" (-%s; %s, %s)", perr.code.Name(), fn, since612)
	perr.code = errno.EINVAL
	return perr
}

// eventCreateDir612 models kernel/trace/trace_events.c:event_create_dir
// (6.12.117, 7.3) for the one instance: the group's eventfs_inode (found on
// tr->systems, or made by event_subsystem_dir), then the event's
// eventfs_inode with its entry array (no dentry, no inode, no file until a
// lookup), the fields, and an event_file_get that the "enable" entry's
// release drops. 7.3 defines the fields first (defineFieldsFirst), so a
// group that cannot be made leaves them defined.
func (t *Tracing) eventCreateDir612(ev *Event) {
	c := t.counters()
	prev := c.Enter(PhaseTracefs)
	defer c.Enter(prev)
	if t.g.defineFieldsFirst {
		t.eventDefineFields(ev)
	}
	if !t.eventSubsystemDir(ev.Group) {
		return // -ENOMEM, ignored by __add_event_to_tracers
	}
	ev.inSystem = true
	if t.d.Faults.Fail(FaultTracefsDir) {
		// eventfs_create_dir's alloc_ei failed: -1, ignored.
		c.Inc(opKmalloc)
		return
	}
	ev.hasDir = true
	t.eventfsCreateDir(ev.Name, t.g.eventEntries)
	if !t.g.defineFieldsFirst {
		t.eventDefineFields(ev)
	}
	c.Inc(opConst) // event_file_get, put by the "enable" entry's release (6.12+)
}

// eventfsCreateDir models fs/tracefs/event_inode.c:eventfs_create_dir
// (6.12.117, 7.3): alloc_ei (kzalloc of the eventfs_inode, kstrdup_const of
// a heap name) and the link under eventfs_mutex; entries are callbacks.
func (t *Tracing) eventfsCreateDir(name string, entries int) {
	c := t.counters()
	c.Add(opKmalloc, 2)
	c.Inc(opEiCreate)
	t.note("eventfs_create_dir", name, fmt.Sprintf("one eventfs_inode; its %d entries are made on lookup (%s)", entries, since612))
}

// eventfsRemoveDir models fs/tracefs/event_inode.c:eventfs_remove_dir of
// one eventfs_inode (6.12.117, 7.3): list_del_rcu, free_ei, and, the last
// reference gone, release_ei queues the free: call_srcu then call_rcu
// (6.12.117: free_ei_srcu → free_ei_rcu) or call_srcu only (7.3:
// free_ei_rcu); free_ei_rcu kfrees the name and the eventfs_inode.
func (t *Tracing) eventfsRemoveDir() {
	c := t.counters()
	c.Inc(opEiRemove)
	c.Add(opCallRCU, uint64(t.g.eiFreeCallbacks))
	c.Add(opKmalloc, 2)
}

// registerTraceEvent612 models kernel/trace/trace_output.c:
// register_trace_event (6.12.117, 7.3) for a dynamic event:
// alloc_trace_event_type's ida_alloc_range(__TRACE_LAST_TYPE,
// TRACE_EVENT_TYPE_MAX), the lowest free id (0 when every id is taken:
// -ENODEV from the caller), then the event_hash insert. No
// ftrace_find_event check, no list walk.
func (t *Tracing) registerTraceEvent612() int {
	c := t.counters()
	c.Inc(opIDA)
	id := t.idaHint
	for id <= TraceEventTypeMax && t.typeUsed[id] {
		id++
	}
	t.idaHint = id
	if id > TraceEventTypeMax {
		return 0
	}
	t.useType(id)
	return id
}
