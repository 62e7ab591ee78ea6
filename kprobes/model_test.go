package kprobes

import (
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

// refModel is the trivially correct model: a sorted slice of entry
// addresses, each with its entry object and children (list order), plus
// the expected hash chains (head first).
type refModel struct {
	addrs    []uint64 // sorted, one per entry
	entry    map[uint64]*Kprobe
	children map[uint64][]*Kprobe // nil for a plain entry
	chains   [KprobeTableSize][]uint64
	users    []*Kprobe // registered user probes
}

func (m *refModel) between(lo, hi uint64) []uint64 { // closed [lo, hi]
	i, _ := slices.BinarySearch(m.addrs, lo)
	j := i
	for j < len(m.addrs) && m.addrs[j] <= hi {
		j++
	}
	return slices.Clone(m.addrs[i:j])
}

type registryMachine struct {
	r *Registry
	m *refModel
	c *sim.Counters
}

var modelSteps atomic.Int64

func drawAddr(t *rapid.T, label string) uint64 {
	switch rapid.IntRange(0, 9).Draw(t, label+".kind") {
	case 0:
		return uint64(rapid.IntRange(0, 7).Draw(t, label+".low"))
	case 1:
		return math.MaxUint64 - uint64(rapid.IntRange(0, 7).Draw(t, label+".high"))
	default:
		return base + uint64(rapid.IntRange(0, 63).Draw(t, label+".dense"))
	}
}

func (s *registryMachine) chainPos(addr uint64) (uint64, bool) {
	ch := s.m.chains[kernelBucket(addr)]
	if i := slices.Index(ch, addr); i >= 0 {
		return uint64(i + 1), true
	}
	return uint64(len(ch)), false
}

func (s *registryMachine) register(t *rapid.T) {
	a := drawAddr(t, "addr")
	p := &Kprobe{Addr: a}
	s.c.Reset()
	if err := register(s.r, p, s.c); err != nil {
		t.Fatalf("register %#x: %v", a, err)
	}
	want, _ := s.chainPos(a)
	if got := s.c.Total(opHashVisit); got != want {
		t.Fatalf("get_kprobe(%#x) in register visited %d nodes, model chain says %d", a, got, want)
	}
	switch old, ok := s.m.entry[a]; {
	case !ok:
		i, _ := slices.BinarySearch(s.m.addrs, a)
		s.m.addrs = slices.Insert(s.m.addrs, i, a)
		s.m.entry[a] = p
		b := kernelBucket(a)
		s.m.chains[b] = slices.Insert(s.m.chains[b], 0, a)
	case s.m.children[a] == nil:
		ap := s.r.find(a)
		if ap == nil || ap == old || !ap.IsAggr() {
			t.Fatalf("no aggregator replaced %#x", a)
		}
		s.m.entry[a] = ap
		s.m.children[a] = []*Kprobe{p, old}
	default:
		s.m.children[a] = slices.Insert(s.m.children[a], 0, p)
	}
	s.m.users = append(s.m.users, p)
}

func (s *registryMachine) unregister(t *rapid.T) {
	if len(s.m.users) == 0 {
		if err := s.r.UnregisterKprobe(&Kprobe{Addr: drawAddr(t, "stray")}, nil, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("unregistering a stray probe: %v", err)
		}
		return
	}
	i := rapid.IntRange(0, len(s.m.users)-1).Draw(t, "victim")
	p := s.m.users[i]
	s.m.users = slices.Delete(s.m.users, i, i+1)
	if err := s.r.UnregisterKprobe(p, nil, nil); err != nil {
		t.Fatalf("unregister %#x: %v", p.Addr, err)
	}
	a := p.Addr
	if ch := s.m.children[a]; ch != nil {
		ch = slices.DeleteFunc(ch, func(q *Kprobe) bool { return q == p })
		s.m.children[a] = ch
		if len(ch) > 0 {
			return
		}
		delete(s.m.children, a)
	}
	delete(s.m.entry, a)
	j, _ := slices.BinarySearch(s.m.addrs, a)
	s.m.addrs = slices.Delete(s.m.addrs, j, j+1)
	b := kernelBucket(a)
	s.m.chains[b] = slices.DeleteFunc(s.m.chains[b], func(x uint64) bool { return x == a })
	if err := s.r.UnregisterKprobe(p, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("double unregister: %v", err)
	}
}

func (s *registryMachine) lookup(t *rapid.T) {
	a := drawAddr(t, "addr")
	s.c.Reset()
	got := s.r.GetKprobe(a, s.c)
	if want := s.m.entry[a]; got != want {
		t.Fatalf("get_kprobe(%#x) = %p, model %p", a, got, want)
	}
	want, _ := s.chainPos(a)
	if v := s.c.Total(opHashVisit); v != want {
		t.Fatalf("get_kprobe(%#x) visited %d, model %d", a, v, want)
	}
}

func (s *registryMachine) rangeQuery(t *rapid.T) {
	lo := drawAddr(t, "lo")
	span := uint64(rapid.IntRange(0, 40).Draw(t, "span"))
	desc := rapid.Bool().Draw(t, "desc")
	closed := rapid.Bool().Draw(t, "closed")
	hi := lo + span
	if hi < lo {
		hi = math.MaxUint64
	}
	var it RangeIter
	var want []uint64
	switch {
	case closed && desc:
		it, want = s.r.RangeClosedDesc(lo, hi, s.c), s.m.between(lo, hi)
	case closed:
		it, want = s.r.RangeClosed(lo, hi, s.c), s.m.between(lo, hi)
	case desc:
		it = s.r.RangeDesc(lo, hi, s.c)
	default:
		it = s.r.Range(lo, hi, s.c)
	}
	if !closed && hi > lo {
		want = s.m.between(lo, hi-1)
	}
	if desc {
		slices.Reverse(want)
	}
	s.c.Reset()
	got := []uint64{}
	for it.Next() {
		p := it.Probe()
		if p != s.m.entry[p.Addr] {
			t.Fatalf("range returned %p at %#x, model entry %p", p, p.Addr, s.m.entry[p.Addr])
		}
		got = append(got, p.Addr)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if !slices.Equal(got, append([]uint64{}, want...)) {
		t.Fatalf("range [%#x,%#x] closed=%v desc=%v = %#x, model %#x", lo, hi, closed, desc, got, want)
	}
	if st := s.c.Total(opTreeStep); st != uint64(len(want)) {
		t.Fatalf("range made %d steps for %d results", st, len(want))
	}
}

func (s *registryMachine) walk(t *rapid.T) {
	back := rapid.IntRange(0, MaxLookBack).Draw(t, "back")
	q := drawAddr(t, "start")
	n := rapid.IntRange(1, 40).Draw(t, "queries")
	s.c.Reset()
	it := s.r.AddrIter(back, s.c)
	first := q
	for k := range n {
		if _, err := it.Query(q); err != nil {
			t.Fatalf("query %d at %#x: %v", k, q, err)
		}
		lo := subClamp(q, uint64(back))
		want := s.m.between(lo, q)
		if got := addrsOf(it.Window()); !slices.Equal(got, want) {
			t.Fatalf("window at %#x (back %d) = %#x, model %#x", q, back, got, want)
		}
		if at, want := it.At(), s.m.entry[q]; at != want {
			t.Fatalf("At(%#x) = %p, model %p", q, at, want)
		}
		d := uint64(rapid.IntRange(0, 6).Draw(t, "delta"))
		if q+d < q {
			break
		}
		q += d
	}
	passed := len(s.m.between(subClamp(first, uint64(back)), it.LastQuery()))
	if st := s.c.Total(opTreeStep); st != uint64(passed) {
		t.Fatalf("walk made %d steps, passed %d entries", st, passed)
	}
	if it.LastQuery() > 0 {
		if _, err := it.Query(it.LastQuery() - 1); !errors.Is(err, ErrNotMonotonic) {
			t.Fatalf("decreasing query accepted: %v", err)
		}
	}
}

func (s *registryMachine) mutateUnderCursor(t *rapid.T) {
	it := s.r.AddrIter(4, nil)
	rit := s.r.RangeClosed(0, math.MaxUint64, nil)
	a := drawAddr(t, "q")
	if _, err := it.Query(a); err != nil {
		t.Fatal(err)
	}
	live := rit.Next()
	s.register(t)
	if _, err := it.Query(a); !errors.Is(err, ErrStaleCursor) {
		t.Fatalf("cursor survived a registration: %v", err)
	}
	if live && (rit.Next() || !errors.Is(rit.Err(), ErrStaleCursor)) {
		t.Fatalf("range iterator survived a registration: %v", rit.Err())
	}
}

func (s *registryMachine) check(t *rapid.T) {
	modelSteps.Add(1)
	if s.r.Len() != len(s.m.addrs) {
		t.Fatalf("Len %d, model %d", s.r.Len(), len(s.m.addrs))
	}
	if got := addrsOf(s.r.Entries()); !slices.Equal(got, append([]uint64{}, s.m.addrs...)) {
		t.Fatalf("table entries %#x, model %#x", got, s.m.addrs)
	}
	tree, err := collect(s.r.RangeClosed(0, math.MaxUint64, nil))
	if err != nil || !slices.Equal(tree, append([]uint64{}, s.m.addrs...)) {
		t.Fatalf("tree in-order %#x (%v), model %#x", tree, err, s.m.addrs)
	}
	if h := s.r.TreeHeight(); h > rbHeightBound(s.r.Len()) {
		t.Fatalf("tree height %d at N=%d", h, s.r.Len())
	}
	for b := range KprobeTableSize {
		if got := addrsOf(s.r.Chain(b)); !slices.Equal(got, append([]uint64{}, s.m.chains[b]...)) {
			t.Fatalf("chain %d = %#x, model %#x", b, got, s.m.chains[b])
		}
	}
	for a, ch := range s.m.children {
		if got := s.m.entry[a].Children(); !slices.Equal(got, ch) {
			t.Fatalf("aggregator %#x list differs from the model", a)
		}
	}
}

// TestRegistryModel runs random register / unregister / lookup / range /
// monotonic-walk sequences against refModel, step by step. The seed is
// fixed in TestMain (-rapid.seed overrides it); the run must execute at
// least 10,000 steps.
func TestRegistryModel(t *testing.T) {
	modelSteps.Store(0)
	rapid.Check(t, func(t *rapid.T) {
		s := &registryMachine{
			r: NewRegistry(true),
			m: &refModel{entry: map[uint64]*Kprobe{}, children: map[uint64][]*Kprobe{}},
			c: sim.NewCounters(false),
		}
		t.Repeat(map[string]func(*rapid.T){
			"register":   s.register,
			"register2":  s.register, // bias towards growth
			"unregister": s.unregister,
			"lookup":     s.lookup,
			"range":      s.rangeQuery,
			"walk":       s.walk,
			"stale":      s.mutateUnderCursor,
			"":           s.check,
		})
	})
	if n := modelSteps.Load(); n < 10000 && !t.Failed() {
		t.Fatalf("only %d model steps ran, want >= 10000 (raise -rapid.steps)", n)
	}
	t.Logf("%d model steps", modelSteps.Load())
}
