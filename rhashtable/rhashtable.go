// Package rhashtable models lib/rhashtable.c, the kernel's resizable
// RCU-safe hash table, as an alternative probe index for kprobes
// (the kprobe-rhashtable design switch).
//
// What Linux does (6.1, lib/rhashtable.c and include/linux/rhashtable.h):
// a struct rhashtable points at a struct bucket_table of 2^k bucket heads
// (one word each: a nulls-marked pointer whose low bit is the bucket's bit
// spinlock). rhashtable_init sizes the first table from nelem_hint
// (roundup_pow_of_two(nelem_hint * 4 / 3)) or HASH_DEFAULT_SIZE (64), never
// below min_size (at least HASH_MIN_SIZE, 4). A key of a multiple of 4 bytes
// is hashed with jhash2 over its u32 words, seeded by the table's random
// hash_rnd; the bucket is hash & (size - 1). Inserts go at the chain's
// head after a walk of the whole chain (for duplicates and the
// RHT_ELASTICITY limit of 16). When an insert leaves nelems > 3/4 of the
// size (rht_grow_above_75) it schedules the deferred worker; the worker
// (rht_deferred_worker) allocates a table of twice the size and rehashes
// every old bucket into it, one entry at a time, each time walking the old
// chain to its last entry and moving that entry to the new chain's head
// (rhashtable_rehash_one), then publishes the new table and frees the old
// one after a grace period. With automatic_shrinking a removal that leaves
// nelems < 3/10 of the size schedules a shrink to roundup_pow_of_two(
// nelems * 3 / 2). If the worker cannot allocate, it keeps the old table
// and reschedules itself; an insert into a table above 100% load takes the
// slow path, which tries a GFP_ATOMIC allocation itself and fails the
// insert with -ENOMEM if that fails too.
//
// kpsim runs the deferred worker as soon as it is scheduled, at the end of
// the insert or removal that scheduled it (another CPU picks up the work
// while the registering task carries on), and counts it in its own phase,
// rht_deferred_worker. Every chain node the kernel would load is counted.
package rhashtable

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"sort"

	"github.com/kpsim/kpsim/sim"
)

// Constants of lib/rhashtable.c and include/linux/rhashtable.h.
const (
	HashDefaultSize = 64 // HASH_DEFAULT_SIZE
	HashMinSize     = 4  // HASH_MIN_SIZE
	Elasticity      = 16 // RHT_ELASTICITY
	jhashInitval    = 0xdeadbeef

	// BucketTableHeaderBytes is sizeof(struct bucket_table) without its
	// buckets[] on x86-64 without lockdep: size, nest, hash_rnd (4 bytes
	// each, padded), walkers (16), rcu (16), future_tbl (8).
	BucketTableHeaderBytes = 56
	// RhashtableBytes is sizeof(struct rhashtable) on x86-64 without
	// lockdep: tbl, key_len, max_elems, params (40), rhlist, run_work
	// (32), mutex (32), lock (4), nelems (4), padded.
	RhashtableBytes = 136
)

// Errors. ErrNoMem is the kernel's -ENOMEM from the insert slow path.
var (
	ErrExists = errors.New("rhashtable: key already present (-EEXIST)")
	ErrNoMem  = errors.New("rhashtable: insert needs a bigger table and none could be allocated (-ENOMEM)")
	ErrNoEnt  = errors.New("rhashtable: object not in the table (-ENOENT)")
)

// FaultTableAlloc makes bucket_table_alloc fail: in the deferred worker the
// old table is kept and the worker rescheduled; on the insert slow path the
// insert fails with -ENOMEM.
var FaultTableAlloc = sim.NewFaultPoint("rhashtable.tbl.alloc",
	"bucket_table_alloc fails: the deferred worker keeps the old table and reschedules; an insert above 100% load then fails with -ENOMEM")

