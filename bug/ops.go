package bug

import "github.com/kpsim/kpsim/sim"

// Cost weights. Measured with the micro-benchmarks in costbench_test.go
// on kpsim's development host (AMD EPYC, 2.6 GHz nominal per
// /proc/cpuinfo; go test -bench Cost, 2 cores), converted as
// ns × 2.6 = cycles, or derived from documented load-to-use latencies
// (L1 ~5, L2 ~14, L3 ~42 cycles; see kprobes/ops.go). None is fitted.
const (
	ghz          = 2.6
	scanEntryNs  = 0.93 // BenchmarkCostScanEntry: 0.926 ns/entry, 18k entries of 12 bytes
	indexProbeNs = 1.27 // BenchmarkCostIndexProbe: 1.266 ns/step, 18k pointers
	latL3        = 42
)

var (
	// OpScanEntry is one bug entry compared by a linear walk.
	OpScanEntry = sim.NewOp("bug.scan.entry", scanEntryNs*ghz,
		"BenchmarkCostScanEntry: sequential walk over 18k 12-byte bug_entry, bug_addr() and compare: 0.93 ns/entry at 2.6 GHz",
		"one struct bug_entry compared with addr (bug_addr(bug) == addr) in find_bug or module_find_bug")
	// OpModuleVisit is one module on module_bug_list.
	OpModuleVisit = sim.NewOp("bug.module.visit", latL3,
		"hardware fact: one dependent load of a struct module's bug_list/bug_table/num_bugs line, not recently touched (L3 ~42 cycles)",
		"one module visited on module_bug_list by module_find_bug (list step, bug_table and num_bugs loads)")
	// OpIndexProbe is one binary-search step over the bug index.
	OpIndexProbe = sim.NewOp("bug.index.probe", indexProbeNs*ghz,
		"BenchmarkCostIndexProbe: binary search over 18k pointers into the bug table, random keys: 1.27 ns/step at 2.6 GHz",
		"one binary-search step over the bug-index: load the slot, the entry's bug_addr, compare")
	// OpIndexEntry is the final exact-match test of the entry found.
	OpIndexEntry = sim.NewOp("bug.index.entry", indexProbeNs*ghz,
		"same access as a search step: BenchmarkCostIndexProbe, 1.27 ns at 2.6 GHz",
		"the exact-match test of the entry the bug-index search lands on")
	// OpIndexFill is one slot filled when the index is built.
	OpIndexFill = sim.NewOp("bug.index.fill", scanEntryNs*ghz,
		"sequential read of the bug table and store to the index: the streaming pattern of BenchmarkCostScanEntry, 0.93 ns at 2.6 GHz",
		"one core bug entry stored into the bug-index at late init")
	// OpIndexSortCmp is one comparison of the late-init sort.
	OpIndexSortCmp = sim.NewOp("bug.index.sort.cmp", indexProbeNs*ghz,
		"heapsort compare through two slots (dependent loads, scattered like a search step): BenchmarkCostIndexProbe, 1.27 ns at 2.6 GHz",
		"one comparison (and its swap) of sort() ordering the bug-index by address at late init")
)
