package kprobes

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/maple"
	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

func opCount(t testing.TB, c *sim.Counters, name string) uint64 {
	t.Helper()
	op, ok := sim.LookupOp(name)
	if !ok {
		t.Fatalf("no op %s", name)
	}
	return c.Total(op)
}

// TestIteratorsOnBtree reruns the range and monotonic iterator semantics
// tests (bounds, order, aggregators, stale cursors, misuse) with the P4
// tree kept as the B-tree (kprobe-btree).
func TestIteratorsOnBtree(t *testing.T) {
	treeDesign = sim.Switches(0).With(sim.KprobeBtree)
	defer func() { treeDesign = 0 }()
	r, _ := build(t, true, layout...)
	if _, ok := r.tree.(btIndex); !ok {
		t.Fatal("build did not make a B-tree registry")
	}
	t.Run("RangeSemantics", TestRangeSemantics)
	t.Run("RangeAggregatorEntry", TestRangeAggregatorEntry)
	t.Run("RangeMisuse", TestRangeMisuse)
	t.Run("AddrIterWalk", TestAddrIterWalk)
	t.Run("AddrIterMisuse", TestAddrIterMisuse)
}

// designRegs are the alternative registries the differential test drives
// beside upstream's (hash table of 64 buckets plus rbtree).
func designRegs(t *rapid.T) ([]string, []*Registry, *sim.Faults) {
	f := &sim.Faults{}
	if rapid.Bool().Draw(t, "growth-fails") {
		// A one-off failure of the rhashtable's growth allocation: the
		// worker keeps the old table and retries on the next insert.
		f.Set(rhashtable.FaultTableAlloc, uint64(rapid.IntRange(1, 4).Draw(t, "growth-fails-at")))
	}
	tree := sim.Switches(0).With(sim.KprobeTree)
	b := uint(rapid.IntRange(sim.MinHashBits, sim.MaxHashBits).Draw(t, "bits"))
	sets := []sim.Switches{
		tree.WithHashBits(b),
		tree.With(sim.KprobeRhashtable),
		tree.With(sim.KprobeBtree),
		tree.With(sim.KprobeBtree).With(sim.KprobeRhashtable),
		tree.With(sim.KprobeBtree).WithHashBits(b),
	}
	var names []string
	var regs []*Registry
	for _, ss := range sets {
		r := NewRegistryFor(ss)
		r.Faults = func() *sim.Faults { return f }
		names = append(names, ss.Name())
		regs = append(regs, r)
	}
	return names, regs, f
}

// shape describes a registry entry independently of the Kprobe objects:
// its address and, for an aggregator, its children's user indexes.
func shape(p *Kprobe, idx map[*Kprobe]int) string {
	if p == nil {
		return "nil"
	}
	if !p.IsAggr() {
		return fmt.Sprintf("%#x:%d", p.Addr, idx[p])
	}
	s := fmt.Sprintf("%#x:aggr", p.Addr)
	for _, q := range p.Children() {
		s += fmt.Sprintf(",%d", idx[q])
	}
	return s
}

