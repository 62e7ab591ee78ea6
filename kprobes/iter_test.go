package kprobes

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

const top = math.MaxUint64

// The layout used by the semantics tables: B+10 and B+11 adjacent, two
// probes at B+20 (one aggregator entry), B+40 alone.
var layout = []uint64{base + 10, base + 11, base + 20, base + 20, base + 40}

func TestRangeSemantics(t *testing.T) {
	type rangeFn func(r *Registry) RangeIter
	B := uint64(base)
	for _, tc := range []struct {
		name  string
		addrs []uint64
		it    rangeFn
		want  []uint64
	}{
		{"empty registry", nil, func(r *Registry) RangeIter { return r.RangeClosed(0, top, nil) }, nil},
		{"empty registry desc", nil, func(r *Registry) RangeIter { return r.RangeClosedDesc(0, top, nil) }, nil},
		{"single probe hit", []uint64{B}, func(r *Registry) RangeIter { return r.Range(B, B+1, nil) }, []uint64{B}},
		{"single probe end excluded", []uint64{B}, func(r *Registry) RangeIter { return r.Range(B-5, B, nil) }, nil},
		{"single probe start above", []uint64{B}, func(r *Registry) RangeIter { return r.Range(B+1, top, nil) }, nil},
		{"start included end excluded", layout, func(r *Registry) RangeIter { return r.Range(B+10, B+20, nil) }, []uint64{B + 10, B + 11}},
		{"end just past", layout, func(r *Registry) RangeIter { return r.Range(B+11, B+21, nil) }, []uint64{B + 11, B + 20}},
		{"aggregator once", layout, func(r *Registry) RangeIter { return r.Range(B+20, B+21, nil) }, []uint64{B + 20}},
		{"empty start==end", layout, func(r *Registry) RangeIter { return r.Range(B+20, B+20, nil) }, nil},
		{"inverted", layout, func(r *Registry) RangeIter { return r.Range(B+40, B+10, nil) }, nil},
		{"below everything", layout, func(r *Registry) RangeIter { return r.Range(0, B+10, nil) }, nil},
		{"above everything", layout, func(r *Registry) RangeIter { return r.Range(B+41, top, nil) }, nil},
		{"across everything", layout, func(r *Registry) RangeIter { return r.Range(0, top, nil) }, []uint64{B + 10, B + 11, B + 20, B + 40}},
		{"gap between", layout, func(r *Registry) RangeIter { return r.Range(B+12, B+20, nil) }, nil},
		{"closed both ends", layout, func(r *Registry) RangeIter { return r.RangeClosed(B+10, B+20, nil) }, []uint64{B + 10, B + 11, B + 20}},
		{"closed single", layout, func(r *Registry) RangeIter { return r.RangeClosed(B+40, B+40, nil) }, []uint64{B + 40}},
		{"closed inverted", layout, func(r *Registry) RangeIter { return r.RangeClosed(B+11, B+10, nil) }, nil},
		{"desc across", layout, func(r *Registry) RangeIter { return r.RangeDesc(0, top, nil) }, []uint64{B + 40, B + 20, B + 11, B + 10}},
		{"desc end excluded", layout, func(r *Registry) RangeIter { return r.RangeDesc(B+10, B+20, nil) }, []uint64{B + 11, B + 10}},
		{"closed desc", layout, func(r *Registry) RangeIter { return r.RangeClosedDesc(B+11, B+40, nil) }, []uint64{B + 40, B + 20, B + 11}},
		{"top of address space", []uint64{top, top - 1}, func(r *Registry) RangeIter { return r.RangeClosed(top-1, top, nil) }, []uint64{top - 1, top}},
		{"top excluded by half-open", []uint64{top}, func(r *Registry) RangeIter { return r.Range(0, top, nil) }, nil},
		{"address zero", []uint64{0, 1}, func(r *Registry) RangeIter { return r.Range(0, 1, nil) }, []uint64{0}},
		// get_optimized_kprobe(addr): [addr-18, addr-1], highest first.
		{"optwin excludes addr", layout, func(r *Registry) RangeIter { return r.OptimizedWindow(B+20, nil) }, []uint64{B + 11, B + 10}},
		{"optwin far edge", layout, func(r *Registry) RangeIter { return r.OptimizedWindow(B+29, nil) }, []uint64{B + 20, B + 11}},
		{"optwin 18 below", layout, func(r *Registry) RangeIter { return r.OptimizedWindow(B+38, nil) }, []uint64{B + 20}},
		{"optwin 19 below", layout, func(r *Registry) RangeIter { return r.OptimizedWindow(B+39, nil) }, nil},
		{"optwin at zero", []uint64{0}, func(r *Registry) RangeIter { return r.OptimizedWindow(0, nil) }, nil},
		{"optwin clipped", []uint64{0, 3}, func(r *Registry) RangeIter { return r.OptimizedWindow(5, nil) }, []uint64{3, 0}},
		// __recover_optprobed_insn(addr): [addr-4, addr], highest first.
		{"recover includes addr", layout, func(r *Registry) RangeIter { return r.RecoverWindow(B+20, nil) }, []uint64{B + 20}},
		{"recover two", layout, func(r *Registry) RangeIter { return r.RecoverWindow(B+14, nil) }, []uint64{B + 11, B + 10}},
		{"recover 4 below", layout, func(r *Registry) RangeIter { return r.RecoverWindow(B+24, nil) }, []uint64{B + 20}},
		{"recover 5 below", layout, func(r *Registry) RangeIter { return r.RecoverWindow(B+25, nil) }, nil},
		// arch_check_optimized_kprobe: (addr, addr+size), ascending.
		{"check excludes both ends", layout, func(r *Registry) RangeIter { return r.CheckOptimizedRange(B+11, 9, nil) }, nil},
		{"check reaches", layout, func(r *Registry) RangeIter { return r.CheckOptimizedRange(B+11, 10, nil) }, []uint64{B + 20}},
		{"check neighbour", layout, func(r *Registry) RangeIter { return r.CheckOptimizedRange(B+10, 5, nil) }, []uint64{B + 11}},
		{"check size 1", layout, func(r *Registry) RangeIter { return r.CheckOptimizedRange(B+10, 1, nil) }, nil},
		{"check at top", []uint64{top}, func(r *Registry) RangeIter { return r.CheckOptimizedRange(top-2, 19, nil) }, []uint64{top}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := build(t, true, tc.addrs...)
			got, err := collect(tc.it(r))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, append([]uint64{}, tc.want...)) {
				t.Fatalf("got %#x, want %#x", got, tc.want)
			}
		})
	}
}

