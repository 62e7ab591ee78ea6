package bpf

import "github.com/kpsim/kpsim/image"

// genFacts are the kernel/trace/bpf_trace.c, kernel/bpf/syscall.c and
// tracefs behaviours of the BPF attach paths that differ between the
// modelled generations, chosen once per Kernel from its generation
// (Kernel.Gen: the image's, image.Kernel.Config.Gen.Effective()).
type genFacts struct {
	gen image.Generation
	// session: BPF_TRACE_KPROBE_SESSION exists. kernel/bpf/syscall.c:
	// link_create passes it to bpf_kprobe_multi_link_attach, whose
	// is_kprobe_multi accepts it and which sets the exit handler and
	// entry_data_size = sizeof(u64) (6.12.117, 7.3); 6.1.192's
	// link_create refuses the attach type (-EINVAL) and its attach tests
	// expected_attach_type != BPF_TRACE_KPROBE_MULTI.
	session bool
	// linkFlags: bpf_kprobe_multi_link_attach refuses
	// attr->link_create.flags != 0 with -EINVAL (6.12.117, 7.3; 6.1.192
	// never reads it).
	linkFlags bool
	// writeCtx: bpf_kprobe_multi_link_attach refuses a program with
	// prog->aux->kprobe_write_ctx ("Writing to context is not allowed
	// for kprobes") with -EINVAL (7.3 only).
	writeCtx bool
	// maxCnt: cnt > MAX_KPROBE_MULTI_CNT (1 << 20) is -E2BIG before any
	// allocation (6.12.117, 7.3; 6.1.192 has no cap).
	maxCnt bool
	// moduleRefs: get_modules_for_addrs takes a reference on every module
	// the addresses fall in, put on release or a failed
	// register_fprobe_ips (6.12.117, 7.3; absent in 6.1.192).
	moduleRefs bool
	// filterFunctionsAddrs: tracefs has available_filter_functions_addrs
	// (kernel/trace/ftrace.c, v6.5+: 6.12.117 and 7.3, not 6.1.192).
	filterFunctionsAddrs bool
}

var genTable = map[image.Generation]*genFacts{
	image.Gen61: {gen: image.Gen61},
	image.Gen612: {gen: image.Gen612, session: true, linkFlags: true, maxCnt: true, moduleRefs: true,
		filterFunctionsAddrs: true},
	image.Gen73: {gen: image.Gen73, session: true, linkFlags: true, writeCtx: true, maxCnt: true, moduleRefs: true,
		filterFunctionsAddrs: true},
}

// facts returns the Kernel's generation facts, chosen on first use from
// Gen (GenUnknown reads as 6.1).
func (k *Kernel) facts() *genFacts {
	if k.g == nil || k.g.gen != k.Gen.Effective() {
		k.g = genTable[k.Gen.Effective()]
	}
	return k.g
}

// Generation is the generation whose bpf_trace.c the Kernel follows.
func (k *Kernel) Generation() image.Generation { return k.facts().gen }

// HasSession reports whether the generation has kprobe.session links
// (BPF_TRACE_KPROBE_SESSION: 6.12+).
func (k *Kernel) HasSession() bool { return k.facts().session }

// Describe names generation g's attach path and fprobe for a report, each
// citing the version's functions.
func Describe(g image.Generation) (kernel, fprobe string) {
	switch g.Effective() {
	case image.Gen612:
		return "bpf_trace.c/ftrace generation 6.12 (6.12.117 bpf_kprobe_multi_link_attach: kprobe.session, link_create.flags, MAX_KPROBE_MULTI_CNT, get_modules_for_addrs; ftrace_lookup_symbols walks modules after vmlinux)",
			"rethook-based (6.12.117 fprobe.c): one ftrace_ops per link; with an exit handler rethook_alloc's objpool of num × CPUs × 2 nodes, one vmalloc'd slot per possible CPU"
	case image.Gen73:
		return "bpf_trace.c/ftrace generation 7.3 (7.3 bpf_kprobe_multi_link_attach: as 6.12 plus the kprobe_write_ctx refusal; ftrace_lookup_symbols' cnt == 1 kallsyms_lookup_name fast path, then the vmlinux and module walks)",
			"fgraph-based (7.3 fprobe.c): links share fprobe_ftrace_ops (entry) or fprobe_graph_ops (exit, session), registered by their first user; per address an fprobe_ip_table node; no rethook; release is unregister_fprobe_async"
	}
	return "bpf_trace.c/ftrace generation 6.1 (6.1.192 bpf_kprobe_multi_link_attach: no kprobe.session, no MAX_KPROBE_MULTI_CNT, no module references; ftrace_lookup_symbols walks vmlinux only)",
		"rethook-based (6.1.192 fprobe.c): one ftrace_ops per link; with an exit handler fprobe_init_rethook kzallocs num × CPUs × 2 rethook nodes"
}
