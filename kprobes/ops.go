package kprobes

import "github.com/kpsim/kpsim/sim"

// Cost weights. Every figure is derived from the following documented
// load-to-use latencies of a dependent (pointer-chasing) load on current
// x86-64 server/desktop cores (Intel optimization manual and AMD software
// optimization guides; cross-checked against 7-cpu.com's measurements):
//
//	L1 hit   ~5 cycles       (Skylake 4-5, Zen 3/4 4-5)
//	L2 hit   ~14 cycles      (Skylake 12-14, Zen 3/4 12-14)
//	L3 hit   ~42 cycles      (Skylake client ~42, Zen 3 ~46, Zen 4 ~50;
//	                          mesh server parts are slower, ~60-70)
//
// Working set: at 20k-50k probes the kernel touches one 64-byte line per
// probe on a chain walk (struct kprobe is 128 bytes, hlist at offset 0 and
// addr at offset 40 share a line), i.e. 1.3-3.2 MB of distinct lines, more
// than a core's L2 (1-2 MB) and well inside L3. The golden-ratio hash
// scatters neighbouring addresses over buckets, so consecutive chain nodes
// are unrelated in memory and hardware prefetch does not help: each node is
// one dependent L3 hit. BenchmarkChainWalkLatency in this package measures
// the same access pattern on the host for cross-checking (ns per node).
const (
	latL1 = 5
	latL2 = 14
	latL3 = 42
)

var (
	opHashLookup = sim.NewOp("kprobe.hash.lookup", latL1+5,
		"imul (3-cycle latency) + shift to compute hash_ptr, one L1-hot load of the 512-byte kprobe_table head, call/return: ~10 cycles",
		"one get_kprobe() call: hash the address and load the bucket head")
	opHashVisit = sim.NewOp("kprobe.hash.visit", latL3,
		"one dependent load per hlist node; at 20k-50k probes the 1.3-3.2 MB of touched lines exceed L2 and live in L3 (~42 cycles, Skylake client / Zen 3)",
		"one hlist node compared in get_kprobe()'s chain walk (p->addr == addr)")
	opHashAdd = sim.NewOp("kprobe.hash.add", latL1+latL3,
		"hlist_add_head_rcu: L1-hot bucket head plus a store to the old first node's pprev (cold line, L3 ~42)",
		"one hlist_add_head_rcu into a kprobe_table bucket")
	opHashReplace = sim.NewOp("kprobe.hash.replace", latL3+latL1,
		"hlist_replace_rcu: stores through pprev and to next->pprev; the two cold lines miss in parallel (~one L3 latency)",
		"one hlist_replace_rcu (an aggregator takes over a plain probe's slot)")
	opHashDel = sim.NewOp("kprobe.hash.del", latL3+latL1,
		"hlist_del_rcu: stores through pprev and to next->pprev; the two cold lines miss in parallel (~one L3 latency)",
		"one hlist_del_rcu of a registry entry")
	opAggrVisit = sim.NewOp("kprobe.aggr.visit", latL3,
		"one dependent load of a child struct kprobe (user-allocated, cold: L3 ~42)",
		"one child visited on an aggregator's list (ap->list), e.g. in __get_valid_kprobe")

	opTreeSearch = sim.NewOp("kprobe.tree.search", latL1,
		"load of the (L1-hot) tree root pointer and call overhead",
		"one descent of the probe tree started (P4: insert, lower-bound, floor)")
	opTreeVisit = sim.NewOp("kprobe.tree.visit", 25,
		"a 50k-node rbtree descent has ~17 levels: the top ~10 (1023 nodes, ~128 KB of lines) stay in L2 (~14), the rest hit L3 (~42): (10*14+7*42)/17 = 25.5",
		"one rb node loaded and its key compared during a descent (or walked to find an erase replacement)")
	opTreeStep = sim.NewOp("kprobe.tree.step", latL3+latL1,
		"rb_next/rb_prev follow ~2 pointers amortised (each edge twice over a full in-order walk); ~1 reaches a node not touched recently (L3 ~42), ~1 an ancestor still in L1 (~5)",
		"one in-order successor or predecessor step (rb_next / rb_prev), including the key compare of the node reached")
	opTreeInsert = sim.NewOp("kprobe.tree.insert", 20,
		"rb_insert_color: amortised O(1) recolouring and at most 2 rotations on the nodes the descent just loaded (L1-hot): ~4 loads at ~5 cycles + a few stores",
		"rebalancing after one rb insert (the descent is counted as kprobe.tree.visit)")
	opTreeErase = sim.NewOp("kprobe.tree.erase", 2*latL3+latL1,
		"rb_erase + __rb_erase_color: amortised O(1), at most 3 rotations; erase is by node pointer, so the parent and sibling lines are cold: ~2 L3 hits plus stores",
		"unlinking and rebalancing for one rb erase (the walk to the replacement node is counted as kprobe.tree.visit)")
	opTreeReplace = sim.NewOp("kprobe.tree.replace", latL3+latL1,
		"rb_replace_node: store to the parent's child pointer and the children's parent pointers (cold lines missing in parallel, ~one L3 latency)",
		"one rb_replace_node (an aggregator takes over a plain probe's tree node)")
	opIterQuery = sim.NewOp("kprobe.iter.query", latL1,
		"compare of the query with the cursor's cached next node and window bounds, all L1-hot",
		"one query of the monotonic address iterator (P6), excluding the steps it makes")
)

// The bucket-head loads of a kprobe_table bigger than upstream's 512 bytes
// (kprobe-hash-bits=B): 2^B heads of 8 bytes stop fitting L1d (32-48 KB)
// above B = 12 and L2 (1-2 MB) above B = 17.
const (
	l1Bytes = 32 << 10
	l2Bytes = 1 << 20
)

var (
	opHashHeadL2 = sim.NewOp("kprobe.hash.head.l2", latL2-latL1,
		"a kprobe_table above 32 KB (B > 12) no longer stays in L1d: the head load is an L2 hit, 14 - 5 cycles more than kprobe.hash.lookup assumes",
		"the extra latency of one bucket-head load from a kprobe_table between 32 KB and 1 MB")
	opHashHeadL3 = sim.NewOp("kprobe.hash.head.l3", latL3-latL1,
		"a kprobe_table above 1 MB (B > 17) no longer stays in L2: the head load is an L3 hit, 42 - 5 cycles more",
		"the extra latency of one bucket-head load from a kprobe_table above 1 MB")
)
