package extable

// Cost weights, in cycles: ns × 2.6 GHz on the reference AMD EPYC from
// weights_bench_test.go, or documented load-to-use latencies (AMD Zen L1 ≈
// 4-5 cycles). None is fitted to a published figure.
const (
	wSearch = 5
	rSearch = "hardware fact: call chain and the table bounds / num_exentries tests on L1-hot globals, ~one L1 load (≈5 cycles)"

	wProbe = 11
	rProbe = "BenchmarkWeightProbe: median 4.1 ns (runs 3.5-8.1) ≈ 11 cycles per cmp_ex_search step over a 4096-entry (48 KB) relative table, random keys"

	wBPFCheck = 10
	rBPFCheck = "hardware fact: rcu_read_lock plus bpf_tree's latch sequence count and (empty) root loads, two L1-hot dependent loads (~5 cycles each)"
)
