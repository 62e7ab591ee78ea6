package ftrace

import "slices"

// Hash constants (kernel/trace/ftrace.c, include/linux/ftrace.h).
const (
	// HashDefaultBits is FTRACE_HASH_DEFAULT_BITS: the temporary hash of
	// ftrace_set_hash has 1 << 10 buckets.
	HashDefaultBits = 10
	// HashMaxBits is FTRACE_HASH_MAX_BITS: dup_hash never goes above it.
	HashMaxBits = 12
	// FuncEntryBytes is sizeof(struct ftrace_func_entry): hlist_node 16,
	// ip 8, direct 8 (a kmalloc-32 object).
	FuncEntryBytes = 32
	// HashHeadBytes is sizeof(struct ftrace_hash) (size_bits, buckets,
	// count, flags, rcu_head).
	HashHeadBytes = 48
)

// goldenRatio64 is GOLDEN_RATIO_64 (include/linux/hash.h).
const goldenRatio64 = 0x61C8864680B583EB

// hashKey models kernel/trace/ftrace.c:ftrace_hash_key: hash_long(ip,
// bits) (= hash_64_generic on x86-64) when bits > 0, else bucket 0.
func hashKey(ip uint64, bits int) int {
	if bits == 0 {
		return 0
	}
	return int((ip * goldenRatio64) >> (64 - bits))
}

// dupHashBits is dup_hash's size: fls(count / 2), capped at
// FTRACE_HASH_MAX_BITS.
func dupHashBits(count int) int {
	return min(fls(count/2), HashMaxBits)
}

// filterHash is one ftrace_ops' filter hash as the kernel leaves it after
// ftrace_set_hash → ftrace_hash_move (dup_hash). The simulator keeps, per
// bucket t of the 1024-bucket temporary hash, the order in which a full
// iteration of the live hash (buckets ascending, chains head to tail)
// meets its entries: lists[t]. Every chain order the kernel builds follows
// from it:
//
//   - alloc_and_copy_ftrace_hash(10, H) prepends while iterating H, so the
//     temporary hash's chain t is reverse(lists[t]); a new ip is prepended.
//   - dup_hash iterates the temporary hash and prepends into 2^b' buckets.
//     With b' <= 10 chain j is the concatenation, t descending, of
//     lists[t] (new ip last); with b' > 10 chain j is lists[t] restricted
//     to j, and lists[t] becomes stable-sorted by j.
//
// So an update touches one list, except when b' grows above 10.
type filterHash struct {
	count  int
	bits   int // size_bits of the live hash; 0 for EMPTY_HASH
	lists  [1 << HashDefaultBits][]uint64
	member map[uint64]bool
	sorted int // the b' (> 10) the lists are sorted by, 0 if none

	w walkCache
}

// tBucket is the ip's bucket in a 1024-bucket hash.
func tBucket(ip uint64) int { return hashKey(ip, HashDefaultBits) }

func (h *filterHash) has(ip uint64) bool { return h.member[ip] }

// tmpChain returns (position of ip in the temporary hash's chain,
// 1-based; 0 if absent) and that chain's length.
func (h *filterHash) tmpChain(ip uint64) (pos, n int) {
	l := h.lists[tBucket(ip)]
	i := slices.Index(l, ip)
	if i < 0 {
		return 0, len(l)
	}
	return len(l) - i, len(l)
}

// add appends ip (dup_hash order) and re-derives bits.
func (h *filterHash) add(ip uint64) {
	if h.member == nil {
		h.member = map[uint64]bool{}
	}
	t := tBucket(ip)
	h.lists[t] = append(h.lists[t], ip)
	h.member[ip] = true
	h.count++
	h.resize()
	if h.bits > HashDefaultBits {
		h.sortList(t) // dup_hash puts the new ip last within its chain
	}
}

func (h *filterHash) remove(ip uint64) {
	t := tBucket(ip)
	if i := slices.Index(h.lists[t], ip); i >= 0 {
		h.lists[t] = slices.Delete(h.lists[t], i, i+1)
	}
	delete(h.member, ip)
	h.count--
	h.resize()
}

// resize sets bits as __ftrace_hash_move leaves them and applies dup_hash's
// reordering when the new size exceeds the temporary hash's 10 bits.
func (h *filterHash) resize() {
	if h.count == 0 {
		h.bits = 0 // EMPTY_HASH
		return
	}
	h.bits = dupHashBits(h.count)
	if h.bits <= HashDefaultBits {
		h.sorted = 0 // lists keep their order; a later growth re-sorts
		return
	}
	if h.sorted != h.bits {
		for t := range h.lists {
			h.sortList(t)
		}
		h.sorted = h.bits
	}
}

// sortList stable-sorts lists[t] by the live bucket (bits > 10 only).
func (h *filterHash) sortList(t int) {
	b := h.bits
	slices.SortStableFunc(h.lists[t], func(x, y uint64) int { return hashKey(x, b) - hashKey(y, b) })
}

