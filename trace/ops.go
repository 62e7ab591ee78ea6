package trace

import (
	"fmt"
	"github.com/kpsim/kpsim/alternative"

	"github.com/kpsim/kpsim/sim"
)

// Phases of the event layer. The kprobes core keeps its own phases
// (name_lookup, safety.*, prepare, insert, arm, optimize, ...), so a report
// reads the event layer's share apart from the core's.
var (
	PhaseParse     = sim.NewPhase("event.parse", "trace_parse_run_command, argv_split, __trace_kprobe_create: parsing, kprobe_on_func_entry, names, alloc_trace_kprobe")
	PhaseSymbols   = sim.NewPhase("event.symbols", "number_of_same_symbols (vmlinux match walk + every module symbol), within_notrace_func")
	PhaseLookup    = sim.NewPhase("event.lookup", "find_trace_kprobe (dyn_event_list walk), find_trace_event_call (ftrace_events walk)")
	PhaseRegister  = sim.NewPhase("event.register", "register_trace_event (event id, event_hash), trace_add_event_call, trace_event_file, fields, dyn_event_add")
	PhaseTracefs   = sim.NewPhase("tracefs", "tracefs directories and files of events and groups: creation and removal")
	PhaseEnable    = sim.NewPhase("event.enable", "event_enable_write / system_enable_write, tracing_update_buffers, enable_trace_kprobe (arming: see arm)")
	PhaseDisable   = sim.NewPhase("event.disable", "writing 0 to enable: disable_trace_kprobe, trace_probe_remove_file (disarming: see disable_kprobe)")
	PhaseDelete    = sim.NewPhase("event.delete", "-:GRP/EVENT: dyn_event_release, unregister_trace_kprobe, probe_remove_event_call, tracing_reset_all_online_cpus")
	PhasePerfOpen  = sim.NewPhase("perf.open", "perf_event_open on the kprobe PMU: perf_kprobe_init, create_local_trace_kprobe, perf_trace_event_reg")
	PhasePerfClose = sim.NewPhase("perf.close", "closing a perf kprobe event: perf_kprobe_destroy, tracepoint_synchronize_unregister, destroy_local_trace_kprobe")
)

// Weights. None of this can be run here (ring 0); each is an order of
// magnitude from documented hardware costs, and a cost file overrides it.
const (
	wLineByte = 1
	rLineByte = "byte-at-a-time strchr / copy loop over an L1-hot buffer: ~1 cycle per byte"
	wCopyUser = 150
	rCopyUser = "copy_from_user entry: access_ok, STAC/CLAC (~20-30 cycles each on Zen 4/Golden Cove, Agner Fog) and rep movsb start-up ≈ 150 cycles (bytes counted apart)"
	wStrcmp   = 20
	rStrcmp   = "strcmp of short names that differ early: call + a few byte compares on L1-hot strings ≈ 20 cycles"
	wVisit    = 42
	rVisit    = "one dependent load of a cold list node: L3 hit (Zen ≈ 42 cycles), as the kprobe hash chain"
	wPercpu   = 400
	rPercpu   = "alloc_percpu / free_percpu: pcpu_alloc_mutex, chunk bitmap search and a memset per CPU ≈ 150 ns ≈ 400 cycles"
	wDentry   = 2600
	rDentry   = "one tracefs entry: lookup_one_len (dcache hash), d_alloc, new_inode (slab + inode init), d_instantiate, fsnotify ≈ 1 µs ≈ 2600 cycles"
	wDentryRm = 1500
	rDentryRm = "simple_recursive_removal of one entry: d_invalidate, dput, inode eviction ≈ 0.6 µs"
	wOpen     = 2600
	rOpen     = "open + close of a tracefs file: path walk of ~5 dcache-hot components, struct file alloc, fd install and release ≈ 1 µs"
	wSyscall  = 200
	rSyscall  = "syscall entry and exit with the Debian mitigations (PTI off on eIBRS parts) ≈ 100-200 cycles"
	wRBPage   = 600
	rRBPage   = "one ring-buffer page: alloc_pages_node + kzalloc of buffer_page + list insert ≈ 250 ns"
	wTPReg    = 3000
	rTPReg    = "tracepoint_probe_register/unregister: mutex, func array realloc (kmalloc + copy), rcu_assign ≈ 1 µs (its static key's text pokes are counted as text_poke ops)"
	wIDR      = 60
	rIDR      = "idr_find in pmu_idr: a 2-level radix walk, L2 hits (~14 cycles each) + call overhead"
	wConstT   = 5
	rConstT   = "a couple of compares on L1-hot globals"
	wCPUList  = 10
	rCPUList  = "INIT_HLIST_HEAD on one CPU's percpu list head: a store to a cold line, write-combined"
	wRBReset  = 2000
	rRBReset  = "ring_buffer_reset_cpu: disable, wait for writers, reset the reader and head pages ≈ 0.8 µs per CPU"
)

