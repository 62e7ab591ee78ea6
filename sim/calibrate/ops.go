package calibrate

// Which benchmark measures each counted op. An op is either measured (a
// C benchmark below, or the Go decoder timed in place), or keeps its
// documented value because user space cannot reach the work (text_poke's
// CR3 switch, IPIs, RCU grace periods, SLUB's per-CPU freelist, page-table
// changes). Metrics cost nothing and are neither.
//
// The table is by op name, so an op that is not registered in a build
// (a package not linked in) is skipped; an op that is registered but in
// neither table is reported by Uncovered, and TestEveryOpIsCovered fails
// on it: whoever adds an op says here how it is calibrated.

// binding names the benchmark result an op's weight comes from.
type binding struct {
	Bench string // a C benchmark's result name, or GoDecodeBench
	Why   string // how the benchmark stands for the op, when not obvious
}

// GoDecodeBench is the one result measured in Go: x86.DecodeKernel timed
// in place over kernel text (see godecode.go for why it is not C).
const GoDecodeBench = "go_x86_decode"

var measured = map[string]binding{
	// kprobes: the kprobe_table hash (hlist.c).
	"kprobe.hash.lookup":   {"hlist_lookup", ""},
	"kprobe.hash.visit":    {"hlist_visit", ""},
	"kprobe.hash.add":      {"hlist_add_del", "hlist_add_head half of a del+add pair"},
	"kprobe.hash.replace":  {"hlist_add_del", "hlist_replace_rcu stores like hlist_del's (pprev and next->pprev)"},
	"kprobe.hash.del":      {"hlist_add_del", "hlist_del half of a del+add pair"},
	"kprobe.aggr.visit":    {"hlist_visit", "a dependent load of a slab-allocated struct kprobe, as a chain node"},
	"kprobe.optlist.visit": {"hlist_visit", "a dependent load of a slab-allocated optimized_kprobe, as a chain node"},
	// kprobes: the probe tree (rbtree.c).
	"kprobe.tree.search":  {"rb_search", ""},
	"kprobe.tree.visit":   {"rb_visit", ""},
	"kprobe.tree.step":    {"rb_step", ""},
	"kprobe.tree.insert":  {"rb_insert", ""},
	"kprobe.tree.erase":   {"rb_erase", ""},
	"kprobe.tree.replace": {"rb_replace", ""},
	"kprobe.iter.query":   {"call_const", "compare with the cursor's cached bounds: a call and two compares"},
	// kprobes: small fixed costs (misc.c, tables.c).
	"kprobe.check.const":          {"call_const", ""},
	"kprobe.insn_slot.scan":       {"slot_scan", ""},
	"kprobe.insn_slot.page":       {"blacklist_walk", "one dependent load of a small kmalloc'd list node"},
	"perf.text_poke":              {"call_const", "perf_event_text_poke with no listener: a call, a few loads and a not-taken branch"},
	"module.text_address":         {"modtree", ""},
	"module.address.lookup":       {"modtree", ""},
	"jump_label.module.lookup":    {"modtree", ""},
	"static_call.module.lookup":   {"modtree", ""},
	"jump_label.module.get":       {"atomic2", ""},
	"static_call.module.get":      {"atomic2", ""},
	"kprobe_blacklist.arch.check": {"call_const", ""},
	// Blacklist (tables.c).
	"kprobe_blacklist.walk.entry":     {"blacklist_walk", ""},
	"kprobe_blacklist.index.probe":    {"idx_blacklist_probe", ""},
	"kprobe_blacklist.index.entry":    {"idx_blacklist_probe", "the containment test: one more range load and compare"},
	"kprobe_blacklist.index.fill":     {"blacklist_walk", "one list node read per entry copied"},
	"kprobe_blacklist.index.sort.cmp": {"idx_sort", ""},
	// Jump labels, static calls, bug table (tables.c).
	"jump_label.scan.entry":      {"jump_scan", ""},
	"jump_label.index.probe":     {"idx_jump_probe", ""},
	"jump_label.index.entry":     {"idx_jump_probe", "the window walk's slot and entry loads, as a search step"},
	"jump_label.index.fill":      {"idx_fill", ""},
	"jump_label.index.sort.cmp":  {"idx_sort", ""},
	"static_call.scan.site":      {"static_scan", ""},
	"static_call.index.probe":    {"idx_static_probe", ""},
	"static_call.index.site":     {"idx_static_probe", "the window walk's slot and site loads, as a search step"},
	"static_call.index.fill":     {"idx_fill", ""},
	"static_call.index.sort.cmp": {"idx_sort", ""},
	"bug.scan.entry":             {"bug_scan", ""},
	"bug.module.visit":           {"blacklist_walk", "one dependent load of a list node (module_bug_list)"},
	"bug.index.probe":            {"idx_bug_probe", ""},
	"bug.index.entry":            {"idx_bug_probe", "the exact-match test: slot and entry loads, as a search step"},
	"bug.index.fill":             {"idx_fill", ""},
	"bug.index.sort.cmp":         {"idx_sort", ""},
	// module-bug-index (bug/modindex.go): the same accesses as the core bug index.
	"bug.module_index.range":    {"call_const", "two compares against struct module fields the list step already loaded"},
	"bug.module_index.probe":    {"idx_bug_probe", ""},
	"bug.module_index.entry":    {"idx_bug_probe", "the exact-match test: slot and entry loads, as a search step"},
	"bug.module_index.fill":     {"idx_fill", ""},
	"bug.module_index.sort.cmp": {"idx_sort", ""},
	"x86.decode.insn":           {GoDecodeBench, ""},
	"x86.jump_size.opcode":      {"jump_size", ""},
	"extable.search":            {"call_const", "the call chain and the empty-table tests"},
	"extable.bsearch.probe":     {"extable_bsearch", ""},
	"extable.bpf.check":         {"call_dep2", "rcu_read_lock and bpf_tree's two dependent loads"},
	"module.kallsyms.sym":       {"modsym_scan", ""},
	// kallsyms (kallsyms.c).
	"kallsyms.name.probe": {"ks_name_probe", ""},
	"kallsyms.expand":     {"ks_name_probe", "expanding a found record: the same loop without the compare's early exit"},
	"kallsyms.addr.probe": {"ks_addr_probe", ""},
	"kallsyms.alias.step": {"ks_alias_step", ""},
	"kallsyms.hop":        {"ks_hop", ""},
	"kallsyms.tok":        {"ks_tok", ""},
	"kallsyms.chr_out":    {"ks_chr_out", ""},
	"kallsyms.chr_cmp":    {"ks_chr_cmp", ""},
	"kallsyms.ld3":        {"ks_ld3", ""},
	"kallsyms.ld4":        {"ks_ld4", ""},
	"kallsyms.addr":       {"ks_addr", ""},
	"kallsyms.visit":      {"ks_visit", ""},
	// ftrace (tables.c, ftrace_hash.c, misc.c).
	"ftrace.location.call":    {"call_dep2", "PREEMPT_RCU rcu_read_lock/unlock around lookup_rec"},
	"ftrace.lookup_rec.group": {"ftrace_group", ""},
	"ftrace.lookup_rec.probe": {"ftrace_bsearch", ""},
	"ftrace.rec.visit":        {"ftrace_rec", ""},
	"ftrace.rec.match":        {"call_dep2", "the matched record's flag read-modify-writes, two dependent L1 accesses"},
	"ftrace.replace.check":    {"ftrace_rec", "ftrace_check_record's flag tests on a sequentially walked record"},
	"ftrace.hash.lookup":      {"fh_lookup", ""},
	"ftrace.hash.node":        {"fh_node", ""},
	"ftrace.hash.bucket":      {"fh_bucket", ""},
	"ftrace.hash.bucket.init": {"fh_bucket_init", ""},
	"ftrace.hash.move":        {"fh_move", ""},
	// The alternative designs (kprobe-hash-bits, kprobe-rhashtable,
	// kprobe-btree, reservation-btree; docs/series.md): hlist.c,
	// rhashtable.c, btree.c.
	"kprobe.hash.head.l2":      {"hlist_head_l2", ""},
	"kprobe.hash.head.l3":      {"hlist_head_l3", ""},
	"rhashtable.lookup":        {"rht_lookup", ""},
	"rhashtable.head.l2":       {"hlist_head_l2", "the extra latency of a bigger bucket array, as kprobe_table's"},
	"rhashtable.head.l3":       {"hlist_head_l3", "the extra latency of a bigger bucket array, as kprobe_table's"},
	"rhashtable.visit":         {"hlist_visit", "a chain node inside a slab-allocated struct kprobe, as kprobe_table's"},
	"rhashtable.insert":        {"rht_insert", ""},
	"rhashtable.remove":        {"rht_insert", "remove half of a remove+insert pair"},
	"rhashtable.replace":       {"rht_insert", "jhash2, bucket lock and one pointer store, as an insert"},
	"rhashtable.bucket.init":   {"fh_bucket_init", "one 8-byte store per bucket, streaming"},
	"rhashtable.rehash.bucket": {"rht_rehash_bucket", ""},
	"rhashtable.rehash.move":   {"rht_rehash_move", ""},
	"rhashtable.rehash.visit":  {"l1_line", "re-walking nodes the previous walk just loaded: L1 dependent loads"},
	"maple.search":             {"rb_search", "the walk's start: a call and the root load"},
	"maple.node":               {"bt_node", ""},
	"maple.line":               {"l1_line", ""},
	"maple.slot":               {"bt_slot", ""},
	"maple.store":              {"bt_store", ""},
	"maple.slot.store":         {"bt_slot", "one pointer store to a line the walk just loaded"},
	"maple.erase":              {"bt_store", "the leaf rewrite of an erase, as a store"},
	"image.bench.probe":        {"idx_jump_probe", "a halving-search step over an index of table pointers"},
	// The trace front doors (tracefs, perf, BPF): misc.c, tables.c, hlist.c.
	"trace.line.byte":           {"slot_scan", "a byte-at-a-time loop over an L1-hot buffer"},
	"trace.strcmp":              {"strcmp_short", ""},
	"trace.dyn_event.visit":     {"hlist_visit", "one dependent load of a slab-allocated list node, as a chain node"},
	"trace.ftrace_events.visit": {"hlist_visit", "one dependent load of a slab-allocated list node, as a chain node"},
	"trace.tr_events.visit":     {"hlist_visit", "one dependent load of a slab-allocated list node, as a chain node"},
	"trace.systems.visit":       {"hlist_visit", "one dependent load of a slab-allocated list node, as a chain node"},
	"trace.event_hash.visit":    {"hlist_visit", "one dependent load of a slab-allocated hash node, as a chain node"},
	"trace.check.const":         {"call_const", ""},
	"perf.pmu.idr_find":         {"modtree", "a two-level radix walk: a few dependent node loads, as a small tree lookup"},
	"syscall":                   {"syscall", "on the running kernel, whose entry mitigations may differ from Debian 6.1's"},
}

