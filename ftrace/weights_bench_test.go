package ftrace

import (
	"math/rand/v2"
	"testing"
)

// The micro-benchmarks behind the weights in weights.go. Each runs the
// modelled kernel memory pattern at the kernel's sizes (R ≈ 55k records of
// 16 bytes in groups of up to 32768, filter hashes of up to 50k 32-byte
// entries in 2^12 buckets); ns/op × 2.6 GHz gives the weight.
//   go test -run '^$' -bench Weight -count 5 ./ftrace/

const (
	benchR       = 55000
	benchEntries = 50000
)

type benchRec struct{ ip, flags uint64 }

type benchPage struct {
	next    *benchPage
	records []benchRec
	index   int
}

func benchRecords(n int) []benchRec {
	recs := make([]benchRec, n)
	ip := uint64(0xffffffff81000000)
	for i := range recs {
		ip += 64 + uint64(i%7)*48
		recs[i] = benchRec{ip: ip}
	}
	return recs
}

// BenchmarkWeightGroupVisit: lookup_rec's group loop over the default
// image's groups (32768/16384/4096/2048-sized blocks), a miss in every
// group (key above the last record): per group, pg->index, records[0].ip,
// records[index-1].ip and the compares. Lines stay cache-hot across the
// many ftrace_location calls of one registration.
func BenchmarkWeightGroupVisit(b *testing.B) {
	recs := benchRecords(benchR)
	var head *benchPage
	var tail **benchPage = &head
	off := 0
	for _, n := range []int{32768, 16384, 4096, 1752} {
		pg := &benchPage{records: recs[off : off+n], index: n}
		off += n
		*tail = pg
		tail = &pg.next
	}
	key := recs[benchR-1].ip + 100
	b.ResetTimer()
	hits := 0
	for i := 0; i < b.N; {
		for pg := head; pg != nil; pg = pg.next {
			i++
			if pg.index == 0 || key < pg.records[0].ip || key >= pg.records[pg.index-1].ip+5 {
				continue
			}
			hits++
		}
	}
	_ = hits
}

// BenchmarkWeightBsearchProbe: one step of lib/bsearch.c with
// ftrace_cmp_recs over a 32768-record (512 KB) group, random keys.
func BenchmarkWeightBsearchProbe(b *testing.B) {
	recs := benchRecords(32768)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 1<<16)
	for i := range keys {
		keys[i] = recs[rng.IntN(len(recs))].ip + uint64(rng.IntN(40))
	}
	b.ResetTimer()
	found := 0
	for i := 0; i < b.N; {
		k := keys[i&(1<<16-1)]
		base, num := 0, len(recs)
		for num > 0 {
			i++
			p := base + num>>1
			r := &recs[p]
			if k < r.ip {
			} else if k >= r.ip+5 {
				base = p + 1
				num--
			} else {
				found++
				break
			}
			num >>= 1
		}
	}
	_ = found
}

// BenchmarkWeightRecVisit: do_for_each_ftrace_rec over 55k records with
// the skip_record flag test (sequential, prefetch-friendly).
func BenchmarkWeightRecVisit(b *testing.B) {
	recs := benchRecords(benchR)
	for i := range recs {
		if i%97 == 0 {
			recs[i].flags = 1 << 25
		}
	}
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		r := &recs[i%benchR]
		if r.flags&(1<<25) != 0 && r.flags&(1<<31) == 0 {
			continue
		}
		n++
	}
	_ = n
}

// BenchmarkWeightReplaceCheck: ftrace_test_record → ftrace_check_record
// on every record (count test, ENABLED/REGS/TRAMP compares), sequential.
func BenchmarkWeightReplaceCheck(b *testing.B) {
	recs := benchRecords(benchR)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		r := &recs[i%benchR]
		f := r.flags
		if f&(1<<25) != 0 && f&(1<<31) == 0 {
			continue
		}
		var flag uint64
		if f&RefMax != 0 {
			flag = 1 << 31
			if (f&(1<<30) == 0) != (f&(1<<29) == 0) {
				flag |= 1 << 30
			}
			if (f&(1<<28) == 0) != (f&(1<<27) == 0) {
				flag |= 1 << 28
			}
		}
		if f&(1<<31) == flag {
			continue
		}
		n++
	}
	_ = n
}

// benchHash is an ftrace_hash: bucket heads and scattered 32-byte entries
// (index-linked so the garbage collector does not distort the walk).
type benchEntry struct {
	next uint32
	_    uint32 // pprev
	ip   uint64
	_    [2]uint64 // direct, padding to the 32-byte kmalloc object
}

func benchHash(n, bits int) (heads []uint32, ents []benchEntry, ips []uint64) {
	rng := rand.New(rand.NewPCG(3, 4))
	heads = make([]uint32, 1<<bits)
	ents = make([]benchEntry, n+1) // 0 is nil
	perm := rng.Perm(n)            // scatter entries like kmalloc-32 objects
	recs := benchRecords(n)
	for i := 0; i < n; i++ {
		e := uint32(perm[i] + 1)
		ents[e].ip = recs[i].ip
		j := hashKey(recs[i].ip, bits)
		ents[e].next = heads[j]
		heads[j] = e
		ips = append(ips, recs[i].ip)
	}
	return heads, ents, ips
}