// PhaseWorker holds the deferred worker's resizing work.
var PhaseWorker = sim.NewPhase("rht_deferred_worker", "rhashtable's deferred worker: table allocation and rehash of every entry").
	In(sim.Kworker, "lib/rhashtable.c: INIT_WORK(&ht->run_work, rht_deferred_worker); an insert past 75% load calls schedule_work(&ht->run_work)")

// Params are the rhashtable_params fields that change the model.
type Params struct {
	NelemHint          uint // nelem_hint
	MinSize            uint // min_size (0: HASH_MIN_SIZE)
	MaxSize            uint // max_size (0: none)
	AutomaticShrinking bool // automatic_shrinking
}

// KprobeParams are the parameters a kprobes conversion would pass: the
// 8-byte address key (jhash2 over two words), automatic shrinking so that
// unregistering a big batch gives the memory back, no size hint (the number
// of probes is not known at boot).
var KprobeParams = Params{AutomaticShrinking: true}

type bucketTable[T any] struct {
	size    uint32
	hashRnd uint32
	// Each chain oldest first: the head (newest) is the last element.
	keys [][]uint64
	objs [][]T
}

// Table is a modelled rhashtable keyed by a uint64 (a kprobe's address).
// The zero value is not usable; call New.
type Table[T any] struct {
	p       Params
	key     func(T) uint64
	tbl     *bucketTable[T]
	nelems  int
	Faults  *sim.Faults // the fault plan bucket_table_alloc consults (may be nil)
	rnd     uint64      // get_random_u32's stream (deterministic)
	pending bool        // run_work is queued

	// Grows, Shrinks: completed resizes; FailedAllocs: bucket tables that
	// could not be allocated. Simulator-side statistics.
	Grows, Shrinks, FailedAllocs int
	peakBytes                    int64
}

// New models rhashtable_init: the first table is sized from the hint or
// HASH_DEFAULT_SIZE. The initial allocation cannot fail (__GFP_NOFAIL
// retry). seed makes every table's hash_rnd deterministic.
func New[T any](p Params, key func(T) uint64, faults *sim.Faults, seed uint64, c *sim.Counters) *Table[T] {
	t := &Table[T]{p: p, key: key, Faults: faults, rnd: seed}
	if t.p.MinSize != 0 {
		t.p.MinSize = roundupPow2(t.p.MinSize)
	}
	t.p.MinSize = max(t.p.MinSize, HashMinSize)
	if t.p.MaxSize != 0 {
		t.p.MaxSize = 1 << (bits.Len(t.p.MaxSize) - 1) // rounddown_pow_of_two
	}
	size := uint(HashDefaultSize)
	if p.NelemHint != 0 {
		size = roundupPow2(p.NelemHint * 4 / 3)
	}
	size = max(size, t.p.MinSize)
	t.tbl = t.allocTable(uint32(size), c)
	t.notePeak(0)
	return t
}

func roundupPow2(n uint) uint {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(n-1)
}

// getRandomU32 stands in for get_random_u32: a splitmix64 stream.
func (t *Table[T]) getRandomU32() uint32 {
	t.rnd += 0x9e3779b97f4a7c15
	z := t.rnd
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return uint32(z ^ z>>31)
}

// allocTable models bucket_table_alloc's success path: kvzalloc and
// INIT_RHT_NULLS_HEAD of every bucket (counted), a fresh hash_rnd.
func (t *Table[T]) allocTable(size uint32, c *sim.Counters) *bucketTable[T] {
	c.Inc(opTableAlloc)
	c.Add(opBucketInit, uint64(size))
	return &bucketTable[T]{size: size, hashRnd: t.getRandomU32(), keys: make([][]uint64, size), objs: make([][]T, size)}
}

func rol32(x uint32, k uint) uint32 { return x<<k | x>>(32-k) }

// Jhash2Key models rhashtable_jhash2 (jhash2 of include/linux/jhash.h) of
// an 8-byte key: two u32 words, little-endian, seeded by initval.
func Jhash2Key(key uint64, initval uint32) uint32 {
	a := uint32(jhashInitval) + 2<<2 + initval
	b, c := a, a
	b += uint32(key >> 32)
	a += uint32(key)
	return JhashFinal(a, b, c)
}

