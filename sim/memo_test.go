package sim

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// memoTestOps are more ops than a Tally holds inline, so walks spill.
var memoTestOps = func() []Op {
	var ops []Op
	for i := range tallyInline + 3 {
		ops = append(ops, NewOp(fmt.Sprintf("test.memo.%d", i), 1, "test weight", "memo test op"))
	}
	return ops
}()

// memoWalk is a pure walk of (key, version): its answer and the ops and
// amounts it counts (up to every memo test op, some twice).
func memoWalk(key, ver uint64, c Adder) uint64 {
	h := key*0x9E3779B97F4A7C15 ^ ver*0xBF58476D1CE4E5B9
	for i, op := range memoTestOps {
		if h>>(i%64)&1 != 0 {
			c.Add(op, h>>(i+3)&0xF)
		}
	}
	c.Add(memoTestOps[h%uint64(len(memoTestOps))], 1)
	return h ^ h>>31
}

// TestMemoMatchesWalk: for any sequence of questions, versions and phase
// changes, a memo answers as the walk and adds exactly the walk's counts,
// in the caller's phase, whatever the table size (collisions, evictions)
// and whether the caller counts into Counters (Do) or a tally of its own
// (Get).
func TestMemoMatchesWalk(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		size := 1 << rapid.IntRange(0, 4).Draw(rt, "log2size")
		m := NewMemo[uint64, uint64](size, func(k uint64) uint64 { return k * 7 })
		cm, cw := NewCounters(false), NewCounters(false)
		var tm, tw Tally
		ver := uint64(0)
		for i := rapid.IntRange(1, 200).Draw(rt, "steps"); i > 0; i-- {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				ver++
			case 1:
				ph := []Phase{PhaseOther, testPh1, testPh2}[rapid.IntRange(0, 2).Draw(rt, "phase")]
				cm.Enter(ph)
				cw.Enter(ph)
			default:
				key := uint64(rapid.IntRange(0, 40).Draw(rt, "key"))
				walk := func(t *Tally) uint64 { return memoWalk(key, ver, t) }
				var got uint64
				var dw Adder = cw
				h := key * 7 // the memo's slot function, for the At forms
				switch rapid.IntRange(0, 4).Draw(rt, "form") {
				case 0:
					var t *Tally
					got, t = m.Get(ver, key, walk)
					for i := range t.Len() {
						tm.Add(t.At(i).Op, t.At(i).N)
					}
					dw = &tw
				case 1:
					got = m.Do(cm, ver, key, walk)
				case 2:
					got = *m.DoAt(cm, h, ver, key, walk)
				case 3:
					// Find, then GetAt on a miss, replayed through Parts.
					v, t, ok := m.Find(h, ver, key)
					if !ok {
						v, t = m.GetAt(h, ver, key, walk)
					}
					got = *v
					first, rest := t.Parts()
					for _, x := range append(first, rest...) {
						tm.Add(x.Op, x.N)
					}
					dw = &tw
				default:
					v, t := m.GetAt(h, ver, key, walk)
					got = *v
					t.AddToCounters(cm)
				}
				if want := memoWalk(key, ver, dw); got != want {
					rt.Fatalf("key %d ver %d: memo %#x, walk %#x", key, ver, got, want)
				}
			}
			if !slices.Equal(cm.NonZero(), cw.NonZero()) {
				rt.Fatalf("counters: memo\n%s walk\n%s", cm, cw)
			}
			if !tallyEqual(&tm, &tw) {
				rt.Fatalf("tally: memo %v, walk %v", tm.Counts(), tw.Counts())
			}
		}
	})
}

// tallyEqual: the same amount of every op, whatever the order.
func tallyEqual(a, b *Tally) bool {
	sum := func(t *Tally) map[Op]uint64 {
		m := map[Op]uint64{}
		for _, x := range t.Counts() {
			m[x.Op] += x.N
		}
		return m
	}
	ma, mb := sum(a), sum(b)
	if len(ma) != len(mb) {
		return false
	}
	for op, n := range ma {
		if mb[op] != n {
			return false
		}
	}
	return true
}

