package trace

import (
	"fmt"
	"iter"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kprobes"
)

// findTraceKprobe models kernel/trace/trace_kprobe.c:find_trace_kprobe.
// It is the plain walk; New chooses it, the counted shortcut or the
// trace-event-index form once (lookup.go).
func (t *Tracing) findTraceKprobe(event, group string) *TraceKprobe {
	for tk := range t.forEachTraceKprobe() {
		if t.strcmp(tk.ev.Name, event) == 0 &&
			t.strcmp(tk.ev.Group, group) == 0 {
			return tk
		}
	}
	return nil
}

// forEachTraceKprobe models kernel/trace/trace_kprobe.c:for_each_trace_kprobe
// over for_each_dyn_event: dyn_event_list from its head (oldest first). The
// other dynamic event types, which sit before every kprobe event in a run
// that starts with them, are visited and skipped (is_trace_kprobe: an
// ops-pointer compare).
func (t *Tracing) forEachTraceKprobe() iter.Seq[*TraceKprobe] {
	return func(yield func(*TraceKprobe) bool) {
		c := t.counters()
		c.Add(opDynVisit, uint64(t.cfg.OtherDynEvents))
		for e := t.dynList.Front(); e != nil; e = e.Next() {
			c.Inc(opDynVisit)
			if !yield(e.Value.(*TraceKprobe)) {
				return
			}
		}
	}
}

// findTraceEventCall models kernel/trace/trace_probe.c:find_trace_event_call
// (every call here has a system and a name). It is the plain walk; New
// chooses it, the counted shortcut or the trace-event-index form once
// (lookup.go). A static event found is returned as staticCall.
func (t *Tracing) findTraceEventCall(system, eventName string) *Event {
	c := t.counters()
	// list_for_each_entry over ftrace_events, from its head: the dynamic
	// events (newest first) were added after the static ones.
	for e := t.callList.Front(); e != nil; e = e.Next() {
		c.Inc(opEvVisit)
		call := e.Value.(*Event)
		if t.strcmp(system, call.Group) != 0 {
			continue
		}
		if t.strcmp(eventName, call.Name) != 0 {
			continue
		}
		return call
	}
	var found *Event
	forEachStatic(t.cfg.Static, func(call image.TraceEvent) bool {
		c.Inc(opEvVisit)
		// An unnamed static event is compared (its system, unknown to
		// kpsim, is no written group) and never matches.
		if t.strcmp(system, call.System) != 0 || call.System == "" {
			return true
		}
		if t.strcmp(eventName, call.Name) != 0 {
			return true
		}
		found = staticCall
		return false
	})
	return found
}

// staticCall stands for a static trace event found on ftrace_events
// (vmlinux's or a module's): kpsim keeps their systems and names, not
// their trace_event_calls.
var staticCall = &Event{Group: staticGroup, Name: staticGroup}

// strcmp is one counted compare of event, group or system names.
func (t *Tracing) strcmp(a, b string) int {
	t.counters().Inc(opStrcmp)
	return strings.Compare(a, b)
}

// addEvent and removeEvent keep the simulator's indexes of live events.
func (t *Tracing) addEvent(ev *Event) {
	t.events[eventKey{ev.Group, ev.Name}] = ev
	t.byName[ev.Name] = append(t.byName[ev.Name], ev)
}