// Jhash models include/linux/jhash.h:jhash over the bytes of s, the words
// loaded little-endian (__get_unaligned_cpu32 on x86).
func Jhash(s string, initval uint32) uint32 {
	a := uint32(jhashInitval) + uint32(len(s)) + initval
	b, c := a, a
	for ; len(s) > 12; s = s[12:] {
		a += le32(s)
		b += le32(s[4:])
		c += le32(s[8:])
		a, b, c = jhashMix(a, b, c)
	}
	if len(s) == 0 {
		return c
	}
	var tail [12]byte
	copy(tail[:], s)
	a += binary.LittleEndian.Uint32(tail[:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	return JhashFinal(a, b, c)
}

// le32 is __get_unaligned_cpu32 on x86: four bytes, little-endian.
func le32(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// jhashMix models include/linux/jhash.h:__jhash_mix.
func jhashMix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= rol32(c, 4)
	c += b
	b -= a
	b ^= rol32(a, 6)
	a += c
	c -= b
	c ^= rol32(b, 8)
	b += a
	a -= c
	a ^= rol32(c, 16)
	c += b
	b -= a
	b ^= rol32(a, 19)
	a += c
	c -= b
	c ^= rol32(b, 4)
	b += a
	return a, b, c
}

// JhashFinal models include/linux/jhash.h:__jhash_final, the final mixing
// of three 32-bit words into c (shared by every jhash form kpsim models).
func JhashFinal(a, b, c uint32) uint32 {
	c ^= b
	c -= rol32(b, 14)
	a ^= c
	a -= rol32(c, 11)
	b ^= a
	b -= rol32(a, 25)
	c ^= b
	c -= rol32(b, 16)
	a ^= c
	a -= rol32(c, 4)
	b ^= a
	b -= rol32(a, 14)
	c ^= b
	c -= rol32(b, 24)
	return c
}

// bucket models rht_key_hashfn: rht_bucket_index(tbl, jhash2(key)).
func (b *bucketTable[T]) bucket(key uint64) uint32 {
	return Jhash2Key(key, b.hashRnd) & (b.size - 1)
}

// headCost counts the extra latency of loading a bucket head from a
// bucket array too big for L1 (see opHeadL2).
func headCost(size uint32, c *sim.Counters) {
	switch bytes := uint64(size) * 8; {
	case bytes > l2Bytes:
		c.Inc(opHeadL3)
	case bytes > l1Bytes:
		c.Inc(opHeadL2)
	}
}

// Lookup models rhashtable_lookup_fast (__rhashtable_lookup): hash, load
// the bucket head, walk the chain from the head comparing keys. Counted:
// one rhashtable.lookup, one rhashtable.visit per node compared. kpsim's
// worker never leaves a future_tbl behind, so the second table walk of
// __rhashtable_lookup never happens.
func (t *Table[T]) Lookup(key uint64, c *sim.Counters) (T, bool) {
	c.Inc(opLookup)
	headCost(t.tbl.size, c)
	h := t.tbl.bucket(key)
	keys := t.tbl.keys[h]
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i] == key {
			c.Add(opVisit, uint64(len(keys)-i))
			return t.tbl.objs[h][i], true
		}
	}
	c.Add(opVisit, uint64(len(keys)))
	var zero T
	return zero, false
}

