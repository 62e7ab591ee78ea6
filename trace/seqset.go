package trace

// seqSet holds the live members of a kernel list by insertion sequence, so
// the position of an entry in the list (how far a walk from either end
// goes before it reaches the entry) is answered in O(log n) instead of by
// walking. A Fenwick tree over sequence numbers; grows by doubling.
type seqSet struct {
	live []bool
	bit  []int
	n    int // live members
}

func (s *seqSet) grow(seq int) {
	if seq < len(s.live) {
		return
	}
	size := max(64, len(s.live))
	for size <= seq {
		size *= 2
	}
	live := make([]bool, size)
	copy(live, s.live)
	s.live = live
	s.bit = make([]int, size+1)
	for i, l := range s.live {
		if l {
			s.add(i, 1)
		}
	}
}

func (s *seqSet) add(seq, d int) {
	for i := seq + 1; i < len(s.bit); i += i & -i {
		s.bit[i] += d
	}
}

// insert adds seq (a new, highest sequence number).
func (s *seqSet) insert(seq int) {
	s.grow(seq)
	s.live[seq] = true
	s.add(seq, 1)
	s.n++
}

// remove drops seq.
func (s *seqSet) remove(seq int) {
	if seq < len(s.live) && s.live[seq] {
		s.live[seq] = false
		s.add(seq, -1)
		s.n--
	}
}

// before counts live members with a sequence number below seq.
func (s *seqSet) before(seq int) int {
	seq = min(seq, len(s.live))
	n := 0
	for i := seq; i > 0; i -= i & -i {
		n += s.bit[i]
	}
	return n
}

// after counts live members with a sequence number above seq.
func (s *seqSet) after(seq int) int {
	n := s.n - s.before(seq)
	if seq < len(s.live) && s.live[seq] {
		n--
	}
	return n
}

// len returns the number of live members.
func (s *seqSet) len() int { return s.n }