func (t *Tracing) removeEvent(ev *Event) {
	delete(t.events, eventKey{ev.Group, ev.Name})
	l := t.byName[ev.Name]
	for i, e := range l {
		if e == ev {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(t.byName, ev.Name)
	} else {
		t.byName[ev.Name] = l
	}
}

// dynEventAdd models kernel/trace/trace_dynevent.h:dyn_event_add: tail insertion.
func (t *Tracing) dynEventAdd(tk *TraceKprobe) {
	t.counters().Inc(opConst)
	tk.seq = t.dynSeq
	t.dynSeq++
	t.dyn.insert(tk.seq)
	tk.dynNode = t.dynList.PushBack(tk)
	tk.listed = true
}

// dynEventRemove models dyn_event_remove: list_del_init.
func (t *Tracing) dynEventRemove(tk *TraceKprobe) {
	t.counters().Inc(opConst)
	if tk.listed {
		t.dyn.remove(tk.seq)
		t.dynList.Remove(tk.dynNode)
		tk.dynNode = nil
		tk.listed = false
	}
}

// registerTraceKprobe models kernel/trace/trace_kprobe.c:register_trace_kprobe under
// event_mutex.
func (t *Tracing) registerTraceKprobe(tk *TraceKprobe) *probeErr {
	c := t.counters()
	c.Enter(PhaseLookup)
	ev := tk.ev
	old := t.lookup.findTraceKprobe(ev.Name, ev.Group)
	// The trail reads as upstream's under every switch set (kpsim explain
	// --verify holds it to that); the index changes only what the lookup
	// costs.
	if old == nil {
		t.note("find_trace_kprobe", ev.Group+"/"+ev.Name, fmt.Sprintf("NULL (walked all %d entries of dyn_event_list)", t.DynEvents()))
	} else {
		t.note("find_trace_kprobe", ev.Group+"/"+ev.Name, "found: append the probe to the existing event")
	}
	if old != nil {
		if old.Return != tk.Return {
			return refuse(errno.EEXIST, "register_trace_kprobe", "an event of the other probe type has this name")
		}
		return t.appendTraceKprobe(tk, old)
	}
	if perr := t.registerKprobeEvent(ev); perr != nil {
		return perr
	}
	perr := t.__registerTraceKprobe(tk)
	if perr != nil && perr.code == errno.ENOENT && !t.moduleExist(tk) {
		tk.pending = true
		perr = nil
	}
	if perr != nil {
		t.unregisterKprobeEvent(ev)
		return perr
	}
	c.Enter(PhaseRegister)
	t.addEvent(ev)
	t.dynEventAdd(tk)
	if t.idx != nil {
		t.indexAdd(t.idx.dyn, ev) // trace-event-index: the new kprobe event
	}
	return nil
}

// appendTraceKprobe models kernel/trace/trace_kprobe.c:append_trace_kprobe: the
// argument types must match, an exact duplicate is refused, the probe
// joins the existing event (whose enabled state it takes: an enabled event
// registers the new probe armed).
func (t *Tracing) appendTraceKprobe(tk, to *TraceKprobe) *probeErr {
	c := t.counters()
	const fn = "append_trace_kprobe"
	ev := to.ev
	// trace_probe_compare_arg_type: count, then name and type per arg.
	c.Inc(opConst)
	if len(tk.Args) != len(to.Args) {
		return refuse(errno.EEXIST, fn, "argument count differs from the existing event's")
	}
	for i := range tk.Args {
		c.Add(opStrcmp, 2)
		if argName(tk.Args[i], i) != argName(to.Args[i], i) || argType(tk.Args[i]) != argType(to.Args[i]) {
			return refuse(errno.EEXIST, fn, fmt.Sprintf("argument %d differs from the existing event's", i+1))
		}
	}
	// trace_kprobe_has_same_kprobe: every sibling's symbol and offset,
	// then the args' command texts.
	for _, o := range ev.probes {
		c.Inc(opStrcmp)
		if o.Symbol != tk.Symbol || o.Offset != tk.Offset {
			continue
		}
		same := true
		for i := range o.Args {
			c.Inc(opStrcmp)
			if o.Args[i] != tk.Args[i] {
				same = false
				break
			}
		}
		if same {
			return refuse(errno.EEXIST, fn, "the same probe is already on this event")
		}
	}
	// trace_probe_append: the new probe's own trace_probe_event is freed
	// (name, group, the event) and it joins the existing list.
	c.Add(opKmalloc, 3)
	tk.ev = ev
	ev.probes = append(ev.probes, tk)
	perr := t.__registerTraceKprobe(tk)
	if perr != nil && perr.code == errno.ENOENT && !t.moduleExist(tk) {
		tk.pending = true
		perr = nil
	}
	if perr != nil {
		ev.probes = ev.probes[:len(ev.probes)-1] // trace_probe_unlink
		return perr
	}
	c.Enter(PhaseRegister)
	t.dynEventAdd(tk)
	return nil
}

// moduleExist models trace_kprobe_module_exist: a symbol without "MOD:"
// counts as existing; otherwise find_module walks the modules list.
func (t *Tracing) moduleExist(tk *TraceKprobe) bool {
	if tk.Symbol == "" {
		return false
	}
	i := strings.IndexByte(tk.Symbol, ':')
	if i < 0 {
		return true
	}
	name := tk.Symbol[:i]
	mods := t.d.Image.Modules
	for j := len(mods) - 1; j >= 0; j-- { // newest first
		t.counters().Inc(opStrcmp)
		if mods[j].State != image.ModuleUnformed && mods[j].Name == name {
			return true
		}
	}
	return false
}

// __registerTraceKprobe models kernel/trace/trace_kprobe.c:__register_trace_kprobe:
// lockdown, the registered check, within_notrace_func, the @SYM args, the
// DISABLED flag from the event's state, then register_k(ret)probe.
func (t *Tracing) __registerTraceKprobe(tk *TraceKprobe) *probeErr {
	c := t.counters()
	const fn = "__register_trace_kprobe"
	prev := c.Enter(PhaseParse)
	defer c.Enter(prev)
	c.Inc(opConst) // security_locked_down(LOCKDOWN_KPROBES)
	if t.cfg.Lockdown {
		return refuse(errno.EPERM, fn, "lockdown: kprobes are locked down")
	}
	if tk.Registered() {
		return refuse(errno.EINVAL, fn, "already registered")
	}
	c.Enter(PhaseSymbols)
	if t.withinNotraceFunc(tk) {
		t.note("within_notrace_func", tk.describe(), "true: no ftrace location in the function")
		return refuse(errno.EINVAL, "within_notrace_func", fmt.Sprintf("could not probe notrace function %s", tk.describe()))
	}
	t.note("within_notrace_func", tk.describe(), "false")
	c.Enter(PhaseParse)
	for _, a := range tk.Args {
		if sym, ok := argSymbol(a); ok {
			// traceprobe_update_arg: kallsyms_lookup_name of @SYM.
			if _, found := t.d.Syms.LookupName(c, sym); !found {
				return refuse(errno.ENOENT, "traceprobe_update_arg", fmt.Sprintf("symbol %q of a fetch argument not found", sym))
			}
		}
	}
	if tk.ev.Enabled() {
		tk.Kp.Flags &^= kprobes.KprobeFlagDisabled
	} else {
		tk.Kp.Flags |= kprobes.KprobeFlagDisabled
	}
	var err error
	if tk.ev.Enabled() {
		t.note("__register_trace_kprobe", "", "the event is enabled: the probe is registered armed")
	} else {
		t.note("__register_trace_kprobe", "", "the event is not enabled: the probe is registered with KPROBE_FLAG_DISABLED")
	}
	done := t.nest()
	if tk.Return {
		err = t.d.KP.RegisterKretprobe(tk.Rp)
	} else {
		err = t.d.KP.RegisterKprobe(tk.Kp)
	}
	done()
	if err != nil {
		if perr := kprobeRefusal(tk.Kp, err, tk.Return); perr != nil {
			return perr
		}
		panic(fmt.Sprintf("trace: register_kprobe %s: %v", tk.describe(), err))
	}
	return nil
}

func (tk *TraceKprobe) describe() string {
	if tk.Symbol == "" {
		return fmt.Sprintf("%#x", tk.Addr)
	}
	if tk.Offset != 0 {
		return fmt.Sprintf("%s+%d", tk.Symbol, tk.Offset)
	}
	return tk.Symbol
}

// address models trace_kprobe_address: kallsyms_lookup_name + offset (0 if
// the name is unknown), or the given address.
func (t *Tracing) address(tk *TraceKprobe) uint64 {
	if tk.Symbol == "" {
		return tk.Addr
	}
	a, ok := t.d.Syms.LookupName(t.counters(), tk.Symbol)
	if !ok || a == 0 {
		return 0
	}
	return a + tk.Offset
}

// withinNotraceFuncAt models __within_notrace_func: the function holding
// addr has no ftrace location in [start, start+size-1].
func (t *Tracing) withinNotraceFuncAt(addr uint64) bool {
	c := t.counters()
	if addr == 0 {
		return false
	}
	size, off, ok := t.d.Syms.LookupSizeOffset(c, addr)
	if !ok {
		return false
	}
	start := addr - off
	if t.d.Ftrace == nil {
		return true
	}
	return t.d.Ftrace.LocationRange(c, start, start+size-1) == 0
}

// withinNotraceFunc models kernel/trace/trace_kprobe.c:within_notrace_func (DYNAMIC_FTRACE
// and no KPROBE_EVENTS_ON_NOTRACE, as Debian): a notrace function is
// refused unless it is a suffixed copy ("foo.isra.0") of a traceable base.
func (t *Tracing) withinNotraceFunc(tk *TraceKprobe) bool {
	return t.withinNotraceFuncAddr(t.address(tk))
}

// WithinNotraceFunc is within_notrace_func's decision for a probe at
// addr: what kprobe_events and perf_kprobe refuse as notrace (kpsim
// targets lists it). Counted as the trace_kprobe path counts it.
func (t *Tracing) WithinNotraceFunc(addr uint64) bool { return t.withinNotraceFuncAddr(addr) }

// HasFtraceLocation reports whether the function holding addr has an
// ftrace record (ftrace_location_range over its kallsyms extent):
// whether available_filter_functions lists it. It is the negation of
// __within_notrace_func, whose check it is.
func (t *Tracing) HasFtraceLocation(addr uint64) bool {
	return addr != 0 && !t.withinNotraceFuncAt(addr)
}

// withinNotraceFuncAddr is within_notrace_func for the address
// trace_kprobe resolved.
func (t *Tracing) withinNotraceFuncAddr(addr uint64) bool {
	c := t.counters()
	if !t.withinNotraceFuncAt(addr) {
		return false
	}
	name, ok := t.d.Syms.LookupSymbolName(c, addr)
	if ok {
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return true
		}
		// kprobe_lookup_name(base, 0): kallsyms_lookup_name.
		if base, found := t.d.Syms.LookupName(c, name[:i]); found && base != 0 {
			return t.withinNotraceFuncAt(base)
		}
	}
	return true
}