// documented are the ops user space cannot time: they keep the value and
// rationale they were registered with.
var documented = map[string]string{
	// The per-generation paths (issue 22: kprobes/gen.go, trace/gen.go,
	// ftrace/fprobe/gen.go): kernel-side allocations, RCU callbacks,
	// per-CPU atomics and execmem/page-attribute work user space cannot
	// time; each op's rationale (kpsim list) names where its weight
	// comes from, and says so where no measurement stands behind it.
	"cond_resched":                   "cond_resched() with nothing to run: a call and a flag test (6.12+ text_poke batches)",
	"eventfs.create_dir":             "eventfs_create_dir: alloc_ei bookkeeping beside its two kmallocs (6.12+)",
	"eventfs.remove_dir":             "eventfs_remove_dir: unlinking an eventfs_inode and queuing its free (6.12+)",
	"execmem.cache.alloc":            "execmem_cache_alloc: a maple-tree search of the free areas (7.3)",
	"execmem.cache.free":             "execmem_cache_free: set_memory RW, fill, restore ROX (7.3): page-table changes",
	"execmem.cache.populate":         "execmem_cache_populate: a 2 MiB vmalloc, int3 fill and set_memory_rox (7.3): page-table changes",
	"fprobe.fgraph.start":            "register_ftrace_graph's start-up for the first fgraph fprobe (7.3): an estimate, no measurement",
	"fprobe.hash":                    "add_fprobe_hash: one rhashtable insert of the fprobe (7.3)",
	"fprobe.hlist.alloc":             "fprobe_init's kzalloc_flex of the fprobe_hlist (7.3): a slab allocation",
	"fprobe.hlist.node":              "one fprobe_hlist_node initialised (7.3)",
	"fprobe.ip_table.insert":         "insert_fprobe_node: an rhltable insert (7.3)",
	"fprobe.ip_table.lookup":         "fprobe_exists_on_hash: an rhltable lookup (7.3)",
	"fprobe.ip_table.remove":         "delete_fprobe_node: an rhltable remove (7.3)",
	"fprobe.objpool.init":            "objpool_init's cpu_slots kzalloc (6.12)",
	"fprobe.objpool.node":            "objpool's per-node objinit (6.12)",
	"fprobe.objpool.page":            "a page of a per-CPU objpool slot (6.12): vmalloc backing",
	"fprobe.objpool.slot":            "one per-CPU __vmalloc_node slot of the objpool (6.12)",
	"kprobe.cfi_trap":                "is_cfi_trap's lookup in can_probe (6.12+, CONFIG_CFI): no documented source, one L3 load",
	"kprobe.insn_page.alloc.execmem": "execmem_alloc + set_memory_rox of a kprobe insn page (6.12): page-table changes",
	"objpool.slot":                   "one per-CPU objpool slot of a kretprobe's rethook (6.12+): vmalloc backing",
	"rcu.call":                       "call_rcu / call_srcu queuing a deferred free (6.12+ eventfs)",
	"text_poke.refs.cpu":             "7.3's per-CPU text_poke_array_refs set or dropped on one CPU: an atomic on a remote line",
	"trace.event_type.ida":           "ida_alloc_range / ida_free of an event type id (6.12+)",
	// trace-event-index (trace/index.go): weighted when it was modelled
	// (trace/costbench_test.go's jhash benchmark, hardware facts for the
	// loads and stores); not in calibrate's C suite yet.
	"trace.event_index.hash.byte":   "jhash over a name byte, weighted by trace/costbench_test.go",
	"trace.event_index.bucket":      "one bucket-head load of the event index (hardware fact, as a chain node)",
	"trace.event_index.visit":       "one chain node of the event index (hardware fact, as a chain node)",
	"trace.event_index.link":        "hlist_add_head_rcu / hlist_del_rcu of one node (hardware fact)",
	"trace.event_index.rehash":      "one node moved to the doubled table (hardware fact)",
	"trace.event_index.bucket.init": "one bucket head initialised (hardware fact, a streaming store)",
	// The BPF attach paths (bpf/, ftrace/fprobe/, libbpf/, the seq_file
	// readers): weighted when they were modelled, each op's rationale
	// naming its source (libbpf/testdata/weights.c for the user-space and
	// seq_file calls, documented facts for the kernel-side ones); not in
	// calibrate's suite yet, so they keep that value in every regime.
	"libbpf.fscanf.kallsyms":          "user-space fscanf of a /proc/kallsyms line, weighted by libbpf/testdata/weights.c",
	"libbpf.fscanf.name":              "user-space fscanf of an available_filter_functions line, weighted by libbpf/testdata/weights.c",
	"libbpf.fscanf.addr_name":         "user-space fscanf of an available_filter_functions_addrs line, weighted by libbpf/testdata/weights.c",
	"libbpf.glob.step":                "libbpf's glob_match step, weighted by libbpf/testdata/weights.c",
	"libbpf.strdup":                   "glibc strdup, weighted by libbpf/testdata/weights.c",
	"libbpf.qsort.cmp":                "glibc qsort comparison, weighted by libbpf/testdata/weights.c",
	"libbpf.bsearch.step":             "glibc bsearch step, weighted by libbpf/testdata/weights.c",
	"libbpf.addrs.append":             "libbpf's libbpf_ensure_mem append, weighted by libbpf/testdata/weights.c",
	"libbpf.fopen":                    "fopen/fclose of a tracefs or procfs file: the running kernel's VFS",
	"libbpf.sec.parse":                "libbpf's SEC() prefix match and sscanf, weighted by libbpf/testdata/weights.c",
	"kallsyms.type":                   "kallsyms_get_symbol_type in s_show (kernel seq_file path), weighted from libbpf/testdata/weights.c",
	"kallsyms.s_show":                 "s_show's seq_printf of one /proc/kallsyms line (kernel seq_file path), weighted from libbpf/testdata/weights.c",
	"seq.read":                        "one read(2) of a seq_file chunk: the running kernel's VFS and copy_to_user",
	"module.get_kallsym.step":         "module_get_kallsym's walk of the modules list per module symbol (kernel, under RCU)",
	"ftrace.syms.bsearch":             "kallsyms_callback's bsearch step over the sorted request (kernel)",
	"ftrace.syms.callback":            "kallsyms_on_each_symbol's indirect call of kallsyms_callback (kernel, retpolined)",
	"ftrace.t_show":                   "t_show's print_rec of one available_filter_functions line (kernel seq_file path), weighted from libbpf/testdata/weights.c",
	"fprobe.rethook.node":             "rethook node kzalloc per CPU and address (SLUB, kernel)",
	"fprobe.rethook.alloc":            "rethook_alloc (kernel allocator)",
	"fprobe.locations.sort.cmp":       "fprobe's address sort comparison (kernel sort_r)",
	"bpf.syscall":                     "a bpf(2) syscall entry and exit (kernel)",
	"bpf.copy_user_syms.name":         "strncpy_from_user of one symbol name (SMAP kernel-mode copy)",
	"bpf.user.byte":                   "one byte copied from user space by copy_user_syms (SMAP kernel-mode copy)",
	"mm.kmalloc":                      "kvmalloc's slab path (SLUB, kernel)",
	"mm.vmalloc.page":                 "kvmalloc's vmalloc fallback: one page allocated and mapped (kernel)",
	"bpf.sort.cmp":                    "sort_r comparison of two symbol names (kernel lib/sort.c)",
	"bpf.link.prime":                  "bpf_link_prime: an anon inode file and fd (kernel VFS)",
	"module.addr.bounds":              "within_module's bounds compares in get_modules_for_addrs (kernel)",
	"text_poke":                       "text_poke's temporary mm switch (CR3 writes), PTE set/clear and INVLPG are privileged",
	"text_poke.sync":                  "text_poke_sync is an IPI broadcast to every online CPU",
	"text_poke.sync.cpu":              "an x2APIC ICR write is a privileged MSR write",
	"synchronize_rcu":                 "an RCU grace period is kernel scheduling",
	"kprobe.insn_page.alloc":          "module_alloc + set_memory_ro/x: page-table changes and TLB-flush IPIs",
	"kmalloc":                         "SLUB's per-CPU freelist (this_cpu_cmpxchg on the kernel's per-cpu area)",
	"kprobe.copy_insn":                "copy_from_kernel_nofault: pagefault_disable and an exception-table-guarded copy",
	"kprobe.endbr.read":               "copy_from_kernel_nofault of 4 bytes",
	"kprobe_blacklist.populate.entry": "kmalloc (SLUB fast path) plus list_add_tail_rcu",
	"ftrace.hash.copy":                "add_hash_entry's kmalloc (SLUB) dominates",
	"ftrace.hash.add":                 "add_hash_entry's kmalloc (SLUB) dominates",
	"ftrace.hash.free":                "kfree (SLUB) dominates",
	"ftrace.replace.site":             "composed of text_poke costs",
	"ftrace.text_poke.batch":          "sync-core IPI rounds",
	"ftrace.ops.register":             "trampoline allocation, set_memory_* and text_poke_bp",
	"ftrace.ops.unregister":           "text_poke_bp",
	"ftrace.update_trace_func":        "text_poke_bp and an IPI round",
	"rhashtable.worker":               "schedule_work and a kworker wake-up (the scheduler)",
	"rhashtable.tbl.alloc":            "kvzalloc: the kernel's page or slab allocator",
	"maple.split":                     "kmem_cache_alloc of a maple node dominates",
	"trace.copy_from_user":            "access_ok and STAC/CLAC are kernel-mode (SMAP) instructions",
	"percpu.alloc":                    "the per-CPU allocator (pcpu_alloc_mutex, chunk bitmaps)",
	"tracefs.create":                  "dcache and inode allocation in the kernel's VFS",
	"tracefs.remove":                  "dentry invalidation and inode eviction in the kernel's VFS",
	"vfs.open":                        "a path walk and struct file allocation in the kernel (a user-space open would time this machine's kernel, not the model's)",
	"ring_buffer.page":                "alloc_pages_node and kzalloc",
	"tracepoint.register":             "the tracepoint mutex, kmalloc and RCU publication",
	"ring_buffer.reset_cpu":           "per-CPU ring-buffer state and its synchronisation",
	"perf.percpu.list_init":           "a store into every CPU's per-CPU area",
	// The tracing multi attach (bpf/tracing_multi.go, ftrace/direct.go,
	// 7.3): kernel-side BTF, trampoline, JIT, execmem and text-patching
	// work; each weight composed from documented latencies or from the
	// existing ops its rationale names.
	"btf.type_by_id":         "a dependent load into vmlinux BTF (kernel memory): an L3 latency",
	"btf.id_set.probe":       "a bsearch step over a small kernel BTF_SET, L1-hot",
	"btf.param_suffix":       "strlen + strncmp of a BTF parameter name (kernel memory)",
	"bpf.trampoline.const":   "O(1) stores and atomics on a just-allocated kernel object",
	"bpf.trampoline.chain":   "a dependent load of a kmalloc'd struct bpf_trampoline: an L3 latency",
	"bpf.mutex":              "an uncontended kernel mutex_lock/unlock pair: two lock cmpxchg",
	"bpf.jit.insn":           "one emit_* helper of the x86 BPF JIT (kernel code): a few stores and branches",
	"bpf.jit.scratch_page":   "execmem_alloc/execmem_free of one page: vmalloc area, page and PTE (composed with mm.vmalloc.page)",
	"bpf.prog_pack.word":     "find_next_zero_bit over a kernel bitmap word, streamed",
	"bpf.prog_pack.new":      "alloc_new_pack: a 2 MiB execmem allocation, fill and set_memory_rox (as execmem.cache.populate)",
	"percpu_ref.init":        "percpu_ref_init's alloc_percpu (as percpu.alloc)",
	"bpf.ksym.name":          "snprintf of a trampoline ksym name (kernel vsnprintf)",
	"bpf.ksym.node":          "an rb-tree node load in latch_tree_insert: an L3 latency",
	"bpf.text_copy":          "text_poke_copy's __text_poke: the same privileged work as text_poke",
	"mm.page.zero":           "clear_page_erms of a vmalloc'd page (kernel rep stosb)",
	"ftrace.direct.register": "add_ftrace_ops under ftrace_lock: kernel list and mutex work (direct_ops brings its trampoline)",
}
