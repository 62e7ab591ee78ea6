package kprobes

import (
	"math/big"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

func TestHashPtrKnownValues(t *testing.T) {
	for _, tc := range []struct {
		addr uint64
		want uint32
	}{
		{0xffffffff81000000, 1},
		{0xffffffff81000001, 25},
		{0, 0},
	} {
		if got := HashPtr(tc.addr, KprobeHashBits); got != tc.want {
			t.Errorf("HashPtr(%#x, 6) = %d, want %d", tc.addr, got, tc.want)
		}
	}
}

// kernelBucket recomputes hash_ptr(addr, 6) with arbitrary-precision
// arithmetic: (addr * GOLDEN_RATIO_64) mod 2^64, top 6 bits.
func kernelBucket(addr uint64) int {
	p := new(big.Int).Mul(new(big.Int).SetUint64(addr), new(big.Int).SetUint64(0x61C8864680B583EB))
	p.Mod(p, new(big.Int).Lsh(big.NewInt(1), 64))
	p.Rsh(p, 58)
	return int(p.Int64())
}

func TestChainLengthsMatchKernelHash(t *testing.T) {
	rng := sim.NewRNG(1, "kprobes.test.chains")
	for _, n := range []int{1, 64, 1000, 20000} {
		for _, withTree := range []bool{false, true} {
			r := NewRegistry(withTree)
			var want [KprobeTableSize]int
			seen := map[uint64]bool{}
			for len(seen) < n {
				// Function entries a few bytes apart, as in kernel text.
				a := uint64(base) + uint64(rng.IntN(1<<24))
				if seen[a] {
					continue
				}
				seen[a] = true
				want[kernelBucket(a)]++
				if err := r.Insert(&Kprobe{Addr: a}, nil); err != nil {
					t.Fatal(err)
				}
			}
			for b := range KprobeTableSize {
				if got := r.ChainLen(b); got != want[b] {
					t.Fatalf("n=%d tree=%v: bucket %d has %d nodes, kernel hash puts %d there", n, withTree, b, got, want[b])
				}
			}
			if r.Len() != n {
				t.Fatalf("Len = %d, want %d", r.Len(), n)
			}
		}
	}
}

func TestChainNewestFirstAndReplaceInPlace(t *testing.T) {
	// Find four addresses in one bucket.
	var same []uint64
	for a := uint64(base); len(same) < 4; a++ {
		if HashPtr(a, KprobeHashBits) == HashPtr(base, KprobeHashBits) {
			same = append(same, a)
		}
	}
	r, ps := build(t, true, same...)
	b := int(HashPtr(base, KprobeHashBits))
	chain := r.Chain(b)
	for i, p := range chain {
		if want := ps[len(ps)-1-i]; p != want {
			t.Fatalf("chain[%d] = %#x, want %#x (newest first)", i, p.Addr, want.Addr)
		}
	}
	// A second probe at same[1] (chain position 3) makes an aggregator that
	// takes the same position.
	q := &Kprobe{Addr: same[1]}
	if err := register(r, q, nil); err != nil {
		t.Fatal(err)
	}
	chain = r.Chain(b)
	if ap := chain[2]; !ap.IsAggr() || ap.Addr != same[1] || ap.NumChildren() != 2 {
		t.Fatalf("chain[2] = %+v, want the aggregator at %#x with 2 children", ap, same[1])
	}
	if got := r.Chain(b)[2].Children(); got[0] != q || got[1] != ps[1] {
		t.Fatalf("aggregator list = %v, want [new, old] (list_add_rcu adds at the head)", addrsOf(got))
	}
	if r.Len() != 4 {
		t.Fatalf("Len = %d, want 4", r.Len())
	}
	// Tree has the aggregator too.
	it := r.Range(same[1], same[1]+1, nil)
	if !it.Next() || it.Probe() != chain[2] {
		t.Fatalf("tree does not hold the aggregator")
	}
}

func TestGetKprobeCounts(t *testing.T) {
	rng := sim.NewRNG(2, "kprobes.test.getcounts")
	r := NewRegistry(false)
	for r.Len() < 5000 {
		_ = r.Insert(&Kprobe{Addr: uint64(base) + uint64(rng.IntN(1<<22))}, nil)
	}
	c := sim.NewCounters(false)
	// Hits: position j from the head costs j visits.
	for b := range KprobeTableSize {
		for j, p := range r.Chain(b) {
			before := c.Total(opHashVisit)
			if got := r.GetKprobe(p.Addr, c); got != p {
				t.Fatalf("GetKprobe(%#x) = %v, want %v", p.Addr, got, p)
			}
			if d := c.Total(opHashVisit) - before; d != uint64(j+1) {
				t.Fatalf("hit at position %d cost %d visits", j+1, d)
			}
		}
	}
	// Misses cost the whole chain.
	calls := uint64(r.Len())
	for range 2000 {
		a := uint64(base) + uint64(rng.IntN(1<<22))
		if r.GetKprobe(a, nil) != nil {
			continue
		}
		before := c.Total(opHashVisit)
		r.GetKprobe(a, c)
		calls++
		if d, want := c.Total(opHashVisit)-before, uint64(r.ChainLen(kernelBucket(a))); d != want {
			t.Fatalf("miss at %#x cost %d visits, chain length %d", a, d, want)
		}
	}
	if got := c.Total(opHashLookup); got != calls {
		t.Fatalf("kprobe.hash.lookup = %d, want one per call (%d)", got, calls)
	}
}
