package rhashtable

import "github.com/kpsim/kpsim/sim"

// Cycle weights. Load latencies as in kprobes/ops.go (dependent loads on
// current x86-64 cores: L1 ~5, L2 ~14, L3 ~42 cycles; Intel and AMD
// optimization guides, 7-cpu.com). jhash2 of two words is the
// a/b/c set-up plus __jhash_final's 7 rounds of xor, rotate and subtract
// (21 dependent single-cycle ALU operations): ~25 cycles. The bucket lock is
// a bit spinlock (bit_spin_lock: one uncontended lock bts on the bucket's
// line, ~20 cycles on Skylake/Zen, Agner Fog's instruction tables).
const (
	latL1    = 5
	latL2    = 14
	latL3    = 42
	jhashLat = 25
	bitLock  = 20

	l1Bytes = 32 << 10 // the bucket array fits L1d (32-48 KB)
	l2Bytes = 1 << 20  // the bucket array fits L2 (1-2 MB)
)

var (
	opLookup = sim.NewOp("rhashtable.lookup", jhashLat+latL1,
		"jhash2 of the 8-byte key (~25 cycles of dependent ALU work) plus the ht->tbl and bucket head loads (L1 while the array is small; bigger arrays add rhashtable.head.l2/l3)",
		"one rhashtable_lookup_fast: hash the key and load the bucket head")
	opHeadL2 = sim.NewOp("rhashtable.head.l2", latL2-latL1,
		"a bucket array above 32 KB no longer stays in L1d; the head load is an L2 hit (14 - 5 cycles more)",
		"the extra latency of one bucket-head load from an array between 32 KB and 1 MB")
	opHeadL3 = sim.NewOp("rhashtable.head.l3", latL3-latL1,
		"a bucket array above 1 MB no longer stays in L2; the head load is an L3 hit (42 - 5 cycles more)",
		"the extra latency of one bucket-head load from an array above 1 MB")
	opVisit = sim.NewOp("rhashtable.visit", latL3,
		"one dependent load of a chain node (the rhash_head in a cold struct kprobe): L3 ~42, as kprobe.hash.visit",
		"one chain node compared in a lookup, insert, remove or replace walk")
	opInsert = sim.NewOp("rhashtable.insert", jhashLat+bitLock+latL1,
		"jhash2 (~25) + the bucket bit spinlock (~20, lock bts) + the head store",
		"one rhashtable_insert_fast (hash, lock, head insert; the chain walk is rhashtable.visit)")
	opRemove = sim.NewOp("rhashtable.remove", jhashLat+bitLock+latL1,
		"jhash2 (~25) + the bucket bit spinlock (~20) + the unlink store",
		"one rhashtable_remove_fast (the chain walk is rhashtable.visit)")
	opReplace = sim.NewOp("rhashtable.replace", jhashLat+bitLock+latL1,
		"jhash2 (~25) + the bucket bit spinlock (~20) + the pointer store",
		"one rhashtable_replace_fast (the chain walk is rhashtable.visit)")
	opWorker = sim.NewOp("rhashtable.worker", 2000,
		"schedule_work plus the kworker's wake-up and mutex_lock(&ht->mutex): queue_work_on and a wake_up_process of an idle kworker cost on the order of a microsecond (~2000 cycles at 2-3 GHz; a scheduler wake-up latency, not a cache fact, so an order of magnitude)",
		"one run of rht_deferred_worker (its allocation and rehash are counted separately)")
	opTableAlloc = sim.NewOp("rhashtable.tbl.alloc", 300,
		"kvzalloc of the bucket array: a kmalloc slow path or page allocation, ~300 cycles before zeroing (zeroing is rhashtable.bucket.init)",
		"one bucket_table_alloc")
	opBucketInit = sim.NewOp("rhashtable.bucket.init", 1,
		"INIT_RHT_NULLS_HEAD: one 8-byte store per bucket, streaming (about one store per cycle)",
		"one bucket head initialised by bucket_table_alloc")
	opRehashBucket = sim.NewOp("rhashtable.rehash.bucket", bitLock+latL1,
		"rhashtable_rehash_chain: lock the old bucket (~20) and load its head from a sequentially walked array (prefetched, ~5)",
		"one old bucket emptied by rhashtable_rehash_table")
	opRehashMove = sim.NewOp("rhashtable.rehash.move", latL3+jhashLat+bitLock+latL1,
		"rhashtable_rehash_one for one entry: first load of its cold node (~42), jhash2 under the new hash_rnd (~25), lock of the new bucket (~20), two stores",
		"one entry moved from the old table to the new")
	opRehashVisit = sim.NewOp("rhashtable.rehash.visit", latL1,
		"rhashtable_rehash_one re-walks the old chain to its last entry each time: the nodes were loaded by the previous walk, L1-hot (~5)",
		"one re-walked chain node (a chain of L entries costs L moves and L(L-1)/2 re-walks)")
)