// BenchmarkWeightHashLookup: ftrace_lookup_ip's fixed part on a 4096-bucket
// hash: hash_64 (imul + shift) and the bucket head load, for ips whose
// bucket is empty.
func BenchmarkWeightHashLookup(b *testing.B) {
	heads := make([]uint32, 1<<HashMaxBits)
	recs := benchRecords(benchR)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if heads[hashKey(recs[i%benchR].ip, HashMaxBits)] != 0 {
			n++
		}
	}
	_ = n
}

// BenchmarkWeightHashNode: chain nodes compared on a 50k-entry hash in
// 4096 buckets (chains ≈ 12): one dependent load of a scattered 32-byte
// ftrace_func_entry per node, for a walk over all records' lookups.
func BenchmarkWeightHashNode(b *testing.B) {
	heads, ents, _ := benchHash(benchEntries, HashMaxBits)
	recs := benchRecords(benchR)
	b.ResetTimer()
	hit := 0
	for i := 0; i < b.N; {
		ip := recs[(i*7)%benchR].ip + 1 // miss: walk the whole chain
		for e := heads[hashKey(ip, HashMaxBits)]; e != 0; e = ents[e].next {
			i++
			if ents[e].ip == ip {
				hit++
				break
			}
		}
	}
	_ = hit
}

// BenchmarkWeightHashBucket: iterating a whole hash's bucket array (8-byte
// heads, sequential), as alloc_and_copy_ftrace_hash / dup_hash do.
func BenchmarkWeightHashBucket(b *testing.B) {
	heads, _, _ := benchHash(1000, HashDefaultBits)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if heads[i&(1<<HashDefaultBits-1)] != 0 {
			n++
		}
	}
	_ = n
}

// BenchmarkWeightBucketInit: kcalloc zeroing of the 8 KB (1024-bucket)
// array of alloc_ftrace_hash(FTRACE_HASH_DEFAULT_BITS); reported per
// bucket (ns/bucket).
func BenchmarkWeightBucketInit(b *testing.B) {
	bufs := make([][]uint64, 64) // rotate like fresh kmalloc-8k objects
	for i := range bufs {
		bufs[i] = make([]uint64, 1<<HashDefaultBits)
	}
	var sink uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := bufs[i&63]
		clear(buf)
		sink += buf[i&(len(buf)-1)]
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(1<<HashDefaultBits), "ns/bucket")
	_ = sink
}

// BenchmarkWeightHashCopy: alloc_and_copy_ftrace_hash per entry: follow the
// source chain (dependent load), pop a kmalloc-32 object from a per-CPU
// freelist (SLUB fast path: load the freelist head's next pointer from the
// object itself), fill it, hash_64 and hlist_add_head into a 1024-bucket
// array.
func BenchmarkWeightHashCopy(b *testing.B) {
	heads, ents, _ := benchHash(benchEntries, HashMaxBits)
	// Freelist threaded through a scattered object pool.
	rng := rand.New(rand.NewPCG(5, 6))
	pool := make([]benchEntry, benchEntries+1)
	perm := rng.Perm(benchEntries)
	for i := 0; i < benchEntries-1; i++ {
		pool[perm[i]+1].next = uint32(perm[i+1] + 1)
	}
	free := uint32(perm[0] + 1)
	dst := make([]uint32, 1<<HashDefaultBits)
	b.ResetTimer()
	for i := 0; i < b.N; {
		for j := 0; j < len(heads) && i < b.N; j++ {
			for e := heads[j]; e != 0 && i < b.N; e = ents[e].next {
				i++
				o := free
				if o == 0 {
					for k := 0; k < benchEntries-1; k++ {
						pool[perm[k]+1].next = uint32(perm[k+1] + 1)
					}
					pool[perm[benchEntries-1]+1].next = 0
					o = uint32(perm[0] + 1)
					clear(dst)
				}
				free = pool[o].next
				pool[o].ip = ents[e].ip
				h := hashKey(ents[e].ip, HashDefaultBits)
				pool[o].next = dst[h]
				dst[h] = o
			}
		}
	}
}

// BenchmarkWeightHashMove: dup_hash per entry: hlist_del_rcu from the
// source chain (the entry's own line), hash_64, hlist_add_head into the
// destination (4096 buckets).
func BenchmarkWeightHashMove(b *testing.B) {
	heads, ents, _ := benchHash(benchEntries, HashDefaultBits)
	dst := make([]uint32, 1<<HashMaxBits)
	b.ResetTimer()
	for i := 0; i < b.N; {
		for j := range heads {
			for e := heads[j]; e != 0 && i < b.N; {
				i++
				next := ents[e].next
				heads[j] = next
				h := hashKey(ents[e].ip, HashMaxBits)
				ents[e].next = dst[h]
				dst[h] = e
				e = next
			}
		}
		heads, dst = dst, make([]uint32, 1<<HashMaxBits)
	}
}

// BenchmarkWeightHashFree: ftrace_hash_clear per entry: hlist_del, kfree
// (SLUB fast path: store the freelist head into the object, make it the
// head).
func BenchmarkWeightHashFree(b *testing.B) {
	heads, ents, _ := benchHash(benchEntries, HashMaxBits)
	b.ResetTimer()
	var free uint32
	for i := 0; i < b.N; {
		for j := range heads {
			for e := heads[j]; e != 0 && i < b.N; {
				i++
				next := ents[e].next
				ents[e].next = free
				free = e
				e = next
			}
		}
		// Rebuild for the next round (outside the kernel pattern, amortised).
		b.StopTimer()
		heads, ents, _ = benchHash(benchEntries, HashMaxBits)
		b.StartTimer()
	}
}
