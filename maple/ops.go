package maple

import "github.com/kpsim/kpsim/sim"

// Cycle weights, from the documented load-to-use latencies of dependent
// loads on current x86-64 cores (L1 ~5, L2 ~14, L3 ~42 cycles: Intel and
// AMD optimization guides, 7-cpu.com), as in kprobes/ops.go.
//
// Working set: a tree of 50k entries in half-to-full 256-byte nodes has
// ~4-6k nodes (1-1.5 MB) and 5 levels. The root and the second level (17
// nodes, ~4 KB) stay in L1, the third (~250 nodes, 64 KB) in L2, the last
// two levels miss to L3: (5 + 5 + 14 + 42 + 42) / 5 ~ 22 cycles per node.
const (
	latL1 = 5
	latL2 = 14
	latL3 = 42
)

var (
	opSearch = sim.NewOp("maple.search", latL1,
		"load of the (L1-hot) root pointer and the walk's set-up (mas_start), as kprobe.tree.search",
		"one walk from the root started (lookup, insert, erase, mas_find)")
	opNode = sim.NewOp("maple.node", 22,
		"one dependent load of a 256-byte node's first line: top two levels L1 (~5), third L2 (~14), last two L3 (~42): (5+5+14+42+42)/5 ~ 22 at 50k entries",
		"one maple node entered (a walk's level, or a climb or descent of mas_next/mas_prev)")
	opLine = sim.NewOp("maple.line", latL1,
		"a further 64-byte line of a node already being loaded: its address is known, so it issues in parallel with the first (and the adjacent-line prefetcher fetches the 128-byte pair): ~L1 latency",
		"one more cache line of a node touched (pivots scanned past the first line, the slot's line)")
	opSlot = sim.NewOp("maple.slot", latL1,
		"mas_next/mas_prev inside a leaf: the next pivot and slot of a node just loaded (L1)",
		"one cursor step to the neighbouring slot of the same node")
	opStore = sim.NewOp("maple.store", 40,
		"a leaf store without RCU (mas_wr_node_store into an on-stack node, then a 256-byte copy back): ~8 32-byte moves each way plus bookkeeping, ~40 cycles",
		"one entry written into a leaf (the walk is counted as maple.node/maple.line)")
	opSplit = sim.NewOp("maple.split", 150,
		"kmem_cache_alloc from maple_node_cache (~50-100 cycles on the fast path) plus copying half a node (128 bytes) and the parent's pivot insert",
		"one node split on an insert")
	opSlotStore = sim.NewOp("maple.slot.store", latL1+latL1,
		"mas_wr_slot_store of a new pointer over an existing range: one store to a line the walk just loaded",
		"one entry replaced in place")
	opErase = sim.NewOp("maple.erase", 60,
		"mas_erase's leaf rewrite (as maple.store) plus amortised rebalancing with a sibling (rarely a node freed): ~60 cycles",
		"one entry erased (the walk is counted as maple.node/maple.line)")
)