// Weights of the trace-event-index patch (sim.TraceEventIndex).
const (
	// BenchmarkCostJhashByte (costbench_test.go): jhash of kprobe event
	// names and their group, as the index hashes them, timed by CPU time
	// (the shared development host's wall time was 3x that).
	jhashByteNs = 1.12
	ghz         = 2.6
	rIdxByte    = "BenchmarkCostJhashByte: jhash (include/linux/jhash.h) of event names of 8-39 bytes and their group, set-up and finals included, by CPU time (user 0.88 s for 100001 x 7842 bytes): %.2f ns/byte at 2.6 GHz"
	rIdxBucket  = "hardware fact: one bucket head loaded from an array last touched a write() line ago, through tracefs and kprobe registration work that evicts it from L1/L2: L3 hit (Zen ≈ 42 cycles), as a list node"
	rIdxVisit   = "hardware fact: one dependent load of a cold chain node (its hlist_node and the stored hash share the line): L3 hit (Zen ≈ 42 cycles), as the list walks it replaces"
	wIdxLink    = 5
	rIdxLink    = "hardware fact: hlist_add_head_rcu / hlist_del_rcu are two to three pointer stores to lines the caller holds or the neighbour's; stores retire into the store buffer (no load-to-use on the path): ~5 cycles"
	wIdxRehash  = 42 + 5
	rIdxRehash  = "hardware fact: a moved node's cold line (L3 ≈ 42) and the head store into the new, freshly zeroed array (L1, ~5); the stored hash is reused"
	wIdxInit    = 1
	rIdxInit    = "hardware fact: INIT_HLIST_HEAD of a kvcalloc'd array: one 8-byte streaming store per bucket, about one per cycle (as rhashtable.bucket.init)"
)

// Counted operations of the event layer.
var (
	opLineByte  = sim.NewOp("trace.line.byte", wLineByte, rLineByte, "one byte of a written line scanned or copied (strchr for '\\n' and '#', argv_split's copy)")
	opCopyUser  = sim.NewOp("trace.copy_from_user", wCopyUser, rCopyUser, "one copy_from_user / strncpy_from_user call (its bytes are trace.line.byte)")
	opStrcmp    = sim.NewOp("trace.strcmp", wStrcmp, rStrcmp, "one strcmp of event, group or system names")
	opDynVisit  = sim.NewOp("trace.dyn_event.visit", wVisit, rVisit, "one dyn_event_list entry visited (find_trace_kprobe, dyn_event_release, dyn_events_release_all)")
	opEvVisit   = sim.NewOp("trace.ftrace_events.visit", wVisit, rVisit, "one ftrace_events entry visited (find_trace_event_call, trace_event_dyn_try_get_ref)")
	opFileVisit = sim.NewOp("trace.tr_events.visit", wVisit, rVisit, "one tr->events file visited (system enable, probe_remove_event_call's three walks)")
	opSysVisit  = sim.NewOp("trace.systems.visit", wVisit, rVisit, "one tr->systems / event_subsystems entry visited (event_subsystem_dir)")
	opHashVisit = sim.NewOp("trace.event_hash.visit", wVisit, rVisit, "one event_hash chain entry visited (ftrace_find_event's id check)")
	opPercpu    = sim.NewOp("percpu.alloc", wPercpu, rPercpu, "one alloc_percpu / free_percpu")
	opDentry    = sim.NewOp("tracefs.create", wDentry, rDentry, "one tracefs directory or file created")
	opDentryRm  = sim.NewOp("tracefs.remove", wDentryRm, rDentryRm, "one tracefs directory or file removed")
	opOpen      = sim.NewOp("vfs.open", wOpen, rOpen, "one open + close of a tracefs file by the user")
	opSyscall   = sim.NewOp("syscall", wSyscall, rSyscall, "one write / ioctl / perf_event_open syscall entry and exit")
	opRBPage    = sim.NewOp("ring_buffer.page", wRBPage, rRBPage, "one ring-buffer page allocated (the first enable resizes the buffer on every CPU)")
	opTPReg     = sim.NewOp("tracepoint.register", wTPReg, rTPReg, "one tracepoint probe registered or unregistered (sched_switch / sched_wakeup for cmdline recording)")
	opIDR       = sim.NewOp("perf.pmu.idr_find", wIDR, rIDR, "perf_init_event: idr_find of the PMU type")
	opConst     = sim.NewOp("trace.check.const", wConstT, rConstT, "one O(1) check (lockdown, flags, capability, id counter)")
	opCPUList   = sim.NewOp("perf.percpu.list_init", wCPUList, rCPUList, "one possible CPU's hlist head initialised (perf_trace_event_reg)")
	opRBReset   = sim.NewOp("ring_buffer.reset_cpu", wRBReset, rRBReset, "one CPU buffer reset (reset_disabled_cpu_buffer) by ring_buffer_reset_online_cpus, for each of the instance's array and max (snapshot) buffers")
)

