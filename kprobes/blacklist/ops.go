package blacklist

import "github.com/kpsim/kpsim/sim"

// Cost weights. Measured with the micro-benchmarks in costbench_test.go
// on kpsim's development host (AMD EPYC, 2.6 GHz nominal per
// /proc/cpuinfo; go test -bench Cost, 2 cores), converted as
// ns × 2.6 = cycles, or derived from documented latencies (L1 ~5, L2 ~14,
// L3 ~42 cycles; see kprobes/ops.go). None is fitted to a published figure.
//
// The kallsyms ops carry this package's prefix on purpose: a kallsyms
// model elsewhere in kpsim may register "kallsyms.*" ops, and op names must
// be unique. A pipeline that plugs its own Symbols counts its own ops.
const (
	ghz          = 2.6
	walkNs       = 1.42 // BenchmarkCostWalkEntry: 1.42-1.46 ns/node, 1100 nodes of 48 bytes
	addrStepNs   = 3.0  // BenchmarkCostKallsymsAddrStep: 2.6-3.5 ns/step over 200k offsets (two runs)
	nameStepNs   = 94   // BenchmarkCostKallsymsNameStep: 94 ns per expand + strcmp
	populateCy   = 20 + 3*14
	archCheckCy  = 1
	indexProbeNs = 1.86 // jumplabel's BenchmarkCostIndexProbe (same slot-and-compare pattern)
)

var (
	// OpArchCheck is arch_within_kprobe_blacklist's range test.
	OpArchCheck = sim.NewOp("kprobe_blacklist.arch.check", archCheckCy,
		"hardware fact: two compares against link-time constants and a branch, ~1 cycle",
		"arch_within_kprobe_blacklist: addr in [__kprobes_text_start, __kprobes_text_end)")
	// OpWalkEntry is one kprobe_blacklist list node.
	OpWalkEntry = sim.NewOp("kprobe_blacklist.walk.entry", walkNs*ghz,
		"BenchmarkCostWalkEntry: pointer chase over 1100 48-byte nodes allocated back to back (as kmalloc-64 gives them out at boot), range test: 1.42 ns/node at 2.6 GHz",
		"one struct kprobe_blacklist_entry visited by __within_kprobe_blacklist's list walk (or by kprobe_remove_area_blacklist)")
	// OpIndexProbe is one binary-search step over the blacklist index.
	OpIndexProbe = sim.NewOp("kprobe_blacklist.index.probe", indexProbeNs*ghz,
		"same access pattern as jumplabel's BenchmarkCostIndexProbe (array slot load, compare): 1.86 ns at 2.6 GHz",
		"one binary-search step over the blacklist-index's sorted range starts")
	// OpIndexEntry is the containment test of the range found.
	OpIndexEntry = sim.NewOp("kprobe_blacklist.index.entry", indexProbeNs*ghz,
		"same access as a search step: 1.86 ns at 2.6 GHz",
		"the addr < end test of the range the blacklist-index search lands on")
	// OpIndexFill is one list entry copied into the index.
	OpIndexFill = sim.NewOp("kprobe_blacklist.index.fill", walkNs*ghz,
		"one list node read (BenchmarkCostWalkEntry pattern, 1.42 ns) and a sequential store",
		"one vmlinux blacklist entry copied into the blacklist-index at late init")
	// OpIndexSortCmp is one comparison of the late-init sort.
	OpIndexSortCmp = sim.NewOp("kprobe_blacklist.index.sort.cmp", indexProbeNs*ghz,
		"heapsort compare of two 16-byte ranges in a small (~18 KB) array: at most the search-step cost, 1.86 ns",
		"one comparison (and its swap) of sort() ordering the blacklist-index at late init")
	// OpPopulateEntry is one kmalloc'd list entry appended at boot or module load.
	OpPopulateEntry = sim.NewOp("kprobe_blacklist.populate.entry", populateCy,
		"hardware facts: SLUB fast path (one this_cpu_cmpxchg, ~20 cycles) plus list_add_tail_rcu's stores to the tail node and list head (~3 L2-latency lines, 14 cycles each)",
		"one struct kprobe_blacklist_entry kmalloc'd and appended by kprobe_add_ksym_blacklist")
)