func TestRangeAggregatorEntry(t *testing.T) {
	r, ps := build(t, true, layout...)
	it := r.Range(base+20, base+21, nil)
	if !it.Next() {
		t.Fatal("no entry at B+20")
	}
	ap := it.Probe()
	if !ap.IsAggr() || ap.NumChildren() != 2 || ap.Children()[0] != ps[3] || ap.Children()[1] != ps[2] {
		t.Fatalf("entry at B+20 is %+v, want the aggregator holding [p3, p2]", ap)
	}
	if it.Next() || it.Probe() != nil {
		t.Fatal("more than one entry at one address")
	}
	if it.Next() {
		t.Fatal("Next after the end returned true")
	}
}

func TestRangeMisuse(t *testing.T) {
	t.Run("no tree", func(t *testing.T) {
		r, _ := build(t, false, layout...)
		it := r.Range(0, top, nil)
		if it.Next() || !errors.Is(it.Err(), ErrNoTree) {
			t.Fatalf("Next on a tree-less registry: err %v", it.Err())
		}
	})
	t.Run("zero value", func(t *testing.T) {
		var it RangeIter
		if it.Next() || it.Err() != nil || it.Probe() != nil {
			t.Fatal("zero RangeIter is not empty")
		}
	})
	t.Run("insert during iteration", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		it := r.Range(0, top, nil)
		if !it.Next() {
			t.Fatal("empty")
		}
		_ = r.Insert(&Kprobe{Addr: base + 15}, nil)
		if it.Next() || !errors.Is(it.Err(), ErrStaleCursor) || it.Probe() != nil {
			t.Fatalf("after insert: Next true or err %v", it.Err())
		}
		if it.Next() {
			t.Fatal("stale iterator came back to life")
		}
	})
	t.Run("created then mutated before first Next", func(t *testing.T) {
		r, ps := build(t, true, layout...)
		it := r.Range(0, top, nil)
		_ = r.UnregisterKprobe(ps[0], nil, nil)
		if it.Next() || !errors.Is(it.Err(), ErrStaleCursor) {
			t.Fatalf("err %v", it.Err())
		}
	})
	t.Run("remove the entry it sits on", func(t *testing.T) {
		// Many entries so the removed node has two children and gods moves
		// a key between nodes.
		var as []uint64
		for i := range 64 {
			as = append(as, base+uint64(i)*3)
		}
		r, ps := build(t, true, as...)
		for k := range as {
			it := r.Range(0, top, nil)
			for range k + 1 {
				it.Next()
			}
			sits := it.Probe()
			_ = r.UnregisterKprobe(sits, nil, nil)
			if it.Next() || !errors.Is(it.Err(), ErrStaleCursor) {
				t.Fatalf("k=%d: err %v", k, it.Err())
			}
			p := &Kprobe{Addr: sits.Addr}
			_ = register(r, p, nil)
			ps[k] = p
		}
	})
}