// Counted operations of trace-event-index.
var (
	opIdxHashByte   = sim.NewOp("trace.event_index.hash.byte", jhashByteNs*ghz, fmt.Sprintf(rIdxByte, jhashByteNs), "one byte of a group or event name hashed by jhash (lookup, insert, late-init build)")
	opIdxBucket     = sim.NewOp("trace.event_index.bucket", wVisit, rIdxBucket, "one bucket head of an event-index table loaded (lookup, insert)")
	opIdxVisit      = sim.NewOp("trace.event_index.visit", wVisit, rIdxVisit, "one chain node of an event-index table visited: its stored hash compared (strcmp on a hash match is trace.strcmp)")
	opIdxLink       = sim.NewOp("trace.event_index.link", wIdxLink, rIdxLink, "one node linked (hlist_add_head_rcu) or unlinked (hlist_del_rcu: no walk, no hash)")
	opIdxRehash     = sim.NewOp("trace.event_index.rehash", wIdxRehash, rIdxRehash, "one node moved to the doubled table when an insert leaves the table above 3/4 load")
	opIdxBucketInit = sim.NewOp("trace.event_index.bucket.init", wIdxInit, rIdxInit, "one bucket head initialised (late init, growth)")
)

// Ops shared with the kprobes core, found by name so both report under one
// name.
var (
	opKmalloc  = mustOp("kmalloc")
	opSyncRCU  = mustOp("synchronize_rcu")
	opTextPoke = alternative.OpTextPoke
)

func mustOp(name string) sim.Op {
	op, ok := sim.LookupOp(name)
	if !ok {
		panic("trace: no op " + name)
	}
	return op
}

// Fault points of the event layer.
var (
	FaultTraceKprobeAlloc = sim.NewFaultPoint("trace_kprobe.alloc", "alloc_trace_kprobe's kzalloc fails (-ENOMEM)")
	FaultTracefsDir       = sim.NewFaultPoint("tracefs.dir", "tracefs_create_dir of an event directory fails (the event exists without its directory; not an error)")
	FaultSubsystem        = sim.NewFaultPoint("trace.subsystem.alloc", "event_subsystem_dir: the kmalloc of a new group's trace_subsystem_dir fails: event_create_dir -ENOMEM, ignored; the event has no directory, the group none until a later event creates it")
	FaultEventFile        = sim.NewFaultPoint("trace_event_file.alloc", "trace_create_new_event's kmem_cache_alloc fails: ignored by __add_event_to_tracers, the event is registered without a file in the instance (no directory; enabling it through tracefs is -ENOENT)")
	FaultPerfEvent        = sim.NewFaultPoint("perf.event.alloc", "perf_event_alloc's kmem_cache_alloc_node fails: perf_event_open returns -ENOMEM before the kprobe PMU is reached")
	FaultEventIndexAlloc  = sim.NewFaultPoint("trace.event_index.alloc", "trace-event-index: the kvcalloc of a table fails: at late init no index is built (find_trace_kprobe and find_trace_event_call walk the lists, as upstream); when a table grows, it keeps its size")
	FaultPerfAlloc        = sim.NewFaultPoint("perf.trace_event.alloc", "perf_trace_event_reg: an alloc_percpu (the event's hlist heads, or a perf_trace_buf of the first perf user) fails: -ENOMEM, the local trace_kprobe is destroyed")
)
