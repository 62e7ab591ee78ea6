package ftrace

// Cost weights, in cycles, from this package's micro-benchmarks
// (weights_bench_test.go: go test -run '^$' -bench Weight -count 5
// ./ftrace/) on the reference machine, an AMD EPYC at 2.6 GHz (2 vCPUs,
// shared host: runs vary up to 2x, so each weight is the median of 5-8
// runs), ns × 2.6 = cycles, or from documented load-to-use latencies
// (AMD Zen: L1 ≈ 4-5, L2 ≈ 14, L3 ≈ 42-50 cycles; see kprobes/ops.go).
// None is fitted to a published figure.
const (
	wCall = 5
	rCall = "hardware fact: rcu_read_lock/unlock under PREEMPT_RCU are an L1-hot increment/decrement of current->rcu_read_lock_nesting (~5 cycles L1 load-to-use); call overhead not counted"

	wGroup = 2
	rGroup = "BenchmarkWeightGroupVisit: 0.84 ns ≈ 2 cycles per ftrace_page visited (index + first/last ip compare; lines hot across the many ftrace_location calls of one registration)"

	wProbe = 19
	rProbe = "BenchmarkWeightBsearchProbe: median 7.4 ns (runs 4.3-9.7) ≈ 19 cycles per bsearch step over a 32768-record (512 KB) group, random keys"

	wRecVisit = 0.75
	rRecVisit = "BenchmarkWeightRecVisit: 0.29 ns ≈ 0.75 cycles per 16-byte record in a sequential walk with the skip_record test (hardware prefetch streams the groups)"

	wRecMatch = 10
	rRecMatch = "hardware fact: the matched record is already in L1; ref-count and flag read-modify-writes plus ftrace_test_record's compares ≈ two dependent L1 accesses (~5 cycles each)"

	wHashLookup = 1
	rHashLookup = "BenchmarkWeightHashLookup: 0.36 ns ≈ 1 cycle for hash_64 (imul + shift) and the bucket-head load of a 4096-bucket array, pipelined across a record walk"

	wHashNode = 16
	rHashNode = "BenchmarkWeightHashNode: median 6.2 ns (runs 4.5-9.6) ≈ 16 cycles per dependent load of a scattered 32-byte ftrace_func_entry, 50k entries in 4096 buckets (1.6 MB)"

	wHashBucket = 1.2
	rHashBucket = "BenchmarkWeightHashBucket: 0.47 ns ≈ 1.2 cycles per 8-byte bucket head in a sequential bucket-array iteration"

	wHashBucketInit = 0.6
	rHashBucketInit = "BenchmarkWeightBucketInit: 0.24 ns ≈ 0.6 cycles per 8-byte bucket zeroed (8 KB kcalloc memset, L2-resident)"

	wHashCopy = 80
	rHashCopy = "BenchmarkWeightHashCopy: median 30.6 ns (runs 16-38) ≈ 80 cycles per entry: source-chain load, SLUB freelist pop from a scattered object, fill, hash_64, hlist_add_head"

	wHashMove = 42
	rHashMove = "BenchmarkWeightHashMove: median 16.3 ns (runs 8-27) ≈ 42 cycles per entry: hlist_del_rcu, hash_64, hlist_add_head into 4096 buckets"

	wHashFree = 41
	rHashFree = "BenchmarkWeightHashFree: median 15.7 ns (runs 14.5-24) ≈ 41 cycles per entry: chain load, SLUB freelist push"

	wReplaceCheck = 0.8
	rReplaceCheck = "BenchmarkWeightReplaceCheck: 0.31 ns ≈ 0.8 cycles per ftrace_check_record on a sequentially walked record"
)

// Weights of lookup_symbols.go's ops.
const (
	wSymsBsearch  = 4
	rSymsBsearch  = "hardware fact: the pivot's char* load from an L1/L2-hot sorted array plus the call of symbols_cmp (~4 cycles); its characters are priced as kallsyms.chr_cmp"
	wSymsCallback = 3
	rSymsCallback = "hardware fact: kallsyms_callback's prologue and the bsearch set-up, a handful of L1 register/stack operations (~3 cycles); the indirect call itself is kallsyms.visit"
	wTShow        = 60
	rTShow        = "hardware fact: t_func_next's record step and t_show's seq_puts of a ~25-byte name (memcpy at 16 B/cycle plus the seq_file bounds checks) ≈ 60 cycles; the \"%lx \" of _addrs is a short number() conversion of the same order"
)