func TestAddrIterWalk(t *testing.T) {
	B := uint64(base)
	r, _ := build(t, true, append(slices.Clone(layout), B+100)...)
	c := sim.NewCounters(false)
	it := r.AddrIter(Jmp32InsnSize-1, c)
	type step struct {
		q      uint64
		at     uint64 // 0: none
		window []uint64
	}
	steps := []step{
		{B + 5, 0, nil},                    // before everything
		{B + 9, 0, nil},                    // window [B+5, B+9] still empty
		{B + 10, B + 10, []uint64{B + 10}}, // hit
		{B + 10, B + 10, []uint64{B + 10}}, // repeated query, same answer
		{B + 11, B + 11, []uint64{B + 10, B + 11}},
		{B + 14, 0, []uint64{B + 10, B + 11}}, // window [B+10, B+14]
		{B + 15, 0, []uint64{B + 11}},         // B+10 left the window
		{B + 16, 0, nil},                      // both gone
		{B + 20, B + 20, []uint64{B + 20}},    // aggregator entry
		{B + 24, 0, []uint64{B + 20}},         // 4 below: still in
		{B + 99, 0, nil},                      // passes B+40 without reporting it
		{B + 100, B + 100, []uint64{B + 100}},
		{B + 200, 0, nil}, // past the end
		{B + 300, 0, nil},
	}
	for i, s := range steps {
		p, err := it.Query(s.q)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var at uint64
		if p != nil {
			at = p.Addr
		}
		if at != s.at || it.At() != p {
			t.Fatalf("step %d (q=B+%d): at %#x, want %#x", i, s.q-B, at, s.at)
		}
		if got := addrsOf(it.Window()); !slices.Equal(got, append([]uint64{}, s.window...)) {
			t.Fatalf("step %d (q=B+%d): window %#x, want %#x", i, s.q-B, got, s.window)
		}
	}
	// Cost: one descent, one query op per query, one step per entry in
	// [q0-4, qlast] = all 5 entries.
	if treeDesign.Has(sim.KprobeBtree) {
		// The B-tree: one walk, the steps are maple slot moves (all 6
		// entries share one node), no rb work.
		if s, st := opCount(t, c, "maple.search"), opCount(t, c, "maple.slot"); s != 1 || st != 5 || c.Total(opTreeStep)+c.Total(opTreeSearch) != 0 {
			t.Errorf("B-tree walk: %d searches, %d slot steps, want 1 and 5", s, st)
		}
		return
	}
	if got := c.Total(opTreeSearch); got != 1 {
		t.Errorf("tree.search = %d, want 1", got)
	}
	if got := c.Total(opIterQuery); got != uint64(len(steps)) {
		t.Errorf("iter.query = %d, want %d", got, len(steps))
	}
	if got := c.Total(opTreeStep); got != 5 {
		t.Errorf("tree.step = %d, want 5 (entries passed)", got)
	}
	if got := c.Total(opHashVisit); got != 0 {
		t.Errorf("the cursor walked hash chains: %d visits", got)
	}
}

