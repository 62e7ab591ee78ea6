package fprobe

import (
	"fmt"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/sim"
)

// Ops of 7.3's fgraph-based fprobe. Weights: below.
var (
	OpHlistArray = sim.NewOp("fprobe.hlist.alloc", wHlistArray, rHlistArray,
		"fprobe_init: kzalloc_flex of struct fprobe_hlist with num nodes (or unregister_fprobe_nolock's kcalloc of the working address array)")
	OpHlistNode = sim.NewOp("fprobe.hlist.node", wHlistNode, rHlistNode,
		"fprobe_init: one node's address stored (its ftrace_location is counted by ftrace)")
	OpIPTableInsert = sim.NewOp("fprobe.ip_table.insert", wIPTableInsert, rIPTableInsert,
		"insert_fprobe_node: one rhltable_insert into fprobe_ip_table (hash, bucket bit-lock, duplicate-key list, nelems)")
	OpIPTableRemove = sim.NewOp("fprobe.ip_table.remove", wIPTableInsert, rIPTableInsert,
		"delete_fprobe_node: one rhltable_remove from fprobe_ip_table")
	OpIPTableLookup = sim.NewOp("fprobe.ip_table.lookup", wIPTableLookup, rIPTableLookup,
		"fprobe_exists_on_hash: one rhltable_lookup of an address and the walk of its nodes")
	OpFprobeHash = sim.NewOp("fprobe.hash", wFprobeHash, rFprobeHash,
		"add_fprobe_hash / del_fprobe_hash (fprobe_registered's fprobe_table walk): hash_ptr and one hlist add or del under fprobe_mutex")
	OpFgraphStart = sim.NewOp("fprobe.fgraph.start", wFgraphStart, rFgraphStart,
		"register_ftrace_graph for the first fgraph user (ftrace_graph_active 0 → 1): start_graph_tracing's shadow stack per task (alloc_retstack_tasklist), the sched_switch tracepoint probe; the ftrace_startup of the ops is counted by ftrace")
)

// Weights.
const (
	wHlistArray    = 80
	rHlistArray    = "as fprobe.rethook.node (BenchmarkWeightHashCopy, 30.6 ns ≈ 80 cycles): one SLUB allocation; the node stores are fprobe.hlist.node"
	wHlistNode     = 3
	rHlistNode     = "hardware fact: zeroing and filling a 32-byte node in an L1-hot array, ≈ 3 cycles"
	wIPTableInsert = 60
	rIPTableInsert = "hardware fact: rhashtable's hash of the key (hash_ptr), the bucket bit spinlock (one atomic ≈ 20 cycles), the key's duplicate list walk and the pointer stores, the atomic nelems update (≈ 20 cycles): ≈ 60 cycles"
	wIPTableLookup = 30
	rIPTableLookup = "hardware fact: hash of the key and an RCU bucket walk of one or two L2-resident entries ≈ 30 cycles"
	wFprobeHash    = 20
	rFprobeHash    = "hardware fact: hash_ptr and an hlist_add_head_rcu / hlist_del_rcu of one L1-hot node ≈ 20 cycles"
	wFgraphStart   = 125000
	rFgraphStart   = "estimate, not measured: 400 tasks (a small server's ps count) × (a 4 KiB kmem_cache_alloc from fgraph_stack ≈ 200 cycles + ret_stack init ≈ 100) ≈ 120000 cycles, plus register_trace_sched_switch (tracepoint_probe_register's array copy and static-key patch ≈ 5000)"
)

// fprobeHlistBytes is sizeof(struct fprobe_hlist) on x86-64 7.3
// (hlist_node 16, rcu_head 16, fp 8, size 4 + pad); fprobeHlistNodeBytes
// is sizeof(struct fprobe_hlist_node) (rhlist_head 16, addr 8, fp 8).
const (
	fprobeHlistBytes     = 48
	fprobeHlistNodeBytes = 32
)

// kmallocMaxSize is KMALLOC_MAX_SIZE on x86-64 with MAX_PAGE_ORDER 10
// (Debian 7.3: CONFIG_ARCH_FORCE_MAX_ORDER unset): 4 MiB. A kzalloc
// above it fails (the page allocator refuses the order).
const kmallocMaxSize = 4 << 20

// maxFprobeDataSize is MAX_FPROBE_DATA_SIZE (include/linux/fprobe.h, 7.3):
// ((1 << FPROBE_DATA_SIZE_BITS) - 1) words = 15 × 8 bytes.
const maxFprobeDataSize = 15 * 8

// kind is the shared ops an fprobe goes on (fprobe_is_ftrace: no exit
// handler → fprobe_ftrace_ops, 0; else fprobe_graph_ops, 1).
func (fp *Fprobe) kind73() int {
	if fp.ExitHandler {
		return 1
	}
	return 0
}

var sharedOpsName = [2]string{"fprobe_ftrace_ops", "fprobe_graph_ops"}

