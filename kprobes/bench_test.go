package kprobes

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// benchRegistry registers n probes at distinct addresses spread over a
// 64 MB text range (function entries a few hundred bytes apart).
func benchRegistry(b *testing.B, n int, withTree bool) (*Registry, []uint64) {
	b.Helper()
	return benchRegistryWith(b, n, withTree, false)
}

// benchRegistryWith is benchRegistry with the chain walks (walk) or the
// fast table.
func benchRegistryWith(b *testing.B, n int, withTree, walk bool) (*Registry, []uint64) {
	b.Helper()
	rng := sim.NewRNG(uint64(n), "kprobes.bench")
	var ss sim.Switches
	if withTree {
		ss = ss.With(sim.KprobeTree)
	}
	r := NewRegistryWith(ss, SimOptions{Walk: walk})
	addrs := make([]uint64, 0, n)
	for r.Len() < n {
		a := base + uint64(rng.IntN(64<<20))
		if r.Insert(&Kprobe{Addr: a}, nil) == nil {
			addrs = append(addrs, a)
		}
	}
	return r, addrs
}

// Simulator speed of the three ways to ask "is there a probe at X": a
// get_kprobe miss (walks a whole chain, ~N/64 nodes), a tree descent, and
// one step of the monotonic cursor along an instruction walk. Counting is
// on, as in a run.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{20000, 50000} {
		r, addrs := benchRegistry(b, n, true)
		var misses []uint64 // neighbours of probes that are not probed
		for _, a := range addrs {
			if r.GetKprobe(a+1, nil) == nil {
				misses = append(misses, a+1)
			}
		}
		c := sim.NewCounters(false)
		b.Run(fmt.Sprintf("get_kprobe_miss/N=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				a := misses[i%len(misses)]
				i++
				if r.GetKprobe(a, c) != nil {
					b.Fatal("hit")
				}
			}
			b.ReportMetric(float64(c.Total(opHashVisit))/float64(c.Total(opHashLookup)), "visits/lookup")
		})
		c.Reset()
		b.Run(fmt.Sprintf("tree_lookup/N=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				a := misses[i%len(misses)]
				i++
				it := r.RangeClosed(a, a, c)
				if it.Next() {
					b.Fatal("hit")
				}
			}
			b.ReportMetric(float64(c.Total(opTreeVisit))/float64(c.Total(opTreeSearch)), "visits/lookup")
		})
		c.Reset()
		b.Run(fmt.Sprintf("monotonic_step/N=%d", n), func(b *testing.B) {
			// Walk the whole text in 4-byte instructions, restarting the
			// cursor at the end; one op is one query.
			it := r.AddrIter(Jmp32InsnSize-1, c)
			q := uint64(base)
			for b.Loop() {
				if _, err := it.Query(q); err != nil {
					b.Fatal(err)
				}
				q += 4
				if q >= base+64<<20 {
					q = base
					it = r.AddrIter(Jmp32InsnSize-1, c)
				}
			}
		})
	}
}

// BenchmarkTreeMaintenance is the simulator cost of P4's bookkeeping: one
// insert plus one erase at N entries.
func BenchmarkTreeMaintenance(b *testing.B) {
	for _, n := range []int{20000, 50000} {
		for _, tree := range []bool{false, true} {
			b.Run(fmt.Sprintf("N=%d/tree=%v", n, tree), func(b *testing.B) {
				r, _ := benchRegistry(b, n, tree)
				c := sim.NewCounters(false)
				p := &Kprobe{Addr: base + 64<<20 + 1}
				for b.Loop() {
					_ = r.Insert(p, c)
					_ = r.Delete(p, c)
				}
			})
		}
	}
}

// chainNode mimics struct kprobe's layout for the chain walk: hlist_node
// at offset 0, addr at offset 40, 128 bytes in all (kmalloc-128 / kcalloc
// array stride).
type chainNode struct {
	next *chainNode
	_    [32]byte
	addr uint64
	_    [80]byte
}

// BenchmarkChainWalkLatency measures on the host the access pattern that
// kprobe.hash.visit's weight models: a get_kprobe miss walking a chain of
// N/64 nodes that live in one N*128-byte array in registration order and
// are linked in hash order. It reports ns per node; multiply by the host's
// clock in GHz for cycles. This is the cross-check of the weight, not its
// source (see ops.go).
func BenchmarkChainWalkLatency(b *testing.B) {
	for _, n := range []int{2000, 20000, 50000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			rng := sim.NewRNG(uint64(n), "kprobes.bench.chain")
			nodes := make([]chainNode, n)
			var heads [KprobeTableSize]*chainNode
			for i := range nodes {
				a := base + uint64(rng.IntN(64<<20))
				nodes[i].addr = a
				h := HashPtr(a, KprobeHashBits)
				nodes[i].next = heads[h]
				heads[h] = &nodes[i]
			}
			var visited, found uint64
			i := 0
			for b.Loop() {
				for p := heads[i%KprobeTableSize]; p != nil; p = p.next {
					visited++
					if p.addr == 1 {
						found++
					}
				}
				i++
			}
			if found != 0 {
				b.Fatal("found")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(visited), "ns/node")
		})
	}
}

// The fast kprobe_table against the chain walk it stands for (SimOptions.Walk):
// a get_kprobe miss costs the same count either way (kprobe.hash.visit =
// chain length), O(1) simulator time on the fast table.
func BenchmarkGetKprobeMissFastVsWalk(b *testing.B) {
	for _, walk := range []bool{false, true} {
		r, addrs := benchRegistryWith(b, 50000, false, walk)
		name := "fast"
		if walk {
			name = "walk"
		}
		c := sim.NewCounters(false)
		b.Run(name+"/N=50000", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if r.GetKprobe(addrs[i%len(addrs)]+1, c) != nil && i < 0 {
					b.Fatal("unreachable")
				}
				i++
			}
			b.ReportMetric(float64(c.Total(opHashVisit))/float64(c.Total(opHashLookup)), "visits/lookup")
		})
	}
}

// __get_insn_slot and __free_insn_slot with 50,000 slots held, fast index
// against the page walk.
func BenchmarkInsnSlotFastVsWalk(b *testing.B) {
	for _, walk := range []bool{false, true} {
		ic := newInsnCache("bench", 120, walk)
		var held []uint64
		for range 50000 {
			s, _ := ic.getInsnSlot(nil, nil, FaultOptinsnSlot)
			held = append(held, s)
		}
		name := "fast"
		if walk {
			name = "walk"
		}
		b.Run(name+"/held=50000", func(b *testing.B) {
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(held)
				ic.freeInsnSlot(nil, held[j], false)
				held[j], _ = ic.getInsnSlot(nil, nil, FaultOptinsnSlot)
				i++
			}
		})
	}
}