func TestAddrIterMisuse(t *testing.T) {
	t.Run("decreasing query", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		it := r.AddrIter(4, nil)
		if _, err := it.Query(base + 20); err != nil {
			t.Fatal(err)
		}
		if p, err := it.Query(base + 19); !errors.Is(err, ErrNotMonotonic) || p != nil {
			t.Fatalf("decreasing query: %v, %v", p, err)
		}
		if _, err := it.Query(base + 40); !errors.Is(err, ErrNotMonotonic) {
			t.Fatalf("cursor revived after a contract violation: %v", err)
		}
		if len(it.Window()) != 0 || it.At() != nil || !errors.Is(it.Err(), ErrNotMonotonic) {
			t.Fatal("dead cursor still reports probes")
		}
	})
	t.Run("mutation while live", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		it := r.AddrIter(4, nil)
		if p, _ := it.Query(base + 11); p == nil {
			t.Fatal("miss at B+11")
		}
		_ = r.Insert(&Kprobe{Addr: base + 30}, nil)
		if _, err := it.Query(base + 40); !errors.Is(err, ErrStaleCursor) {
			t.Fatalf("after insert: %v", err)
		}
	})
	t.Run("aggregator grows while live", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		it := r.AddrIter(0, nil)
		_, _ = it.Query(base + 20)
		_ = register(r, &Kprobe{Addr: base + 20}, nil)
		if _, err := it.Query(base + 20); !errors.Is(err, ErrStaleCursor) {
			t.Fatalf("after aggregation: %v", err)
		}
	})
	t.Run("remove the probe it sits on", func(t *testing.T) {
		r, ps := build(t, true, layout...)
		it := r.AddrIter(4, nil)
		p, _ := it.Query(base + 40)
		if p != ps[4] {
			t.Fatal("miss at B+40")
		}
		if err := r.UnregisterKprobe(p, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := it.Query(base + 40); !errors.Is(err, ErrStaleCursor) {
			t.Fatalf("after removing the current probe: %v", err)
		}
	})
	t.Run("no tree", func(t *testing.T) {
		r, _ := build(t, false, layout...)
		it := r.AddrIter(4, nil)
		if _, err := it.Query(base); !errors.Is(err, ErrNoTree) {
			t.Fatal(err)
		}
	})
	t.Run("look-back out of range", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		for _, b := range []int{-1, MaxLookBack + 1} {
			it := r.AddrIter(b, nil)
			if _, err := it.Query(base); !errors.Is(err, ErrLookBack) {
				t.Fatalf("look-back %d: %v", b, err)
			}
		}
		it := r.AddrIter(MaxLookBack, nil)
		if _, err := it.Query(base + 29); err != nil || len(it.Window()) != 2 {
			t.Fatalf("look-back 18 at B+29: %v, window %#x", err, addrsOf(it.Window()))
		}
	})
	t.Run("clipped at zero", func(t *testing.T) {
		r, _ := build(t, true, 0, 2)
		it := r.AddrIter(4, nil)
		if p, err := it.Query(1); err != nil || p != nil || !slices.Equal(addrsOf(it.Window()), []uint64{0}) {
			t.Fatalf("q=1: %v %v %v", p, err, addrsOf(it.Window()))
		}
	})
	t.Run("no queries no cost", func(t *testing.T) {
		r, _ := build(t, true, layout...)
		c := sim.NewCounters(false)
		_ = r.AddrIter(4, c)
		if c.Sum() != 0 {
			t.Fatal("creating a cursor counted work")
		}
	})
}