// registerKprobeEvent models kernel/trace/trace_kprobe.c:register_kprobe_event →
// trace_probe_register_event_call: find_trace_event_call, then
// register_trace_event (the id and event_hash) and trace_add_event_call
// (ftrace_events, the instance's file and its tracefs directory).
func (t *Tracing) registerKprobeEvent(ev *Event) *probeErr {
	c := t.counters()
	c.Enter(PhaseLookup)
	// A new event is a miss unless a static event of vmlinux or a loaded
	// module has this system and name (sched/sched_switch): the only
	// dynamic events on ftrace_events are kprobe events, which
	// find_trace_kprobe found first. register_trace_kprobe returns
	// -EEXIST (and logs EVENT_EXIST, which kpsim's create, like every
	// -EEXIST, does not put in error_log).
	if t.lookup.findTraceEventCall(ev.Group, ev.Name) != nil {
		t.note("find_trace_event_call", ev.Group+"/"+ev.Name, "found: a static trace event of this system and name")
		return refuse(errno.EEXIST, "trace_probe_register_event_call", "find_trace_event_call: a trace event of this system and name exists")
	}
	// As upstream's trail under every switch set (see registerTraceKprobe).
	t.note("find_trace_event_call", ev.Group+"/"+ev.Name, fmt.Sprintf("NULL (walked all %d trace events)", t.NumTraceEvents()))

	c.Enter(PhaseRegister)
	c.Inc(opConst) // init_trace_event_call
	id := t.g.registerTraceEvent(t)
	if id == 0 {
		return refuse(errno.ENODEV, "trace_probe_register_event_call", "register_trace_event: no free event id")
	}
	ev.id = id
	t.note("register_trace_event", "", fmt.Sprintf("event id %d", id))
	// trace_add_event_call → __register_event: list_add to ftrace_events.
	c.Inc(opConst)
	ev.seq = t.callSeq
	t.callSeq++
	t.calls.insert(ev.seq)
	ev.callNode = t.callList.PushFront(ev)
	t.perGrp[ev.Group]++
	if t.idx != nil {
		t.indexAdd(t.idx.calls, ev) // trace-event-index: hlist_add_head_rcu
	}
	// __add_event_to_tracers → __trace_add_new_event (one instance):
	// trace_create_new_event (a trace_event_file, two pid-list checks,
	// list_add to tr->events) and event_create_dir.
	c.Inc(opKmalloc)
	if t.d.Faults.Fail(FaultEventFile) {
		// __trace_add_new_event returns -ENOMEM, which
		// __add_event_to_tracers ignores: the event is registered (on
		// ftrace_events, with its id) but has no file in the instance,
		// hence no tracefs directory and nothing to enable it through.
		ev.noFile = true
		t.note("trace_create_new_event", ev.Group+"/"+ev.Name, "NULL (kmem_cache_alloc failed; ignored): no trace_event_file, no directory")
		return nil
	}
	c.Add(opConst, 2)
	t.files.insert(ev.seq)
	t.g.eventCreateDir(t, ev)
	return nil
}

