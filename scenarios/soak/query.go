package soak

import (
	"fmt"

	"github.com/kpsim/kpsim/kprobes"
)

// linearSpan is the widest range the linear form answers by get_kprobe on
// every address (the hash path); a wider one is answered from the whole
// registry (Entries, simulator-side).
const linearSpan = 64

// query answers a registry query step. With the P4 tree (or its B-tree)
// the answer comes from the iterators the series added (Range, RangeDesc,
// RangeClosed, OptimizedWindow, RecoverWindow, CheckOptimizedRange,
// AddrIter); without it, from the upstream lookups those iterators replace
// (get_kprobe per address, or the table's content). Either way the answer
// is the entries in the order the kernel's loop meets them.
func (s *sut) query(st *Step) {
	r := s.m.KP.Reg
	c := s.m.C
	tree := r.HasTree()
	switch st.Kind {
	case KRange:
		lo, hi, empty := st.A, st.B-1, st.B <= st.A
		if st.Closed {
			hi, empty = st.B, st.B < st.A
		}
		if tree {
			var it kprobes.RangeIter
			switch {
			case st.Closed && st.Desc:
				it = r.RangeClosedDesc(st.A, st.B, c)
			case st.Closed:
				it = r.RangeClosed(st.A, st.B, c)
			case st.Desc:
				it = r.RangeDesc(st.A, st.B, c)
			default:
				it = r.Range(st.A, st.B, c)
			}
			s.drain(&it)
			return
		}
		if empty {
			s.b.WriteString("[]")
			return
		}
		s.linearRange(lo, hi, st.Desc)
	case KOptWin:
		if tree {
			it := r.OptimizedWindow(st.A, c)
			s.drain(&it)
			return
		}
		if st.A == 0 {
			s.b.WriteString("[]")
			return
		}
		s.linearRange(subClamp(st.A, kprobes.MaxOptimizedLength-1), st.A-1, true)
	case KRecWin:
		if tree {
			it := r.RecoverWindow(st.A, c)
			s.drain(&it)
			return
		}
		s.linearRange(subClamp(st.A, kprobes.Jmp32InsnSize-1), st.A, true)
	case KCheckOpt:
		if tree {
			it := r.CheckOptimizedRange(st.A, st.N, c)
			s.drain(&it)
			return
		}
		if st.N <= 1 || st.A == ^uint64(0) {
			s.b.WriteString("[]")
			return
		}
		last := st.A + uint64(st.N) - 1
		if last < st.A {
			last = ^uint64(0)
		}
		s.linearRange(st.A+1, last, false)
	case KAddrIter:
		if tree {
			it := r.AddrIter(st.N, c)
			for _, q := range st.Q {
				if _, err := it.Query(q); err != nil {
					fmt.Fprintf(&s.b, " %#x:err(%v)", q, err)
					return
				}
				fmt.Fprintf(&s.b, " %#x:", q)
				s.entries(it.Window())
			}
			return
		}
		if st.N < 0 || st.N > kprobes.MaxLookBack {
			if len(st.Q) > 0 {
				fmt.Fprintf(&s.b, " %#x:err(%v)", st.Q[0], kprobes.ErrLookBack)
			}
			return
		}
		for i, q := range st.Q {
			if i > 0 && q < st.Q[i-1] {
				fmt.Fprintf(&s.b, " %#x:err(%v)", q, kprobes.ErrNotMonotonic)
				return
			}
			fmt.Fprintf(&s.b, " %#x:", q)
			s.linearRange(subClamp(q, uint64(st.N)), q, false)
		}
	}
}

func subClamp(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func (s *sut) drain(it *kprobes.RangeIter) {
	s.b.WriteByte('[')
	n := 0
	for it.Next() {
		if n > 0 {
			s.b.WriteByte(' ')
		}
		s.entry(it.Probe())
		n++
	}
	s.b.WriteByte(']')
	if err := it.Err(); err != nil {
		fmt.Fprintf(&s.b, " err(%v)", err)
	}
}

func (s *sut) entries(ps []*kprobes.Kprobe) {
	s.b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			s.b.WriteByte(' ')
		}
		s.entry(p)
	}
	s.b.WriteByte(']')
}

func (s *sut) entry(p *kprobes.Kprobe) {
	fmt.Fprintf(&s.b, "%#x/%x", p.Addr, uint32(s.entryDigest(p)))
}

// linearRange writes the entries with lo <= addr <= hi, ascending or
// descending: by get_kprobe at every address for a narrow range, else from
// the registry's content.
func (s *sut) linearRange(lo, hi uint64, desc bool) {
	r := s.m.KP.Reg
	s.b.WriteByte('[')
	n := 0
	emit := func(p *kprobes.Kprobe) {
		if n > 0 {
			s.b.WriteByte(' ')
		}
		s.entry(p)
		n++
	}
	if hi-lo < linearSpan {
		for i := uint64(0); i <= hi-lo; i++ {
			a := lo + i
			if desc {
				a = hi - i
			}
			if p := r.GetKprobe(a, s.m.C); p != nil {
				emit(p)
			}
		}
	} else {
		es := r.Entries()
		if desc {
			for i := len(es) - 1; i >= 0; i-- {
				if a := es[i].Addr; a >= lo && a <= hi {
					emit(es[i])
				}
			}
		} else {
			for _, p := range es {
				if p.Addr >= lo && p.Addr <= hi {
					emit(p)
				}
			}
		}
	}
	s.b.WriteByte(']')
}
