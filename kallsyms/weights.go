package kallsyms

// Cost weights, in cycles, from this package's micro-benchmarks
// (weights_bench_test.go: go test -run '^$' -bench Weight ./kallsyms/) on
// the reference machine, an AMD EPYC at 2.6 GHz with 2 MiB L2, 32 MiB L3.
// ns/op × 2.6 = cycles. Re-measure on other hardware; never fit these to a
// published speed-up.
const (
	// 107-109 ns/op for expanding a random compressed record of 6-15
	// tokens byte by byte through a 256-entry token table and comparing it
	// with a name, over a 150k-symbol table: ≈ 280 cycles.
	wNameProbe = 280
	rNameProbe = "BenchmarkWeightExpandCompare: 108 ns ≈ 280 cycles at 2.6 GHz (expand one record via the token table + compare)"
	// 3.5 ns per step of a binary search over a 150k-entry s32 table
	// (L2-resident, unpredictable branch): ≈ 9 cycles.
	wAddrProbe = 9
	rAddrProbe = "BenchmarkWeightAddrProbe: 3.5 ns ≈ 9 cycles per bsearch step over 150k s32 offsets"
	// Sequential reads of neighbouring table entries: ≈ 2 cycles each,
	// as the sequential 24-byte symtab scan below.
	wAliasStep = 2
	rAliasStep = "as BenchmarkWeightSeqScan: a sequential neighbour read, 0.75 ns ≈ 2 cycles"
	// 0.75 ns per 24-byte Elf64_Sym visited in a linear scan: ≈ 2 cycles.
	wModSym = 2
	rModSym = "BenchmarkWeightSeqScan: 0.75 ns ≈ 2 cycles per Elf64_Sym in a linear scan"
	// The latched rb-tree of a handful of modules: ~3 dependent node loads
	// hitting L2 (Zen L2 load-to-use latency ≈ 14 cycles, AMD's
	// optimisation guide) ≈ 42 cycles.
	wModLookup = 42
	rModLookup = "hardware fact: ~3 dependent rb-node loads x ~14-cycle L2 latency (AMD Zen) for mod_tree"
)