// registerTraceEvent models kernel/trace/trace_output.c:register_trace_event: the id is
// next_event_type++ until it passes TRACE_EVENT_TYPE_MAX; after that
// trace_search_list walks ftrace_event_list (in id order) to the first
// gap. ftrace_find_event checks the id's event_hash bucket first.
func (t *Tracing) registerTraceEvent() int {
	c := t.counters()
	var id int
	if t.nextType > TraceEventTypeMax {
		next := traceLastType
		walked := 0
		for next <= TraceEventTypeMax && t.typeUsed[next] {
			next++
			walked++
		}
		c.Add(opHashVisit, uint64(walked)) // the list walk to the gap
		if next > TraceEventTypeMax {
			return 0
		}
		id = next
	} else {
		c.Inc(opConst)
		id = t.nextType
		t.nextType++
	}
	c.Add(opHashVisit, uint64(t.bucket[id&(eventHashSize-1)]))
	t.useType(id)
	return id
}

// eventCreateDir models kernel/trace/trace_events.c:event_create_dir for the one
// instance: the group's directory (found on tr->systems, or created with
// its filter and enable files), the event directory and its six files,
// and the fields (ip, or func and ret_ip, plus one per argument).
func (t *Tracing) eventCreateDir(ev *Event) {
	c := t.counters()
	prev := c.Enter(PhaseTracefs)
	defer c.Enter(prev)
	if !t.eventSubsystemDir(ev.Group) {
		// event_create_dir returns -ENOMEM, ignored by
		// __add_event_to_tracers: no directory, no fields.
		return
	}
	ev.inSystem = true
	if t.d.Faults.Fail(FaultTracefsDir) {
		// __add_event_to_tracers ignores the failure: the event exists
		// without its directory.
		c.Inc(opDentry)
		return
	}
	ev.hasDir = true
	t.note("event_create_dir", "events/"+ev.Group+"/"+ev.Name, "1 directory + 6 files (enable, id, filter, trigger, hist, format)")
	c.Add(opDentry, filesPerEvent)
	t.eventDefineFields(ev)
}

