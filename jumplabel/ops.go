package jumplabel

import "github.com/kpsim/kpsim/sim"

// Cost weights. Measured with the micro-benchmarks in costbench_test.go
// (BenchmarkCostScanEntry, BenchmarkCostIndexProbe) on kpsim's development
// host (AMD EPYC, 2.6 GHz nominal per /proc/cpuinfo; go test -bench Cost,
// 2 cores), converted as ns × 2.6 = cycles, or derived from documented
// load-to-use latencies (L1 ~5, L2 ~14, L3 ~42 cycles; see kprobes/ops.go).
// None is fitted to a published speedup.
const (
	ghz            = 2.6
	scanEntryNs    = 1.05 // BenchmarkCostScanEntry: 1.049 ns/entry, 30k entries of 16 bytes
	indexProbeNs   = 1.86 // BenchmarkCostIndexProbe: 1.856 ns/step, 30k pointers into the table
	moduleLookupCy = 3 * 14
	moduleGetCy    = 2 * 20
)

var (
	// OpScanEntry is one entry of a linear __jump_label_text_reserved walk.
	OpScanEntry = sim.NewOp("jump_label.scan.entry", scanEntryNs*ghz,
		"BenchmarkCostScanEntry: sequential walk over a 30k-entry (480 KB) array of 16-byte jump_entry, init-bit and code<=end tests: 1.05 ns/entry at 2.6 GHz (hardware prefetch streams the table)",
		"one struct jump_entry visited by __jump_label_text_reserved (core or module table): init-flag test and the code <= end compare")
	// OpIndexProbe is one binary-search step over the P2 index.
	OpIndexProbe = sim.NewOp("jump_label.index.probe", indexProbeNs*ghz,
		"BenchmarkCostIndexProbe: binary search over 30k pointers into a 480 KB jump table, random keys: 1.86 ns/step at 2.6 GHz (slot load, dependent entry load, compare)",
		"one binary-search step over the P2 index: load the slot, load the entry's code, compare with start-4")
	// OpIndexEntry is one entry loaded by the P2 window walk.
	OpIndexEntry = sim.NewOp("jump_label.index.entry", indexProbeNs*ghz,
		"same access as a search step (slot load, dependent entry load, compare): BenchmarkCostIndexProbe, 1.86 ns at 2.6 GHz",
		"one index entry loaded by the P2 window walk (code <= end test, then the init test)")
	// OpIndexFill is one slot filled when the index is built.
	OpIndexFill = sim.NewOp("jump_label.index.fill", scanEntryNs*ghz,
		"a sequential read of the table and a sequential store to the index: the streaming pattern of BenchmarkCostScanEntry, 1.05 ns at 2.6 GHz",
		"one core entry stored into the P2 index at late init")
	// OpIndexSortCmp is one comparison of the late-init sort.
	OpIndexSortCmp = sim.NewOp("jump_label.index.sort.cmp", indexProbeNs*ghz,
		"heapsort compare through two slots (dependent entry loads, scattered like a search step): BenchmarkCostIndexProbe, 1.86 ns at 2.6 GHz",
		"one comparison (and its swap) of the kernel's sort() ordering the P2 index by code at late init")
	// OpModuleLookup is one __module_text_address of the module part (two per call).
	OpModuleLookup = sim.NewOp("jump_label.module.lookup", moduleLookupCy,
		"hardware fact: latched mod_tree rb-tree descent (or the addr_min/addr_max test that rejects a core address first), ~3 nodes at L2 latency (~14 cycles)",
		"__module_text_address in __jump_label_mod_text_reserved: twice per call (start, and end for the WARN_ON_ONCE)")
	// OpModuleGet is try_module_get + module_put on the module found.
	OpModuleGet = sim.NewOp("jump_label.module.get", moduleGetCy,
		"hardware fact: two uncontended locked atomics on the module refcount (~20 cycles each on current x86-64 cores)",
		"try_module_get/module_put around the module scan in __jump_label_mod_text_reserved")
)