// Insert models rhashtable_insert_fast: the walk of the whole chain
// (duplicate check, elasticity), then a head insert; above 75% load the
// deferred worker is scheduled (and, in kpsim, run). A chain that would
// exceed RHT_ELASTICITY or a table above 100% load takes the slow path
// (rhashtable_insert_slow), which needs a bigger table at once: it
// allocates one (GFP_ATOMIC, may fail: ErrNoMem) and rehashes into it.
func (t *Table[T]) Insert(obj T, c *sim.Counters) error {
	key := t.key(obj)
	c.Inc(opInsert)
	headCost(t.tbl.size, c)
	h := t.tbl.bucket(key)
	keys := t.tbl.keys[h]
	c.Add(opVisit, uint64(len(keys)))
	for _, k := range keys {
		if k == key {
			return ErrExists
		}
	}
	if Elasticity-len(keys) <= 0 || (t.nelems > int(t.tbl.size) && t.growable()) {
		// slow path: rhashtable_insert_one returns -EAGAIN, and
		// rhashtable_insert_rehash allocates a bigger table at once.
		if err := t.insertRehash(c); err != nil {
			return err
		}
		h = t.tbl.bucket(key)
		c.Inc(opInsert)
		headCost(t.tbl.size, c)
		c.Add(opVisit, uint64(len(t.tbl.keys[h])))
	}
	t.tbl.keys[h] = append(t.tbl.keys[h], key)
	t.tbl.objs[h] = append(t.tbl.objs[h], obj)
	t.nelems++
	if t.growAbove75() {
		t.scheduleWork(c)
	} else if t.pending {
		t.runWorker(c) // a worker rescheduled after a failure retries
	}
	return nil
}

func (t *Table[T]) growable() bool {
	return t.p.MaxSize == 0 || uint(t.tbl.size) < t.p.MaxSize
}

func (t *Table[T]) growAbove75() bool {
	return t.nelems > int(t.tbl.size/4*3) && t.growable()
}

func (t *Table[T]) shrinkBelow30() bool {
	return t.nelems < int(t.tbl.size*3/10) && uint(t.tbl.size) > t.p.MinSize
}

// insertRehash models rhashtable_insert_rehash with kpsim's worker (which
// never leaves a future table): a table of twice the size if above 75%,
// else the same size, allocated GFP_ATOMIC; on failure the worker is
// scheduled to retry and the insert fails with -ENOMEM.
func (t *Table[T]) insertRehash(c *sim.Counters) error {
	size := t.tbl.size
	if t.growAbove75() {
		size *= 2
	}
	if t.Faults.Fail(FaultTableAlloc) {
		t.FailedAllocs++
		t.pending = true
		return ErrNoMem
	}
	prev := c.Enter(PhaseWorker)
	t.rehash(t.allocTable(size, c), c)
	c.Enter(prev)
	if size > t.tbl.size {
		t.Grows++
	}
	return nil
}

func (t *Table[T]) scheduleWork(c *sim.Counters) {
	t.pending = true
	t.runWorker(c)
}

// runWorker models rht_deferred_worker: grow to twice the size above 75%
// load, else shrink if enabled and below 30%. A failed allocation keeps
// the old table and leaves the work queued (schedule_work again).
func (t *Table[T]) runWorker(c *sim.Counters) {
	prev := c.Enter(PhaseWorker)
	defer c.Enter(prev)
	c.Inc(opWorker)
	var size uint32
	switch {
	case t.growAbove75():
		size = t.tbl.size * 2
	case t.p.AutomaticShrinking && t.shrinkBelow30():
		// rhashtable_shrink
		s := uint(0)
		if t.nelems > 0 {
			s = roundupPow2(uint(t.nelems) * 3 / 2)
		}
		s = max(s, t.p.MinSize)
		if uint(t.tbl.size) <= s {
			t.pending = false
			return
		}
		size = uint32(s)
	default:
		t.pending = false
		return
	}
	if t.Faults.Fail(FaultTableAlloc) {
		t.FailedAllocs++
		return // -ENOMEM: schedule_work(&ht->run_work) again
	}
	grow := size > t.tbl.size
	t.rehash(t.allocTable(size, c), c)
	if grow {
		t.Grows++
	} else {
		t.Shrinks++
	}
	t.pending = false
}