// eventDefineFields models kernel/trace/trace_events.c:event_define_fields
// for a kprobe event: its fields (ip, or func and ret_ip, plus one per
// argument), one allocation each.
func (t *Tracing) eventDefineFields(ev *Event) {
	fields := 1
	if ev.isReturn {
		fields = 2
	}
	t.counters().Add(opKmalloc, uint64(fields+ev.nargs))
	ev.fields = true
}

// eventSubsystemDir models kernel/trace/trace_events.c:event_subsystem_dir: walk
// tr->systems (head first) for the group; a new group also walks the
// global event_subsystems list, allocates the dir, the subsystem, its name
// and filter, and creates its directory with two files. It reports false
// when the dir's kmalloc fails (fault trace.subsystem.alloc: "No memory to
// create event subsystem", NULL; nothing is kept).
func (t *Tracing) eventSubsystemDir(group string) bool {
	c := t.counters()
	for i, s := range t.systems {
		if s.name == group {
			c.Add(opSysVisit, uint64(i+1))
			c.Add(opStrcmp, uint64(i+1))
			s.nEvents++
			return true
		}
	}
	n := uint64(len(t.systems))
	c.Add(opSysVisit, 2*n)
	c.Add(opStrcmp, 2*n)
	if t.d.Faults.Fail(FaultSubsystem) {
		c.Inc(opKmalloc) // the dir's kmalloc that failed
		return false
	}
	c.Add(opKmalloc, 4)
	t.g.subsystemDirCreate(t, group)
	t.sysSeq++
	t.systems = append([]*subsystem{{name: group, nEvents: 1}}, t.systems...)
	return true
}