// TestDesignsMatchUpstream drives upstream's registry and every
// alternative (kprobe-hash-bits=B for a random B, the rhashtable with and
// without a failing growth allocation, the B-tree, the B-tree with each
// hash) with the same random registrations, unregistrations, lookups,
// range queries and monotonic walks, and requires the same answer from
// each: same errors, same entry (address, aggregation, children) at every
// lookup, same range and window contents in the same order.
func TestDesignsMatchUpstream(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		up := NewRegistry(true)
		names, regs, _ := designRegs(rt)
		all := append([]*Registry{up}, regs...)
		names = append([]string{"upstream"}, names...)
		// users[k][i]: design k's copy of user probe i.
		users := make([][]*Kprobe, len(all))
		idx := make([]map[*Kprobe]int, len(all))
		for k := range all {
			idx[k] = map[*Kprobe]int{}
		}
		var live []int
		for step := rapid.IntRange(1, 120).Draw(rt, "steps"); step > 0; step-- {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1: // register
				a := drawAddr(rt, "addr")
				i := len(users[0])
				var errs []string
				for k, r := range all {
					p := &Kprobe{Addr: a}
					users[k] = append(users[k], p)
					idx[k][p] = i
					errs = append(errs, fmt.Sprint(register(r, p, nil)))
				}
				for k := range errs {
					if errs[k] != errs[0] {
						rt.Fatalf("register %#x: %s says %s, upstream %s", a, names[k], errs[k], errs[0])
					}
				}
				live = append(live, i)
			case 2: // unregister
				if len(live) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(live)-1).Draw(rt, "victim")
				i := live[j]
				live = slices.Delete(live, j, j+1)
				for k, r := range all {
					if err := r.UnregisterKprobe(users[k][i], nil, nil); err != nil {
						rt.Fatalf("%s: unregister %d: %v", names[k], i, err)
					}
				}
			case 3: // lookup
				a := drawAddr(rt, "addr")
				want := shape(up.GetKprobe(a, nil), idx[0])
				for k, r := range all[1:] {
					if got := shape(r.GetKprobe(a, nil), idx[k+1]); got != want {
						rt.Fatalf("%s: get_kprobe(%#x) = %s, upstream %s", names[k+1], a, got, want)
					}
				}
			case 4: // range
				lo := drawAddr(rt, "lo")
				hi := lo + uint64(rapid.IntRange(0, 40).Draw(rt, "span"))
				if hi < lo {
					hi = math.MaxUint64
				}
				desc := rapid.Bool().Draw(rt, "desc")
				var want []string
				for k, r := range all {
					it := r.RangeClosed(lo, hi, nil)
					if desc {
						it = r.RangeClosedDesc(lo, hi, nil)
					}
					var got []string
					for it.Next() {
						got = append(got, shape(it.Probe(), idx[k]))
					}
					if it.Err() != nil {
						rt.Fatalf("%s: %v", names[k], it.Err())
					}
					if k == 0 {
						want = got
					} else if !slices.Equal(got, want) {
						rt.Fatalf("%s: range [%#x, %#x] desc=%v = %v, upstream %v", names[k], lo, hi, desc, got, want)
					}
				}
			case 5: // monotonic walk
				back := rapid.IntRange(0, MaxLookBack).Draw(rt, "back")
				q := drawAddr(rt, "start")
				var deltas []uint64
				for n := rapid.IntRange(1, 30).Draw(rt, "queries"); n > 0; n-- {
					deltas = append(deltas, uint64(rapid.IntRange(0, 6).Draw(rt, "delta")))
				}
				var want []string
				for k, r := range all {
					it := r.AddrIter(back, nil)
					var got []string
					a := q
					for _, d := range deltas {
						at, err := it.Query(a)
						if err != nil {
							rt.Fatalf("%s: query %#x: %v", names[k], a, err)
						}
						got = append(got, shape(at, idx[k]))
						for _, w := range it.Window() {
							got = append(got, shape(w, idx[k]))
						}
						if a+d < a {
							break
						}
						a += d
					}
					if k == 0 {
						want = got
					} else if !slices.Equal(got, want) {
						rt.Fatalf("%s: walk from %#x (back %d) = %v, upstream %v", names[k], q, back, got, want)
					}
				}
			}
			for k, r := range all[1:] {
				if r.Len() != up.Len() {
					rt.Fatalf("%s: %d entries, upstream %d", names[k+1], r.Len(), up.Len())
				}
			}
		}
		want := addrsOf(up.Entries())
		for k, r := range all[1:] {
			if got := addrsOf(r.Entries()); !slices.Equal(got, want) {
				rt.Fatalf("%s: entries %#x, upstream %#x", names[k+1], got, want)
			}
		}
	})
}

// TestHashBitsChains: with kprobe-hash-bits=B each entry sits in the chain
// of hash_ptr(addr, B), newest first, and the table has 2^B heads.
func TestHashBitsChains(t *testing.T) {
	for _, b := range []uint{6, 10, 16, 20} {
		r := NewRegistryFor(sim.Switches(0).WithHashBits(b))
		rng := sim.NewRNG(uint64(b), "kprobes.test.hashbits")
		want := map[uint32][]uint64{}
		for range 3000 {
			a := base + uint64(rng.IntN(1<<24))
			if r.GetKprobe(a, nil) != nil {
				continue
			}
			if err := r.Insert(&Kprobe{Addr: a}, nil); err != nil {
				t.Fatal(err)
			}
			h := HashPtr(a, b)
			want[h] = append([]uint64{a}, want[h]...)
		}
		if n := len(r.table.(*fastTable).chains); n != 1<<b || r.HashBits() != b {
			t.Fatalf("B=%d: %d buckets", b, n)
		}
		for h, chain := range want {
			if got := addrsOf(r.Chain(int(h))); !slices.Equal(got, chain) {
				t.Fatalf("B=%d bucket %d: %#x, want %#x", b, h, got, chain)
			}
		}
		if mem := r.Bytes(); mem[0].Name != "kprobe.table.bytes" || mem[0].Bytes != 8<<b {
			t.Fatalf("B=%d: memory %+v", b, mem)
		}
	}
}

