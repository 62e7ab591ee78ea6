package kprobes

import (
	"github.com/emirpasic/gods/trees/redblacktree"
	"github.com/kpsim/kpsim/maple"
	"github.com/kpsim/kpsim/sim"
)

// rbNode is a node of the probe tree. Only this file and iter.go look
// inside one, and only through key, probe, next and prev.
//
// gods' Remove copies the in-order predecessor's key and value into the
// node being removed when that node has two children, and unlinks the
// predecessor's node instead. A *rbNode held across a removal may therefore
// hold a different probe or be detached. Iterators never dereference a node
// after the registry changed: they check the registry's generation first
// (ErrStaleCursor).
type rbNode = redblacktree.Node

// rbIndex is kpsim's model of the P4 rbtree: an address-ordered red-black
// tree holding exactly the hashed entries. It is the only user of gods;
// counting happens here and in the iterators, never in callers.
type rbIndex struct {
	t *redblacktree.Tree
}

func cmpAddr(a, b any) int {
	x, y := a.(uint64), b.(uint64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func newRBIndex() *rbIndex { return &rbIndex{t: redblacktree.NewWith(cmpAddr)} }

func key(n *rbNode) uint64    { return n.Key.(uint64) }
func probe(n *rbNode) *Kprobe { return n.Value.(*Kprobe) }

// insert models rb_add(&p->rb, &kprobe_tree, less): a descent comparing the
// new key with each node down to a leaf position (counted: one search, one
// visit per node compared), then rb_insert_color (counted once). The
// descent below walks the real tree along the path Put takes.
func (x *rbIndex) insert(p *Kprobe, c *sim.Counters) {
	c.Inc(opTreeSearch)
	var visits uint64
	for n := x.t.Root; n != nil; {
		visits++
		if p.Addr < key(n) {
			n = n.Left
		} else {
			n = n.Right
		}
	}
	c.Add(opTreeVisit, visits)
	x.t.Put(p.Addr, p)
	c.Inc(opTreeInsert)
}

// replace models rb_replace_node(&old->rb, &p->rb, &kprobe_tree): O(1), no
// descent in the kernel (the node is intrusive); the lookup here is
// simulator-side and uncounted.
func (x *rbIndex) replace(old, p *Kprobe, c *sim.Counters) {
	n := x.t.GetNode(old.Addr)
	n.Value = p
	c.Inc(opTreeReplace)
}

// erase models rb_erase(&p->rb, &kprobe_tree). The kernel erases by node
// pointer, so there is no descent; the lookup here is simulator-side and
// uncounted. When the node has two children a replacement node is found by
// walking down a subtree: gods takes the in-order predecessor (rightmost of
// the left subtree), the kernel the successor (leftmost of the right
// subtree), mirror images of each other. The walk counted is the one this
// tree really performs, one kprobe.tree.visit per node loaded.
func (x *rbIndex) erase(p *Kprobe, c *sim.Counters) {
	n := x.t.GetNode(p.Addr)
	if n == nil {
		return
	}
	if n.Left != nil && n.Right != nil {
		var visits uint64 = 1
		for m := n.Left; m.Right != nil; m = m.Right {
			visits++
		}
		c.Add(opTreeVisit, visits)
	}
	x.t.Remove(p.Addr)
	c.Inc(opTreeErase)
}

// lowerBound returns the first node with key >= addr, or nil. One search
// and one visit per node compared.
func (x *rbIndex) lowerBound(addr uint64, c *sim.Counters) *rbNode {
	c.Inc(opTreeSearch)
	var best *rbNode
	var visits uint64
	for n := x.t.Root; n != nil; {
		visits++
		if key(n) >= addr {
			best = n
			n = n.Left
		} else {
			n = n.Right
		}
	}
	c.Add(opTreeVisit, visits)
	return best
}

// floor returns the last node with key <= addr, or nil. One search and one
// visit per node compared.
func (x *rbIndex) floor(addr uint64, c *sim.Counters) *rbNode {
	c.Inc(opTreeSearch)
	var best *rbNode
	var visits uint64
	for n := x.t.Root; n != nil; {
		visits++
		if key(n) <= addr {
			best = n
			n = n.Right
		} else {
			n = n.Left
		}
	}
	c.Add(opTreeVisit, visits)
	return best
}

// next models rb_next: the in-order successor, or nil. Counted by callers
// (one kprobe.tree.step per call).
func next(n *rbNode) *rbNode {
	if n.Right != nil {
		n = n.Right
		for n.Left != nil {
			n = n.Left
		}
		return n
	}
	for n.Parent != nil && n == n.Parent.Right {
		n = n.Parent
	}
	return n.Parent
}

// prev models rb_prev: the in-order predecessor, or nil.
func prev(n *rbNode) *rbNode {
	if n.Left != nil {
		n = n.Left
		for n.Right != nil {
			n = n.Right
		}
		return n
	}
	for n.Parent != nil && n == n.Parent.Left {
		n = n.Parent
	}
	return n.Parent
}

// height returns the number of nodes on the longest root-to-leaf path
// (simulator-side, for tests and reports).
func (x *rbIndex) height() int {
	var h func(*rbNode) int
	h = func(n *rbNode) int {
		if n == nil {
			return 0
		}
		return 1 + max(h(n.Left), h(n.Right))
	}
	return h(x.t.Root)
}

// cursor is a position in the P4 tree, whichever way it is kept: an rb
// node, or a B-tree cursor (kprobe-btree). The iterators only see this.
type cursor struct {
	rb   *rbNode
	mt   maple.Cursor[*Kprobe]
	isBT bool
}

// seekGE returns a cursor at the first entry >= addr (invalid if none):
// one descent, counted by the tree kind (kprobe.tree.search/visit, or
// maple.search/node/line).
func (r *Registry) seekGE(addr uint64, c *sim.Counters) cursor {
	if r.bt != nil {
		return cursor{mt: r.bt.SeekGE(addr, c), isBT: true}
	}
	return cursor{rb: r.tree.lowerBound(addr, c)}
}

// seekLE returns a cursor at the last entry <= addr (invalid if none).
func (r *Registry) seekLE(addr uint64, c *sim.Counters) cursor {
	if r.bt != nil {
		return cursor{mt: r.bt.SeekLE(addr, c), isBT: true}
	}
	return cursor{rb: r.tree.floor(addr, c)}
}

func (cur *cursor) ok() bool {
	if cur.isBT {
		return cur.mt.Valid()
	}
	return cur.rb != nil
}

func (cur *cursor) probe() *Kprobe {
	if cur.isBT {
		return cur.mt.Entry()
	}
	return probe(cur.rb)
}

func (cur *cursor) key() uint64 { return cur.probe().Addr }

// next moves to the in-order successor: one kprobe.tree.step (rb_next), or
// the B-tree's mas_next counts.
func (cur *cursor) next(c *sim.Counters) {
	if cur.isBT {
		cur.mt.Next(c)
		return
	}
	c.Inc(opTreeStep)
	cur.rb = next(cur.rb)
}

// prev moves to the in-order predecessor (rb_prev / mas_prev).
func (cur *cursor) prev(c *sim.Counters) {
	if cur.isBT {
		cur.mt.Prev(c)
		return
	}
	c.Inc(opTreeStep)
	cur.rb = prev(cur.rb)
}

// drop releases the position (the iterator is done).
func (cur *cursor) drop() { *cur = cursor{} }
