package kallsyms

// Cost weights of the compressed-table ops (ops_compressed.go), in cycles,
// from weights_compressed_bench_test.go (go test -run '^$' -bench WeightC
// ./kallsyms/) over the synthetic image's table (72k records), on the
// reference machine, an AMD EPYC at 2.6 GHz: ns × 2.6 = cycles. Medians of
// 3 runs. Never fitted to a published speed-up. The cache miss of a
// randomly probed record is not in these weights; kallsyms.bytes tracks
// the memory touched.
const (
	wHop = 5
	rHop = "BenchmarkWeightCHop: 1.96 ns/hop ≈ 5 cycles (get_symbol_offset loop from a random marker)"
	// The token walk ends on a data-dependent branch (token strings are
	// 1-10 chars), which dominates.
	wTok    = 27
	rTok    = "BenchmarkWeightCTokSeq: 10.6 ns/token ≈ 27 cycles (token-index load + token-string walk, ~2.1 chars)"
	wChrOut = 1
	rChrOut = "BenchmarkWeightCExpandSeq vs CTokSeq: the store adds < noise (10.1 vs 10.6 ns/token); 1 cycle, one L1 store per cycle"
	wChrCmp = 2
	rChrCmp = "BenchmarkWeightCChrCmpHot: 0.8 ns/char ≈ 2 cycles (strcmp loop on cache-hot bytes)"
	wLd3    = 3
	rLd3    = "BenchmarkWeightCLd3: 0.95 ns ≈ 2.5 cycles (3 byte loads + shifts, random entry of a 3·N table)"
	wLd4    = 1
	rLd4    = "BenchmarkWeightCLd4: 0.43 ns ≈ 1.1 cycles (random u32 from a 4·N table)"
	wAddr   = 2
	rAddr   = "BenchmarkWeightCAddr: 0.7 ns ≈ 1.8 cycles (kallsyms_sym_address at a random index)"
	wVisit  = 1
	rVisit  = "BenchmarkWeightCVisit: 0.37 ns ≈ 1 cycle (indirect callback call + resched flag test)"
)

// kallsyms_on_each_symbol decodes every record in table order: the order
// BenchmarkWeightCTokSeq walks, so the documented weight of its tokens is
// kallsyms.tok's. Calibrated, the two differ: ks_tok times random records
// (cold: a miss per record), ks_stream_tok the whole table as a stream.
const (
	wStreamTok = wTok
	rStreamTok = "BenchmarkWeightCTokSeq: 10.6 ns/token ≈ 27 cycles, records decoded in table order as kallsyms_on_each_symbol does (kallsyms.tok's documented value, the same measurement)"
)