// TestSpanMemoMatchesWalk: a span memo answers every key its stored
// answer covers as the walk would (the walk's answer is the same across
// the span), never stores an answer that does not cover its own key, and
// adds exactly the walk's counts.
func TestSpanMemoMatchesWalk(t *testing.T) {
	type span struct{ lo, hi, n uint64 } // hi 0: covers nothing
	rapid.Check(t, func(rt *rapid.T) {
		// Spans of width 1..8 over [0, 256); every 5th one covers nothing.
		walk := func(key uint64, c Adder) span {
			lo := key &^ 7
			c.Add(memoTestOps[0], lo/8+1)
			c.Add(memoTestOps[1], 3)
			if lo/8%5 == 4 {
				return span{lo: lo}
			}
			return span{lo, lo + 8, lo * 3}
		}
		walks := 0
		m := NewSpanMemo(func(s span, key uint64) bool { return s.hi != 0 && key >= s.lo && key < s.hi })
		cm, cw := NewCounters(false), NewCounters(false)
		prev := ^uint64(0)
		for i := rapid.IntRange(1, 100).Draw(rt, "steps"); i > 0; i-- {
			key := uint64(rapid.IntRange(0, 255).Draw(rt, "key"))
			before := walks
			w := func(t *Tally) span { walks++; return walk(key, t) }
			var got span
			if rapid.Bool().Draw(rt, "held") {
				// The caller checks coverage itself (Held), as kallsyms does.
				v, t, ok := m.Held(0, 0)
				if !ok || !(v.hi != 0 && key >= v.lo && key < v.hi) {
					v, t = m.GetAt(0, 0, key, w)
				}
				got = *v
				t.AddToCounters(cm)
			} else {
				got = m.Do(cm, 0, key, w)
			}
			want := walk(key, cw)
			if got != want {
				rt.Fatalf("key %d: memo %+v, walk %+v", key, got, want)
			}
			covered := prev != ^uint64(0) && prev&^7 == key&^7 && want.hi != 0
			if ran := walks > before; ran == covered {
				rt.Fatalf("key %d after %d: walk ran %v", key, prev, ran)
			}
			if !slices.Equal(cm.NonZero(), cw.NonZero()) {
				rt.Fatalf("counters: memo\n%s walk\n%s", cm, cw)
			}
			prev = key
		}
	})
}

// TestTallyAdd: a Tally sums per op, inline and spilled alike, and Reset
// empties it.
func TestTallyAdd(t *testing.T) {
	var tl Tally
	for round := range 2 {
		for i, op := range memoTestOps {
			tl.Add(op, uint64(i+1))
			tl.Inc(op)
			tl.Add(op, 0)
		}
		got := tl.Counts()
		if len(got) != len(memoTestOps) {
			t.Fatalf("round %d: %d ops, want %d", round, len(got), len(memoTestOps))
		}
		for i, x := range got {
			if x.Op != memoTestOps[i] || x.N != uint64(i+2) {
				t.Fatalf("round %d: count %d = %+v, want %v×%d", round, i, x, memoTestOps[i], i+2)
			}
		}
		tl.Reset()
		if len(tl.Counts()) != 0 {
			t.Fatal("Reset left counts")
		}
	}
}

// BenchmarkMemoHit is the hit path as the decode and lookup_rec memos use
// it: Find inlined, the stored counts replayed into Counters.
func BenchmarkMemoHit(b *testing.B) {
	m := NewMemo[uint64, uint64](512, nil)
	c := NewCounters(false)
	walk := func(t *Tally) uint64 { t.Inc(memoTestOps[0]); t.Add(memoTestOps[1], 3); return 1 }
	for k := range uint64(512) {
		m.GetAt(k, 0, k, walk)
	}
	b.ResetTimer()
	var sum uint64
	for i := range b.N {
		k := uint64(i) & 511
		v, t, ok := m.Find(k, 0, k)
		if !ok {
			v, t = m.GetAt(k, 0, k, walk)
		}
		t.AddToCounters(c)
		sum += *v
	}
	if sum != uint64(b.N) {
		b.Fatal(sum)
	}
}

// BenchmarkMemoDo is Do's hit path (a slot function, an out-of-line call).
func BenchmarkMemoDo(b *testing.B) {
	m := NewMemo[uint64, uint64](512, func(k uint64) uint64 { return k })
	c := NewCounters(false)
	walk := func(t *Tally) uint64 { t.Inc(memoTestOps[0]); t.Add(memoTestOps[1], 3); return 1 }
	b.ResetTimer()
	var sum uint64
	for i := range b.N {
		sum += m.Do(c, 0, uint64(i)&511, walk)
	}
	if sum != uint64(b.N) {
		b.Fatal(sum)
	}
}
