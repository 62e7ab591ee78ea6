package kprobes

// seqCount is simulator-side bookkeeping for a kernel list that new nodes
// join at the head (hlist_add_head_rcu, list_add_rcu) and old ones leave
// from anywhere: each node gets the next sequence number when it joins,
// and a walk from the head reaches a node after visiting exactly the live
// nodes with a sequence number at least its own. A Fenwick tree over the
// sequence numbers answers that count, and the newest live node, in
// O(log n), so the simulator can add a walk's kernel count without walking.
type seqCount struct {
	tree []int32 // Fenwick tree, 1-based: tree[i] counts live seqs in (i-lowbit(i), i]
	live []bool  // live[s]: seq s is on the list
	n    int     // live nodes
	next int     // the sequence number the next node gets (from 1)
}

// join puts a new node at the head and returns its sequence number.
func (f *seqCount) join() int {
	f.next++
	f.add(f.next)
	return f.next
}

// add puts sequence number s (not live) back on the list: for sets keyed
// by another list's sequence numbers (the slot pages that have room).
func (f *seqCount) add(s int) {
	if s >= len(f.tree) {
		f.grow(s)
	}
	if s <= 0 || f.live[s] {
		panic("kprobes: seqCount.add of a live or invalid node")
	}
	f.live[s] = true
	f.n++
	for i := s; i < len(f.tree); i += i & -i {
		f.tree[i]++
	}
}

// has reports whether s is on the list.
func (f *seqCount) has(s int) bool { return s > 0 && s < len(f.live) && f.live[s] }

// leave takes node s off the list.
func (f *seqCount) leave(s int) {
	if !f.has(s) {
		panic("kprobes: seqCount.leave of a node not on the list")
	}
	f.live[s] = false
	f.n--
	for i := s; i < len(f.tree); i += i & -i {
		f.tree[i]--
	}
}

// grow makes room for sequence number s, rebuilding the tree in O(size).
func (f *seqCount) grow(s int) {
	size := max(2*len(f.tree), s+1, 16)
	live := make([]bool, size)
	copy(live, f.live)
	tree := make([]int32, size)
	for i := 1; i < size; i++ {
		if live[i] {
			tree[i]++
		}
		if j := i + i&-i; j < size {
			tree[j] += tree[i]
		}
	}
	f.live, f.tree = live, tree
}

// upTo returns the live nodes with sequence number <= s.
func (f *seqCount) upTo(s int) int {
	s = min(s, len(f.tree)-1)
	n := 0
	for i := s; i > 0; i -= i & -i {
		n += int(f.tree[i])
	}
	return n
}

// position returns node s's 1-based position in a walk from the head: the
// live nodes at least as new as s.
func (f *seqCount) position(s int) int { return f.n - f.upTo(s-1) }

// newest returns the sequence number of the head (0 if the list is empty).
func (f *seqCount) newest() int {
	if f.n == 0 {
		return 0
	}
	// Fenwick descent: the smallest s with upTo(s) == n.
	pos, rem := 0, f.n
	step := 1
	for step*2 < len(f.tree) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if next := pos + step; next < len(f.tree) && int(f.tree[next]) < rem {
			pos = next
			rem -= int(f.tree[next])
		}
	}
	return pos + 1
}
