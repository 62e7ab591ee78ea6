package ftrace

import "github.com/kpsim/kpsim/sim"

// FaultPagesAlloc makes ftrace_allocate_pages fail for a module's records
// (kernel/trace/ftrace.c:ftrace_process_locs returns -ENOMEM before
// ftrace_update_code). ftrace_module_init ignores the error: the module
// loads without ftrace records, so ftrace_location answers 0 for its
// functions and a kprobe there is a plain int3 probe, not an ftrace one.
// The vmlinux call at boot is not a fault point (ftrace_init failing
// disables ftrace altogether).
var FaultPagesAlloc = sim.NewFaultPoint("ftrace.pages.alloc",
	"ftrace_process_locs for a module: ftrace_allocate_pages fails (-ENOMEM, ignored by ftrace_module_init): the module has no ftrace records")

// FaultHashMove makes __ftrace_hash_move's dup_hash allocation fail
// (kernel/trace/ftrace.c:ftrace_hash_move returns -ENOMEM): ftrace_set_hash
// frees its temporary hash and returns -ENOMEM with the ops' filter
// unchanged. ftrace_set_filter_ip(s) hit it once per call with a
// non-empty result, after the temporary hash was filled (the first
// allocation is FaultHashAlloc).
var FaultHashMove = sim.NewFaultPoint("ftrace.hash.move",
	"ftrace_hash_move: __ftrace_hash_move's dup_hash allocation fails: ftrace_set_hash frees the temporary hash, -ENOMEM, the filter unchanged")