// chainPos returns ip's 1-based position on its chain of the live hash.
func (h *filterHash) chainPos(ip uint64) int {
	t := tBucket(ip)
	if h.bits > HashDefaultBits {
		j := hashKey(ip, h.bits)
		p := 0
		for _, e := range h.lists[t] {
			if hashKey(e, h.bits) == j {
				p++
			}
			if e == ip {
				return p
			}
		}
		return 0
	}
	// Chain j = concat over t' descending (t' >> (10-bits) == j) of lists[t'].
	shift := HashDefaultBits - h.bits
	j := t >> shift
	p := 0
	for u := (j+1)<<shift - 1; u > t; u-- {
		p += len(h.lists[u])
	}
	i := slices.Index(h.lists[t], ip)
	if i < 0 {
		return 0
	}
	return p + i + 1
}

// chainLen returns the length of the live chain holding bucket key j.
func (h *filterHash) chainLen(j int) int {
	if h.count == 0 {
		return 0
	}
	if h.bits > HashDefaultBits {
		t := j >> (h.bits - HashDefaultBits)
		n := 0
		for _, e := range h.lists[t] {
			if hashKey(e, h.bits) == j {
				n++
			}
		}
		return n
	}
	shift := HashDefaultBits - h.bits
	n := 0
	for u := j << shift; u < (j+1)<<shift; u++ {
		n += len(h.lists[u])
	}
	return n
}

// lookupCost is the chain nodes one ftrace_lookup_ip(hash, ip) compares
// (0 for an empty hash, which returns before hashing).
func (h *filterHash) lookupCost(ip uint64) int {
	if h.count == 0 {
		return 0
	}
	if h.member[ip] {
		return h.chainPos(ip)
	}
	return h.chainLen(hashKey(ip, h.bits))
}

func (h *filterHash) bytes() int64 {
	if h.count == 0 {
		return 0
	}
	return HashHeadBytes + int64(8)<<h.bits + int64(h.count)*FuncEntryBytes
}

// ips returns the members in address order.
func (h *filterHash) ips() []uint64 {
	out := make([]uint64, 0, h.count)
	for ip := range h.member {
		out = append(out, ip)
	}
	slices.Sort(out)
	return out
}

// walkCache holds the sums that give the counts of the record walks over
// this hash without re-walking:
//
//	k[j]      chain length of bucket j (bits as the hash)
//	nAll[j]   non-disabled records hashing to j
//	F         Σ_j k[j]·nAll[j]: chain nodes if every record missed
//	L         records a __ftrace_hash_rec_update walk visits before its
//	          early stop (last member's position + 1)
//	cntPre[j] non-disabled records hashing to j among the first L
//	P         Σ_j k[j]·cntPre[j]
//	sumSq     Σ_j k[j]²
//
// When every member has exactly one non-disabled record, a walk over the
// first L records compares P - (sumSq - n)/2 chain nodes: members hit at
// positions 1..k[j] of their chain. Otherwise (irregular > 0) the walks
// are computed by brute force.
type walkCache struct {
	ver       uint64
	bits      int
	k         []int32
	nAll      []int32
	cntPre    []int32
	isMember  []bool
	F, P      int64
	sumSq     int64
	L         int
	preNonDis int
	irregular int
}

// walkStats is what one walk over the hash costs.
type walkStats struct {
	visits  int   // records iterated
	lookups int   // ftrace_lookup_ip calls on this hash
	nodes   int64 // chain nodes compared
}

// rebuild recomputes the cache from scratch for the current records and hash.
func (ft *Ftrace) rebuild(h *filterHash) {
	w := &h.w
	w.ver, w.bits = ft.ver, h.bits
	nb := 1 << h.bits
	w.k = make([]int32, nb)
	w.nAll = make([]int32, nb)
	w.cntPre = make([]int32, nb)
	w.isMember = make([]bool, len(ft.flat))
	w.F, w.P, w.sumSq, w.L, w.preNonDis, w.irregular = 0, 0, 0, 0, 0, 0
	for ip := range h.member {
		w.k[hashKey(ip, h.bits)]++
		p, ok := ft.posOf(ip)
		if !ok || ft.rec(int(p)).Flags&FlDisabled != 0 {
			w.irregular++
			continue
		}
		w.isMember[p] = true
		w.L = max(w.L, int(p)+1)
	}
	for _, n := range w.k {
		w.sumSq += int64(n) * int64(n)
	}
	for p := range ft.flat {
		j, ok := ft.liveBucket(p, h.bits)
		if !ok {
			continue
		}
		w.nAll[j]++
		w.F += int64(w.k[j])
		if p < w.L {
			w.pre(j, 1)
		}
	}
}

// liveBucket is the bucket of record p's ip in a hash of 2^bits buckets;
// false for a disabled record.
func (ft *Ftrace) liveBucket(p, bits int) (int, bool) {
	r := ft.rec(p)
	if r.Flags&FlDisabled != 0 {
		return 0, false
	}
	return hashKey(r.IP, bits), true
}

// pre moves a live record of bucket j into (sign 1) or out of (sign -1)
// the prefix sums.
func (w *walkCache) pre(j, sign int) {
	w.cntPre[j] += int32(sign)
	w.P += int64(sign) * int64(w.k[j])
	w.preNonDis += sign
}