// TestIterCostsScaleWithN asserts the P5/P6 cost bounds against N: a range
// query is one descent of at most the red-black height bound 2*log2(N+1)
// plus exactly one step per result; a monotonic walk is one descent plus one
// step per entry passed.
func TestIterCostsScaleWithN(t *testing.T) {
	for _, n := range []int{100, 2000, 20000} {
		rng := sim.NewRNG(uint64(n), "kprobes.test.costs")
		r := NewRegistry(true)
		for r.Len() < n {
			_ = r.Insert(&Kprobe{Addr: base + uint64(rng.IntN(16*n))}, nil)
		}
		all := r.Entries()
		bound := rbHeightBound(n)
		if h := r.TreeHeight(); h > bound {
			t.Fatalf("N=%d: tree height %d above 2*log2(N+1) = %d", n, h, bound)
		}
		c := sim.NewCounters(false)
		for range 300 {
			lo := base + uint64(rng.IntN(17*n))
			hi := lo + uint64(rng.IntN(200))
			c.Reset()
			got, err := collect(r.Range(lo, hi, c))
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, p := range all {
				if p.Addr >= lo && p.Addr < hi {
					want++
				}
			}
			if len(got) != want {
				t.Fatalf("N=%d: range returned %d, want %d", n, len(got), want)
			}
			if v := c.Total(opTreeVisit); v > uint64(bound) {
				t.Fatalf("N=%d: range descent visited %d nodes, bound %d", n, v, bound)
			}
			if s := c.Total(opTreeStep); s != uint64(want) {
				t.Fatalf("N=%d: %d steps for %d results", n, s, want)
			}
			if wantSearch := uint64(min(1, hi-lo)); c.Total(opTreeSearch) != wantSearch {
				t.Fatalf("%d descents for [%#x, %#x), want %d", c.Total(opTreeSearch), lo, hi, wantSearch)
			}
		}
		// A monotonic walk over a "function" of 2000 bytes, 1-7 byte
		// instructions.
		for range 20 {
			q := base + uint64(rng.IntN(16*n))
			c.Reset()
			it := r.AddrIter(4, c)
			first, queries := q, 0
			for end := q + 2000; q < end; q += uint64(1 + rng.IntN(7)) {
				if _, err := it.Query(q); err != nil {
					t.Fatal(err)
				}
				queries++
			}
			last := it.LastQuery()
			passed := 0
			for _, p := range all {
				if p.Addr >= first-4 && p.Addr <= last {
					passed++
				}
			}
			if v := c.Total(opTreeVisit); v > uint64(bound) {
				t.Fatalf("N=%d: cursor descent visited %d, bound %d", n, v, bound)
			}
			if s := c.Total(opTreeStep); s != uint64(passed) {
				t.Fatalf("N=%d: cursor made %d steps, passed %d entries", n, s, passed)
			}
			if qn := c.Total(opIterQuery); qn != uint64(queries) {
				t.Fatalf("N=%d: %d query ops for %d queries", n, qn, queries)
			}
		}
	}
}

func TestTreeMaintenanceCounted(t *testing.T) {
	c := sim.NewCounters(false)
	r := NewRegistry(true)
	rng := sim.NewRNG(7, "kprobes.test.maint")
	var ps []*Kprobe
	for r.Len() < 5000 {
		p := &Kprobe{Addr: base + uint64(rng.IntN(1<<20))}
		if r.find(p.Addr) != nil {
			continue
		}
		before := c.Total(opTreeVisit)
		if err := r.Insert(p, c); err != nil {
			t.Fatal(err)
		}
		if v := c.Total(opTreeVisit) - before; v > uint64(rbHeightBound(r.Len())) {
			t.Fatalf("insert descent %d nodes at N=%d", v, r.Len())
		}
		ps = append(ps, p)
	}
	if c.Total(opTreeInsert) != 5000 || c.Total(opHashAdd) != 5000 {
		t.Fatalf("insert ops: tree %d, hash %d", c.Total(opTreeInsert), c.Total(opHashAdd))
	}
	for _, p := range ps[:2500] {
		if err := r.UnregisterKprobe(p, nil, c); err != nil {
			t.Fatal(err)
		}
	}
	if c.Total(opTreeErase) != 2500 || c.Total(opHashDel) != 2500 {
		t.Fatalf("erase ops: tree %d, hash %d", c.Total(opTreeErase), c.Total(opHashDel))
	}
	// Without the tree nothing tree-related is counted.
	c2 := sim.NewCounters(false)
	r2 := NewRegistry(false)
	for _, p := range ps[:100] {
		_ = r2.Insert(&Kprobe{Addr: p.Addr}, c2)
	}
	for _, op := range []sim.Op{opTreeSearch, opTreeVisit, opTreeInsert} {
		if c2.Total(op) != 0 {
			t.Fatalf("tree op %s counted without the tree", op.Name())
		}
	}
}