// registerFprobeIPs73 models kernel/trace/fprobe.c:register_fprobe_ips
// (7.3): fprobe_registered → -EEXIST; fprobe_init (num ≤ 0 → -EINVAL,
// entry_data_size aligned above MAX_FPROBE_DATA_SIZE → -E2BIG, the
// fprobe_hlist kzalloc_flex — -ENOMEM above KMALLOC_MAX_SIZE —, and
// ftrace_location per address: 0 → -ENOENT); fprobe_ftrace_add_ips or
// fprobe_graph_add_ips: ftrace_set_filter_ips on the shared ops, which
// only its first user registers (register_ftrace_function, or
// register_ftrace_graph with start_graph_tracing when no fgraph user is
// left); then add_fprobe_hash and one insert_fprobe_node per address.
// The fgraph ops' registration is counted as ftrace_startup of one ops
// (7.3's ftrace_startup_subops on the graph manager ops is not modelled
// apart).
func registerFprobeIPs73(e *Env, c *sim.Counters, fp *Fprobe, addrs []uint64) error {
	if fp == nil {
		return errno.EINVAL
	}
	if fp.registered {
		e.why = "register_fprobe_ips (7.3): fprobe_registered"
		return e.facts().reregister // -EEXIST
	}
	num := len(addrs)
	if num <= 0 {
		return errno.EINVAL
	}
	if (fp.EntryDataSize+7)&^7 > maxFprobeDataSize {
		e.why = fmt.Sprintf("fprobe_init (7.3): entry_data_size %d > MAX_FPROBE_DATA_SIZE", fp.EntryDataSize)
		return errno.E2BIG
	}
	c.Inc(OpHlistArray)
	if fprobeHlistBytes+fprobeHlistNodeBytes*num > kmallocMaxSize {
		e.why = fmt.Sprintf("fprobe_init (7.3): kzalloc_flex of fprobe_hlist with %d nodes exceeds KMALLOC_MAX_SIZE", num)
		return errno.ENOMEM
	}
	ft := e.Ftrace
	locs := make([]uint64, num)
	for i, a := range addrs {
		c.Inc(OpHlistNode)
		loc := ft.Location(c, a)
		if loc == 0 {
			e.why = fmt.Sprintf("fprobe_init (7.3): ftrace_location(%#x) == 0", a)
			return errno.ENOENT // fprobe_fail_cleanup: kfree(hlist_array)
		}
		locs[i] = loc
	}
	k := fp.kind73()
	sh := &e.sh
	if sh.ops[k] == nil {
		sh.ops[k] = ft.NewOps(sharedOpsName[k])
		sh.onIP[k] = map[uint64]int{}
	}
	if err := ft.SetFilterIPs(c, sh.ops[k], addrs); err != nil {
		return err
	}
	if !sh.registered[k] {
		if k == 1 {
			c.Inc(OpFgraphStart)
		}
		if err := ft.RegisterFunction(c, sh.ops[k]); err != nil {
			ft.FreeFilter(c, sh.ops[k])
			return err
		}
		sh.registered[k] = true
	}
	c.Inc(OpFprobeHash)
	c.Add(OpIPTableInsert, uint64(num))
	for _, loc := range locs {
		sh.onIP[k][loc]++
	}
	sh.nodes[k] += num
	fp.locs, fp.kind, fp.registered = locs, k, true
	return nil
}

// unregisterFprobeAsync73 models kernel/trace/fprobe.c:
// unregister_fprobe_async → unregister_fprobe_nolock (7.3), what
// bpf_kprobe_multi_link_release calls ("Don't wait for RCU GP here"): the
// working array kcalloc; per node delete_fprobe_node and
// fprobe_exists_on_hash (an address no other node of that kind holds is
// collected); del_fprobe_hash; then, when no node of the kind is left,
// the shared ops is unregistered and its filter freed
// (__fprobe_ftrace_unregister / __fprobe_graph_unregister), else the
// collected addresses leave its filter (ftrace_set_filter_ips remove=1).
// kfree_rcu(hlist_array): no grace period waited for.
func unregisterFprobeAsync73(e *Env, c *sim.Counters, fp *Fprobe) error {
	if fp == nil || !fp.registered {
		return errno.EINVAL
	}
	ft, sh, k := e.Ftrace, &e.sh, fp.kind
	c.Inc(OpHlistArray)
	var gone []uint64
	for _, loc := range fp.locs {
		c.Inc(OpIPTableRemove)
		sh.nodes[k]--
		sh.onIP[k][loc]--
		c.Inc(OpIPTableLookup)
		if sh.onIP[k][loc] == 0 {
			delete(sh.onIP[k], loc)
			gone = append(gone, loc)
		}
	}
	c.Inc(OpFprobeHash)
	var err error
	switch {
	case sh.nodes[k] == 0:
		err = ft.UnregisterFunction(c, sh.ops[k])
		ft.FreeFilter(c, sh.ops[k])
		sh.registered[k] = false
	case len(gone) > 0:
		err = ft.RemoveFilterIPs(c, sh.ops[k], gone)
	}
	fp.locs, fp.registered = nil, false
	return err
}