// sync brings the cache up to date: from scratch when the record list or
// the hash size changed, else nothing (add/remove keep it current).
func (ft *Ftrace) sync(h *filterHash) {
	if h.w.ver != ft.ver || h.w.bits != h.bits || h.w.k == nil {
		ft.rebuild(h)
	}
}

// cacheAdd updates the cache for ip just added (h.bits unchanged).
func (ft *Ftrace) cacheAdd(h *filterHash, ip uint64) {
	w := &h.w
	j := hashKey(ip, h.bits)
	w.sumSq += 2*int64(w.k[j]) + 1
	w.k[j]++
	w.F += int64(w.nAll[j])
	w.P += int64(w.cntPre[j])
	p, ok := ft.posOf(ip)
	if !ok || ft.rec(int(p)).Flags&FlDisabled != 0 {
		w.irregular++
		return
	}
	w.isMember[p] = true
	for q := w.L; q <= int(p); q++ {
		if j, ok := ft.liveBucket(q, h.bits); ok {
			w.pre(j, 1)
		}
	}
	w.L = max(w.L, int(p)+1)
}

// cacheRemove updates the cache for ip just removed (h.bits unchanged).
func (ft *Ftrace) cacheRemove(h *filterHash, ip uint64) {
	w := &h.w
	j := hashKey(ip, h.bits)
	w.k[j]--
	w.sumSq -= 2*int64(w.k[j]) + 1
	w.F -= int64(w.nAll[j])
	w.P -= int64(w.cntPre[j])
	p, ok := ft.posOf(ip)
	if !ok || ft.rec(int(p)).Flags&FlDisabled != 0 {
		w.irregular--
		return
	}
	w.isMember[p] = false
	if int(p)+1 != w.L {
		return
	}
	newL := int(p)
	for newL > 0 && !w.isMember[newL-1] {
		newL--
	}
	for q := newL; q < w.L; q++ {
		if j, ok := ft.liveBucket(q, h.bits); ok {
			w.pre(j, -1)
		}
	}
	w.L = newL
}

// change applies add or remove of ip to h, keeping the cache current.
func (ft *Ftrace) change(h *filterHash, ip uint64, add bool) {
	ft.sync(h)
	before := h.bits
	if add {
		h.add(ip)
	} else {
		h.remove(ip)
	}
	if h.bits != before {
		ft.rebuild(h)
		return
	}
	if add {
		ft.cacheAdd(h, ip)
	} else {
		ft.cacheRemove(h, ip)
	}
}

// recUpdateWalk is the walk of __ftrace_hash_rec_update(ops, filter_hash=1)
// over a non-empty filter hash: every record until all members have been
// matched ("if (!all && count == hash->count) return"), each non-skipped
// record looked up in the filter hash (the notrace hash is empty and
// ftrace_lookup_ip returns before hashing).
func (ft *Ftrace) recUpdateWalk(h *filterHash) walkStats {
	if h.count == 0 {
		return walkStats{}
	}
	ft.sync(h)
	w := &h.w
	if w.irregular > 0 {
		return ft.bruteWalk(h, len(ft.flat))
	}
	return walkStats{visits: w.L, lookups: w.preNonDis, nodes: w.P - (w.sumSq-int64(h.count))/2}
}

// fullWalk is a walk over every record with one lookup in h per
// non-disabled record (__ftrace_hash_update_ipmodify).
func (ft *Ftrace) fullWalk(h *filterHash) walkStats {
	if h.count == 0 {
		return walkStats{visits: len(ft.flat)}
	}
	ft.sync(h)
	w := &h.w
	if w.irregular > 0 {
		return ft.bruteWalk(h, len(ft.flat))
	}
	return walkStats{visits: len(ft.flat), lookups: ft.nonDis, nodes: w.F - (w.sumSq-int64(h.count))/2}
}

// bruteWalk walks the first n records doing what the kernel does; it is the
// fallback for irregular hashes and the tests' oracle.
func (ft *Ftrace) bruteWalk(h *filterHash, n int) walkStats {
	s := walkStats{visits: n}
	for p := 0; p < n; p++ {
		r := ft.rec(p)
		if r.Flags&FlDisabled != 0 || h.count == 0 {
			continue
		}
		s.lookups++
		s.nodes += int64(h.lookupCost(r.IP))
	}
	return s
}

// bruteRecUpdate is the oracle for recUpdateWalk: the kernel's loop,
// literally.
func (ft *Ftrace) bruteRecUpdate(h *filterHash) walkStats {
	var s walkStats
	if h.count == 0 {
		return s
	}
	matched := 0
	for p := range ft.flat {
		r := ft.rec(p)
		s.visits++
		if r.Flags&FlDisabled != 0 {
			continue
		}
		s.lookups++
		s.nodes += int64(h.lookupCost(r.IP))
		if h.member[r.IP] {
			matched++
			if matched == h.count {
				break
			}
		}
	}
	return s
}
