// Package trace models the tracing front doors users attach kprobes
// through, as Linux 6.1.192 implements them: tracefs kprobe_events
// (kernel/trace/trace_kprobe.c, trace_probe.c, trace_dynevent.c), the event
// layer behind it (trace_events.c, trace_output.c, fs/tracefs), enabling,
// disabling and deleting events, and the perf kprobe PMU
// (trace_event_perf.c, kernel/events/core.c).
//
// What Linux does. A line "p[:[GRP/]EVENT] SYM[+OFF]" written to
// kprobe_events is split into words, parsed by __trace_kprobe_create,
// checked (kprobe_on_func_entry; number_of_same_symbols refuses a name with
// two or more copies, EADDRNOTAVAIL, or none, ENOENT), allocated
// (alloc_trace_kprobe), then registered under event_mutex:
// find_trace_kprobe walks the whole dyn_event_list, a new event is
// registered as a trace event first (find_trace_event_call walks every
// trace event, register_trace_event assigns an id, trace_add_event_call
// creates the tracefs directory and its six files), and only then is the
// kprobe registered, disabled, after within_notrace_func. One write()
// carries many lines; the first failing line ends the write with its errno
// and the lines before it stay. Enabling (events/GRP/EVENT/enable) arms the
// probe through enable_kprobe, and only then is an optprobe queued for the
// optimizer. Deleting (-:GRP/EVENT) walks the dyn_event list and the
// instance's event files three times and waits for one grace period per
// probe; a line that deleted an event ever enabled then resets the
// instance's array and max buffers (tracing_reset_all_online_cpus: four
// grace periods, every CPU buffer twice). The perf kprobe PMU (perf_event_open with the kprobe PMU type)
// creates a local trace_kprobe without any list or tracefs work and arms it
// inside the open.
//
// Generations. The above is 6.1.192. Where 6.12.117 and 7.3 differ
// (validate_probe_symbol's -EINVAL and its MOD:SYM walk, 7.3's vmlinux-only
// number_of_same_symbols, eventfs directories, the argument limits, the
// IDA of event ids, 7.3's heap buffers, perf's strndup_user, the delete
// head match), gen.go holds the facts and the second model functions, and
// New chooses them once from the image's generation.
//
// Static events. ftrace_events, tr->events and tr->systems start with the
// static trace events of vmlinux and of every loaded module
// (event_trace_enable, trace_module_add_events): the image's
// _ftrace_events tables (image.Kernel.TraceEvents, image.Module.TraceEvents)
// or, when it has none, Debian 6.1's vmlinux table (debian61_events.txt)
// and SyntheticModuleEvents per module. A kprobe event named like one of
// them is -EEXIST; one in a static event's system joins that system.
//
// Every walk is counted as the kernel walks it; the simulator answers the
// walks from maintained counts (the lists' lengths and each entry's
// position), which give the same numbers as walking them.
package trace
