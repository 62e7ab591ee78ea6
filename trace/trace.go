package trace

import (
	"container/list"
	"slices"

	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

// Constants of the 6.1 tracing code.
const (
	// WriteBufSize is WRITE_BUFSIZE (kernel/trace/trace.c): the chunk
	// trace_parse_run_command copies from user space.
	WriteBufSize = 4096
	// MaxEventNameLen is MAX_EVENT_NAME_LEN (kernel/trace/trace.h).
	MaxEventNameLen = 64
	// MaxTraceArgs is MAX_TRACE_ARGS (kernel/trace/trace_probe.h).
	MaxTraceArgs = 128
	// KretprobeMaxactiveMax is KRETPROBE_MAXACTIVE_MAX (trace_kprobe.c).
	KretprobeMaxactiveMax = 4096
	// KprobeEventSystem is KPROBE_EVENT_SYSTEM, the default group.
	KprobeEventSystem = "kprobes"
	// traceLastType is __TRACE_LAST_TYPE (trace.h): the first id
	// register_trace_event hands out.
	traceLastType = 20
	// TraceEventTypeMax is TRACE_EVENT_TYPE_MAX (trace_events.h): 16 bits.
	TraceEventTypeMax = 65535
	// eventHashSize is EVENT_HASHSIZE (trace_output.c).
	eventHashSize = 128
	// KsymNameLen is KSYM_NAME_LEN (512): perf_kprobe_init's name buffer.
	KsymNameLen = 512
	// traceBufSizeDefault is TRACE_BUF_SIZE_DEFAULT (trace.c), bytes per
	// CPU, and bufPageSize the data bytes of a ring-buffer page
	// (BUF_PAGE_SIZE = PAGE_SIZE - the page header).
	traceBufSizeDefault = 1441792
	bufPageSize         = 4080
	// perfNrContexts is PERF_NR_CONTEXTS: the per-CPU perf_trace_buf
	// buffers allocated with the first perf trace event.
	perfNrContexts = 4
	// filesPerEvent: event_create_dir's directory and its files with the
	// Debian config (enable, id, filter, trigger, hist, format).
	filesPerEvent = 1 + 6
	// filesPerGroup: a new group's directory with filter and enable.
	filesPerGroup = 1 + 2
	// allocsPerSymbolProbe: the kmallocs of a kprobe event with a symbol
	// (trace_kprobe.c:__trace_kprobe_create's and alloc_trace_kprobe's,
	// trace_probe.c:trace_probe_init's, 6.1): 6; 5 without (docs/cost-model.md).
	allocsPerSymbolProbe = 6
	// schedTracepoints: tracing_sched_register's probes (sched_switch,
	// sched_wakeup, sched_wakeup_new).
	schedTracepoints = 3
)

// Debian 6.1's static trace events and systems: the length of
// debian61Events (vmlinux's _ftrace_events of linux-image-6.1.0-57-amd64
// 6.1.192-3) and its distinct systems; the default when an image carries
// neither the table nor the symbols (the synthetic generator emits
// neither). The pinned kernel's kallsyms has 1,507 __event_* symbols and
// 95 str__*__trace_system_name symbols (a system defined in several
// files has one per file; TRACE_SYSTEM_VAR can differ from the system).
const (
	DebianStaticEvents  = 1506
	DebianStaticSystems = 97
)

// Config is the tracing state a run starts from.
type Config struct {
	// StaticEvents is T_s: trace events of vmlinux and loaded modules
	// (on ftrace_events and, as files, on tr->events).
	StaticEvents int
	// StaticSystems is G_s: their subsystems (tr->systems).
	StaticSystems int
	// Static are the same events by section, vmlinux's first, then each
	// loaded module's in load order (ConfigFor). Nil: StaticEvents
	// unnamed events in StaticSystems unnamed systems.
	Static []StaticSegment
	// OtherDynEvents counts non-kprobe dynamic events (uprobes, synthetic
	// events) already on dyn_event_list: walked, never matched.
	OtherDynEvents int
	// Lockdown is the lockdown LSM refusing LOCKDOWN_KPROBES (EPERM).
	Lockdown bool
}

// ConfigFor derives the static events from the image: vmlinux's
// _ftrace_events (image.Kernel.TraceEvents; else its __event_* and
// str__*__trace_system_name symbols counted; else Debian 6.1's), and
// every loaded module's (image.Module.TraceEvents; else
// SyntheticModuleEvents), as trace_module_add_events added them.
func ConfigFor(k *image.Kernel) Config {
	cfg := Config{Static: staticSegments(k)}
	sys, _ := staticSystems(cfg.Static)
	cfg.StaticSystems = len(sys)
	for _, s := range cfg.Static {
		cfg.StaticEvents += s.len()
	}
	return cfg
}

// Deps are the kernel subsystems the tracing code calls.
type Deps struct {
	KP     *kprobes.Kprobes
	Syms   *kallsyms.Compressed
	Ftrace *ftrace.Ftrace
	Image  *image.Kernel
	// C receives the counts (nil: whatever KP.C is at each call).
	C      *sim.Counters
	Faults *sim.Faults
}

// Tracing is the state of the tracing subsystem of one kernel with one
// trace instance: dyn_event_list, ftrace_events and tr->events, the event
// ids and event_hash, the subsystems, and the perf trace references.
// Not safe for concurrent use (every call is under event_mutex).
type Tracing struct {
	d   Deps
	cfg Config
	g   genFacts     // the generation's behaviour (gen.go), chosen in New
	sw  sim.Switches // the kernel's switches (the kprobes core's)

	idx      *eventIndex // trace-event-index, once late init built it
	lateDone bool
	// lookup answers find_trace_kprobe and find_trace_event_call: the
	// walks, their counted shortcut, or the trace-event-index form; chosen
	// once, in New (lookup.go).
	lookup eventLookup

	dynList  list.List // dyn_event_list: live trace_kprobes, oldest first
	callList list.List // ftrace_events' dynamic events, newest first
	dyn      seqSet    // dynList's positions
	dynSeq   int
	events   map[eventKey]*Event // live trace events of trace_kprobes (not perf-local ones)
	byName   map[string][]*Event // the same, by event name
	calls    seqSet              // callList's positions
	files    seqSet              // tr->events (the instance's trace_event_files): head-inserted
	callSeq  int
	perGrp   map[string]int // dynamic events per group
	systems  []*subsystem   // tr->systems, head first
	// staticPerSys: the static events of each named system, the name
	// compares find_trace_event_call makes past the dynamic events.
	staticPerSys map[string]int
	sysSeq       int

	nextType int
	idaHint  int // register_trace_event's IDA (6.12+): no free id below it
	typeUsed []bool
	bucket   [eventHashSize]int

	bufferExpanded bool
	cmdlineRef     int
	perfTotalRef   int
	errorLog       []string
}

type eventKey struct{ group, name string }

type subsystem struct {
	name    string
	nEvents int
}

// Event is one trace event call of a trace_kprobe (struct
// trace_probe_event with its trace_event_call and the instance's
// trace_event_file).
type Event struct {
	Group, Name string
	probes      []*TraceKprobe // the primary first, appended siblings after
	seq         int            // ftrace_events / tr->events order
	callNode    *list.Element  // on ftrace_events (Tracing.callList)
	id          int
	local       bool // perf-local: on no list
	traceOn     bool // TP_FLAG_TRACE (the tracefs file is enabled)
	profile     bool // TP_FLAG_PROFILE (perf)
	wasEnabled  bool // EVENT_FILE_FL_WAS_ENABLED
	hasDir      bool
	fields      bool // event_define_fields ran: trace_destroy_fields frees them
	noFile      bool // trace_create_new_event failed: on ftrace_events, not on tr->events
	inSystem    bool // file->system: event_subsystem_dir counted the event in its group
	nargs       int
	isReturn    bool
}

// Enabled models trace_probe_is_enabled.
func (e *Event) Enabled() bool { return e.traceOn || e.profile }

// Probes returns the event's trace_kprobes, the primary first.
func (e *Event) Probes() []*TraceKprobe { return append([]*TraceKprobe(nil), e.probes...) }

// TraceKprobe models struct trace_kprobe.
type TraceKprobe struct {
	Symbol    string // as written (possibly MOD:SYM), "" for an address probe
	Offset    uint64
	Addr      uint64 // the address given, for address probes
	Return    bool
	MaxActive int
	Args      []string // fetch-arg command texts
	// Kp is the kprobe (rp.kp); Rp is set for return probes.
	Kp *kprobes.Kprobe
	Rp *kprobes.Kretprobe

	ev      *Event
	seq     int           // dyn_event_list order
	dynNode *list.Element // on dyn_event_list (Tracing.dynList)
	listed  bool
	pending bool // MOD:SYM whose module is not loaded
}

// Event returns the trace event the probe belongs to.
func (tk *TraceKprobe) Event() *Event { return tk.ev }

// Registered models trace_kprobe_is_registered.
func (tk *TraceKprobe) Registered() bool { return tk.Kp != nil && tk.Kp.Registered() }

// Pending reports a MOD:SYM probe waiting for its module.
func (tk *TraceKprobe) Pending() bool { return tk.pending }

// New returns the tracing state of a freshly booted kernel. Its late
// initcall (LateInit) is the caller's to run.
func New(d Deps, cfg Config) *Tracing {
	t := &Tracing{d: d, cfg: cfg, g: genFactsFor(genOf(d.Image)), sw: d.KP.Sw, events: map[eventKey]*Event{}, byName: map[string][]*Event{}, perGrp: map[string]int{}}
	t.lookup = newEventLookup(t, d.KP.Cfg.Sim.Walk)
	// Boot: the builtin output types (ids below __TRACE_LAST_TYPE) and the
	// static events took ids in order; every one is in event_hash.
	t.typeUsed = make([]bool, TraceEventTypeMax+1)
	for id := 1; id < traceLastType; id++ {
		t.useType(id)
	}
	t.nextType = traceLastType
	t.idaHint = traceLastType
	for i := 0; i < cfg.StaticEvents; i++ {
		t.useType(t.nextType)
		t.nextType++
	}
	if cfg.Static == nil {
		cfg.Static = []StaticSegment{{Owner: "vmlinux", Anon: cfg.StaticEvents, AnonSystems: cfg.StaticSystems}}
		t.cfg.Static = cfg.Static
	}
	t.systems, t.staticPerSys = staticSystems(cfg.Static)
	return t
}

func (t *Tracing) useType(id int) {
	t.typeUsed[id] = true
	t.bucket[id&(eventHashSize-1)]++
}

func (t *Tracing) freeType(id int) {
	if id > 0 && t.typeUsed[id] {
		t.typeUsed[id] = false
		t.idaHint = min(t.idaHint, id)
		t.bucket[id&(eventHashSize-1)]--
	}
}

// NumEvents returns E: the trace_kprobes on dyn_event_list.
func (t *Tracing) NumEvents() int { return t.dyn.len() }

// NumTraceEvents returns T: the entries of ftrace_events (static and dynamic).
func (t *Tracing) NumTraceEvents() int { return t.cfg.StaticEvents + t.calls.len() }

// DynEvents returns D: every entry of dyn_event_list.
func (t *Tracing) DynEvents() int { return t.cfg.OtherDynEvents + t.dyn.len() }

// ErrorLog returns the instance's error_log (at most 8 entries, oldest first).
func (t *Tracing) ErrorLog() []string { return append([]string(nil), t.errorLog...) }

// LookupEvent returns the live event GROUP/NAME, or nil.
func (t *Tracing) LookupEvent(group, name string) *Event { return t.events[eventKey{group, name}] }

// Events returns the live tracefs events in creation order.
func (t *Tracing) Events() []*Event {
	out := make([]*Event, 0, len(t.events))
	for _, e := range t.events {
		out = append(out, e)
	}
	sortEvents(out)
	return out
}

// logErr models trace_probe_log_err + tracing_log_err: the command is
// rebuilt (O(L)) and kept in a ring of TRACING_LOG_ERRS_MAX = 8.
func (t *Tracing) logErr(cmd, msg string) {
	c := t.counters()
	c.Add(opLineByte, uint64(len(cmd)))
	c.Inc(opKmalloc)
	t.errorLog = append(t.errorLog, msg+": "+cmd)
	if len(t.errorLog) > 8 {
		t.errorLog = t.errorLog[1:]
	}
}

// sortEvents orders events by creation.
func sortEvents(es []*Event) {
	slices.SortFunc(es, func(a, b *Event) int { return a.seq - b.seq })
}

// counters is where the event layer counts: Deps.C, or (when nil) the
// kprobes core's counters, so a caller that swaps KP.C (kpsim explain's
// per-probe count) gets the event layer's counts there too.
func (t *Tracing) counters() *sim.Counters {
	if t.d.C != nil {
		return t.d.C
	}
	return t.d.KP.C
}

// note records one step of the decision trail (kprobes.Kprobes.Trail; nest
// indents it); a no-op when no trail is recorded.
func (t *Tracing) note(check, args, result string) {
	if tr := t.d.KP.Trail; tr != nil {
		tr.Record(kprobes.Step{Check: check, Args: args, Result: result})
	}
}

// nest makes the kprobes core's steps (and the event layer's following
// ones) one level deeper until the returned func runs.
func (t *Tracing) nest() func() {
	tr := t.d.KP.Trail
	if tr == nil {
		return func() {}
	}
	t.d.KP.Trail = kprobes.Indent(tr, 1)
	return func() { t.d.KP.Trail = tr }
}