// TestDesignMemory: each design reports its index memory by name.
func TestDesignMemory(t *testing.T) {
	for _, tc := range []struct {
		ss   sim.Switches
		want []string
	}{
		{0, []string{"kprobe.table.bytes"}},
		{sim.Switches(0).With(sim.KprobeTree), []string{"kprobe.table.bytes", "kprobe.tree.bytes"}},
		{sim.Switches(0).With(sim.KprobeRhashtable), []string{"kprobe.rhashtable.bytes", "kprobe.rhashtable.peak_bytes"}},
		{sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree), []string{"kprobe.table.bytes", "kprobe.btree.bytes"}},
	} {
		r := NewRegistryFor(tc.ss)
		for i := range 1000 {
			_ = r.Insert(&Kprobe{Addr: base + uint64(i)*16}, nil)
		}
		var got []string
		for _, nb := range r.Bytes() {
			got = append(got, nb.Name)
			if nb.Bytes <= 0 {
				t.Errorf("%s: %s = %d", tc.ss.Name(), nb.Name, nb.Bytes)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: memory figures %v, want %v", tc.ss.Name(), got, tc.want)
		}
	}
}

// TestIndexAllocationFailure: when the B-tree cannot split or the
// rhashtable cannot grow past 100% load, Insert fails with ErrNoMem and
// leaves the registry as it was (hash, tree and count in lock-step).
func TestIndexAllocationFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ss    sim.Switches
		point sim.FaultPoint
		ok    int // inserts that succeed before the first failure
	}{
		{"btree", sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree), maple.FaultNodeAlloc, maple.Pivots},
		{"rhashtable", sim.Switches(0).With(sim.KprobeRhashtable), rhashtable.FaultTableAlloc, rhashtable.HashDefaultSize + 1},
		{"rhashtable+btree", sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree).With(sim.KprobeRhashtable), maple.FaultNodeAlloc, maple.Pivots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &sim.Faults{}
			f.Set(tc.point, 0)
			r := NewRegistryFor(tc.ss)
			r.Faults = func() *sim.Faults { return f }
			n := 0
			var err error
			for ; n < 1000; n++ {
				if err = r.Insert(&Kprobe{Addr: base + uint64(n)*8}, nil); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrNoMem) || n != tc.ok {
				t.Fatalf("first failure after %d inserts (%v), want ErrNoMem after %d", n, err, tc.ok)
			}
			failed := base + uint64(n)*8
			if r.Len() != n || r.GetKprobe(failed, nil) != nil {
				t.Fatalf("the failed insert left traces: len %d", r.Len())
			}
			if r.HasTree() {
				got, err := collect(r.RangeClosed(0, math.MaxUint64, nil))
				if err != nil || len(got) != n || slices.Contains(got, failed) {
					t.Fatalf("tree after the failure: %d entries, %v", len(got), err)
				}
			}
		})
	}
}

func benchDesignLookup(b *testing.B, ss sim.Switches, n int) {
	r := NewRegistryFor(ss)
	addrs := make([]uint64, n)
	for i := range addrs {
		addrs[i] = base + uint64(i)*4096
		if err := r.Insert(&Kprobe{Addr: addrs[i]}, nil); err != nil {
			b.Fatal(err)
		}
	}
	c := sim.NewCounters(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r.GetKprobe(addrs[(i*7919)%n], c) == nil {
			b.Fatal("miss")
		}
	}
	b.StopTimer()
	b.ReportMetric(sim.DefaultCosts().Cycles(c)/float64(b.N), "est-cycles/op")
}

// BenchmarkDesignLookup: get_kprobe hits at N = 20k and 50k in each probe
// index (the est-cycles/op metric is the model's; ns/op is Go's).
func BenchmarkDesignLookup(b *testing.B) {
	for _, n := range []int{20000, 50000} {
		for _, ss := range []sim.Switches{0, sim.Switches(0).WithHashBits(10), sim.Switches(0).WithHashBits(16), sim.Switches(0).With(sim.KprobeRhashtable)} {
			b.Run(fmt.Sprintf("%s/n=%d", ss.Name(), n), func(b *testing.B) { benchDesignLookup(b, ss, n) })
		}
	}
}

// BenchmarkDesignRange: a get_optimized_kprobe window query at N = 20k
// and 50k over the rbtree and the B-tree.
func BenchmarkDesignRange(b *testing.B) {
	tree := sim.Switches(0).With(sim.KprobeTree)
	for _, n := range []int{20000, 50000} {
		for _, ss := range []sim.Switches{tree, tree.With(sim.KprobeBtree)} {
			b.Run(fmt.Sprintf("%s/n=%d", ss.Name(), n), func(b *testing.B) {
				r := NewRegistryFor(ss)
				for i := range n {
					_ = r.Insert(&Kprobe{Addr: base + uint64(i)*64}, nil)
				}
				c := sim.NewCounters(false)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					it := r.OptimizedWindow(base+uint64((i*7919)%n)*64+20, c)
					for it.Next() {
					}
				}
				b.StopTimer()
				b.ReportMetric(sim.DefaultCosts().Cycles(c)/float64(b.N), "est-cycles/op")
			})
		}
	}
}