// rehash models rhashtable_rehash_table: every old bucket in order
// (rhashtable_rehash_chain), each chain emptied by rhashtable_rehash_one,
// which walks to the chain's last (oldest) entry and moves it to the head
// of its new bucket: a chain of L entries costs L+(L-1)+...+1 node visits.
// Then the new table is published and the old one freed by call_rcu.
func (t *Table[T]) rehash(nt *bucketTable[T], c *sim.Counters) {
	old := t.tbl
	t.notePeak(int64(nt.size))
	for b := range old.keys {
		c.Inc(opRehashBucket)
		keys, objs := old.keys[b], old.objs[b]
		// n moves, each first touching its (cold) entry; the other
		// n(n-1)/2 of the n(n+1)/2 node loads re-walk lines just loaded.
		n := uint64(len(keys))
		c.Add(opRehashMove, n)
		c.Add(opRehashVisit, n*(n-1)/2)
		for i, k := range keys { // oldest first, as rehash_one takes them
			h := nt.bucket(k)
			nt.keys[h] = append(nt.keys[h], k)
			nt.objs[h] = append(nt.objs[h], objs[i])
		}
	}
	t.tbl = nt
}

// Remove models rhashtable_remove_fast: walk the chain from the head to
// the object (counted), unlink it; below 30% load with automatic shrinking
// the worker is scheduled.
func (t *Table[T]) Remove(key uint64, c *sim.Counters) error {
	c.Inc(opRemove)
	headCost(t.tbl.size, c)
	h := t.tbl.bucket(key)
	keys := t.tbl.keys[h]
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i] == key {
			c.Add(opVisit, uint64(len(keys)-i))
			t.tbl.keys[h] = append(keys[:i], keys[i+1:]...)
			t.tbl.objs[h] = append(t.tbl.objs[h][:i], t.tbl.objs[h][i+1:]...)
			t.nelems--
			if t.p.AutomaticShrinking && t.shrinkBelow30() {
				t.scheduleWork(c)
			} else if t.pending {
				t.runWorker(c)
			}
			return nil
		}
	}
	c.Add(opVisit, uint64(len(keys)))
	return ErrNoEnt
}

// Replace models rhashtable_replace_fast(old, new): walk the chain to old
// (counted), put new in its place (same key, same chain position).
func (t *Table[T]) Replace(key uint64, obj T, c *sim.Counters) error {
	c.Inc(opReplace)
	headCost(t.tbl.size, c)
	h := t.tbl.bucket(key)
	keys := t.tbl.keys[h]
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i] == key {
			c.Add(opVisit, uint64(len(keys)-i))
			t.tbl.objs[h][i] = obj
			return nil
		}
	}
	c.Add(opVisit, uint64(len(keys)))
	return ErrNoEnt
}

// Len returns nelems.
func (t *Table[T]) Len() int { return t.nelems }

// Size returns the current table's number of buckets.
func (t *Table[T]) Size() int { return int(t.tbl.size) }

// ChainLen returns bucket b's chain length. Simulator-side.
func (t *Table[T]) ChainLen(b int) int { return len(t.tbl.keys[b]) }

// Bytes returns the memory of the struct rhashtable and its current bucket
// table (the entries' rhash_head lives in the objects, one word each).
func (t *Table[T]) Bytes() int64 { return tableBytes(int64(t.tbl.size)) }

// PeakBytes returns the most memory the index held at once: during a
// rehash the old and the new table both exist.
func (t *Table[T]) PeakBytes() int64 { return t.peakBytes }

func tableBytes(size int64) int64 {
	return RhashtableBytes + BucketTableHeaderBytes + 8*size
}

func (t *Table[T]) notePeak(extra int64) {
	b := t.Bytes()
	if extra > 0 {
		b += BucketTableHeaderBytes + 8*extra
	}
	t.peakBytes = max(t.peakBytes, b)
}

// Entries returns every object in key order. Simulator-side, uncounted.
func (t *Table[T]) Entries() []T {
	type kv struct {
		k uint64
		v T
	}
	all := make([]kv, 0, t.nelems)
	for b := range t.tbl.keys {
		for i, k := range t.tbl.keys[b] {
			all = append(all, kv{k, t.tbl.objs[b][i]})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].k < all[j].k })
	out := make([]T, len(all))
	for i := range all {
		out[i] = all[i].v
	}
	return out
}
