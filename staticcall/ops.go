package staticcall

import "github.com/kpsim/kpsim/sim"

// Cost weights. Measured with the micro-benchmarks in costbench_test.go
// on kpsim's development host (AMD EPYC, 2.6 GHz nominal per
// /proc/cpuinfo; go test -bench Cost, 2 cores), converted as
// ns × 2.6 = cycles, or derived from documented load-to-use latencies
// (L1 ~5, L2 ~14, L3 ~42 cycles; see kprobes/ops.go). None is fitted.
const (
	ghz            = 2.6
	scanSiteNs     = 1.42 // BenchmarkCostScanSite: 1.422 ns/site, 6k sites of 8 bytes
	indexProbeNs   = 1.46 // BenchmarkCostIndexProbe: 1.457 ns/step, 6k pointers
	moduleLookupCy = 3 * 14
	moduleGetCy    = 2 * 20
)

var (
	// OpScanSite is one site of a linear __static_call_text_reserved walk.
	OpScanSite = sim.NewOp("static_call.scan.site", scanSiteNs*ghz,
		"BenchmarkCostScanSite: sequential walk over 6k 8-byte static_call_site entries, init-bit test and both addr_conflict compares: 1.42 ns/site at 2.6 GHz",
		"one struct static_call_site visited by __static_call_text_reserved (core or module): init-flag test and addr_conflict")
	// OpIndexProbe is one binary-search step over the P1 index.
	OpIndexProbe = sim.NewOp("static_call.index.probe", indexProbeNs*ghz,
		"BenchmarkCostIndexProbe: binary search over 6k pointers into the site table, random keys: 1.46 ns/step at 2.6 GHz",
		"one binary-search step over the P1 index: load the slot, load the site's address, compare with start-4")
	// OpIndexSite is one site loaded by the P1 window walk.
	OpIndexSite = sim.NewOp("static_call.index.site", indexProbeNs*ghz,
		"same access as a search step (slot, dependent site load, compare): BenchmarkCostIndexProbe, 1.46 ns at 2.6 GHz",
		"one index entry loaded by the P1 window walk (site <= end, init test, conflict test)")
	// OpIndexFill is one slot filled when the index is built.
	OpIndexFill = sim.NewOp("static_call.index.fill", scanSiteNs*ghz,
		"sequential read of the site table and store to the index: the streaming pattern of BenchmarkCostScanSite, 1.42 ns at 2.6 GHz",
		"one core site stored into the P1 index at late init")
	// OpIndexSortCmp is one comparison of the late-init sort.
	OpIndexSortCmp = sim.NewOp("static_call.index.sort.cmp", indexProbeNs*ghz,
		"heapsort compare through two slots (dependent loads, scattered like a search step): BenchmarkCostIndexProbe, 1.46 ns at 2.6 GHz",
		"one comparison (and its swap) of the kernel's sort() ordering the P1 index by address at late init")
	// OpModuleLookup is one __module_text_address of the module part (two per call).
	OpModuleLookup = sim.NewOp("static_call.module.lookup", moduleLookupCy,
		"hardware fact: latched mod_tree rb-tree descent (or the addr_min/addr_max test rejecting a core address), ~3 nodes at L2 latency (~14 cycles)",
		"__module_text_address in __static_call_mod_text_reserved: twice per call (start, and end for the WARN_ON_ONCE)")
	// OpModuleGet is try_module_get + module_put on the module found.
	OpModuleGet = sim.NewOp("static_call.module.get", moduleGetCy,
		"hardware fact: two uncontended locked atomics on the module refcount (~20 cycles each)",
		"try_module_get/module_put around the module scan in __static_call_mod_text_reserved")
)