// removeSubsystem models the group side of remove_event_file_dir
// (trace_events.c:remove_subsystem): the last event of a group removes its
// directory (tracefs_remove of it and its two files in 6.1.192,
// eventfs_remove_dir of its eventfs_inode in 6.12.117 and 7.3) and frees
// the subsystem.
func (t *Tracing) removeSubsystem(group string) {
	c := t.counters()
	for i, s := range t.systems {
		if s.name == group {
			s.nEvents--
			if s.nEvents == 0 {
				t.g.subsystemDirRemove(t)
				c.Add(opKmalloc, 4)
				t.systems = append(t.systems[:i], t.systems[i+1:]...)
			}
			return
		}
	}
}

// fileDepth is how far a walk of tr->events from its head goes to reach
// ev's file: files are head-inserted, so 1 + the live events created after
// it (static events sit behind every dynamic one).
// An event without a file (trace_event_file.alloc) is not found: the walk
// goes over every file, the static ones too.
func (t *Tracing) fileDepth(ev *Event) uint64 {
	if ev.noFile {
		return uint64(t.cfg.StaticEvents + t.files.len())
	}
	return uint64(t.files.after(ev.seq) + 1)
}

// unregisterKprobeEvent models kernel/trace/trace_kprobe.c:unregister_kprobe_event →
// trace_remove_event_call → probe_remove_event_call: a refused busy event
// is -EBUSY; otherwise three walks of tr->events to the file,
// __unregister_trace_event, the tracefs removal, list_del from
// ftrace_events, the fields and the filter freed.
func (t *Tracing) unregisterKprobeEvent(ev *Event) *probeErr {
	c := t.counters()
	prev := c.Enter(PhaseDelete)
	defer c.Enter(prev)
	if ev.profile {
		return refuse(errno.EBUSY, "probe_remove_event_call", "the event is in use by perf")
	}
	depth := t.fileDepth(ev)
	c.Add(opFileVisit, depth) // walk 1: is the file enabled?
	if ev.traceOn {
		return refuse(errno.EBUSY, "probe_remove_event_call", "the event is enabled")
	}
	c.Add(opFileVisit, depth) // walk 2: event_remove
	c.Inc(opConst)            // __unregister_trace_event: hlist_del, list_del
	t.freeType(ev.id)
	if t.g.eventTypeIDA {
		t.counters().Inc(opIDA) // free_trace_event_type: ida_free (6.12+)
	}
	c.Add(opFileVisit, depth) // walk 3: remove_event_from_tracers
	c.Enter(PhaseTracefs)
	if ev.hasDir {
		t.g.eventDirRemove(t)
	}
	if ev.inSystem {
		t.removeSubsystem(ev.Group) // file->system: event_subsystem_dir counted it
	}
	c.Enter(PhaseDelete)
	if ev.noFile {
		c.Inc(opKmalloc) // the filter; there is no file
	} else {
		c.Add(opKmalloc, 2) // the filter and the file
	}
	if ev.fields {
		// trace_destroy_fields: the fields event_create_dir defined
		// (event_define_fields runs once the directory exists; in 7.3
		// before any directory is made).
		fields := 1
		if ev.isReturn {
			fields = 2
		}
		c.Add(opKmalloc, uint64(fields+ev.nargs))
	}
	t.calls.remove(ev.seq)
	t.callList.Remove(ev.callNode)
	ev.callNode = nil
	if t.idx != nil {
		t.indexRemove(t.idx.calls, ev) // trace-event-index: hlist_del_rcu
	}
	if !ev.noFile {
		t.files.remove(ev.seq)
	}
	if t.perGrp[ev.Group]--; t.perGrp[ev.Group] == 0 {
		delete(t.perGrp, ev.Group)
	}
	return nil
}
