package kprobes

import (
	"fmt"

	"github.com/emirpasic/gods/trees/redblacktree"
	"github.com/kpsim/kpsim/maple"
	"github.com/kpsim/kpsim/sim"
)

// AddrTree is the P4 address-ordered tree kept in lock-step with
// kprobe_table, chosen once when the registry is built: an rbtree
// (kprobe-tree), a maple-like B-tree (kprobe-btree), or none (upstream).
// Each method counts what the tree it models walks. The range and address
// iterators reach the tree only through SeekGE, SeekLE and the Cursor they
// return, so a wrapper (SimOptions.WrapTree) sits under them. Implemented
// in this package only; a wrapper embeds the AddrTree it wraps.
type AddrTree interface {
	// SeekGE returns a cursor at the first entry >= addr (invalid if
	// none): one descent.
	SeekGE(addr uint64, c *sim.Counters) Cursor
	// SeekLE returns a cursor at the last entry <= addr (invalid if none).
	SeekLE(addr uint64, c *sim.Counters) Cursor

	// present reports whether the registry keeps a tree at all.
	present() bool
	// reserve stores p in a tree that allocates (the B-tree; may fail
	// with an allocation fault of f) before the hash table is touched;
	// unreserve undoes it uncounted when the hash table then fails.
	reserve(p *Kprobe, f *sim.Faults, c *sim.Counters) error
	unreserve(p *Kprobe)
	// link stores p in a tree that does not allocate (the rbtree: rb_add)
	// after the hash table took it.
	link(p *Kprobe, c *sim.Counters)
	// replace puts ap in old's node (rb_replace_node).
	replace(old, ap *Kprobe, c *sim.Counters)
	// erase removes p (rb_erase).
	erase(p *Kprobe, c *sim.Counters)
	height() int
	bytes(entries int) []sim.NamedBytes
	// entries returns the tree's entries in order, checking its own
	// consistency (nil, nil without a tree).
	entries() ([]*Kprobe, error)
}

// noTree is the upstream registry: kprobe_table only.
type noTree struct{}

func (noTree) SeekGE(uint64, *sim.Counters) Cursor               { return Cursor{} }
func (noTree) SeekLE(uint64, *sim.Counters) Cursor               { return Cursor{} }
func (noTree) present() bool                                     { return false }
func (noTree) reserve(*Kprobe, *sim.Faults, *sim.Counters) error { return nil }
func (noTree) unreserve(*Kprobe)                                 {}
func (noTree) link(*Kprobe, *sim.Counters)                       {}
func (noTree) replace(_, _ *Kprobe, _ *sim.Counters)             {}
func (noTree) erase(*Kprobe, *sim.Counters)                      {}
func (noTree) height() int                                       { return 0 }
func (noTree) bytes(int) []sim.NamedBytes                        { return nil }
func (noTree) entries() ([]*Kprobe, error)                       { return nil, nil }

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

func (x *rbIndex) present() bool                                     { return true }
func (x *rbIndex) reserve(*Kprobe, *sim.Faults, *sim.Counters) error { return nil }
func (x *rbIndex) unreserve(*Kprobe)                                 {}

// link models rb_add (insert).
func (x *rbIndex) link(p *Kprobe, c *sim.Counters) { x.insert(p, c) }

// SeekGE is lowerBound as a cursor.
func (x *rbIndex) SeekGE(addr uint64, c *sim.Counters) Cursor {
	return Cursor{rb: x.lowerBound(addr, c)}
}

// SeekLE is floor as a cursor.
func (x *rbIndex) SeekLE(addr uint64, c *sim.Counters) Cursor {
	return Cursor{rb: x.floor(addr, c)}
}

// bytes: an rb_node (3 words) per entry, inside struct kprobe.
func (x *rbIndex) bytes(n int) []sim.NamedBytes {
	return []sim.NamedBytes{{Name: "kprobe.tree.bytes", Bytes: int64(n) * 24}}
}

func (x *rbIndex) entries() ([]*Kprobe, error) {
	vs := x.t.Values()
	tree := make([]*Kprobe, len(vs))
	for i, v := range vs {
		tree[i] = v.(*Kprobe)
	}
	for i, k := range x.t.Keys() {
		if k.(uint64) != tree[i].Addr {
			return nil, fmt.Errorf("registry: rbtree node keyed %#x holds the probe at %#x", k.(uint64), tree[i].Addr)
		}
	}
	return tree, nil
}

// btIndex is kprobe-btree's P4 tree: a maple-like B-tree of 256-byte
// nodes, which allocates on insert.
type btIndex struct{ t *maple.Tree[*Kprobe] }

func newBTIndex() btIndex {
	return btIndex{t: maple.New(func(p *Kprobe) uint64 { return p.Addr }, nil)}
}

func (x btIndex) present() bool { return true }

// reserve stores p first, as a real conversion would preallocate the
// maple nodes (mas_preallocate) before touching the hash table.
func (x btIndex) reserve(p *Kprobe, f *sim.Faults, c *sim.Counters) error {
	x.t.Faults = f
	return x.t.Insert(p, c)
}

func (x btIndex) unreserve(p *Kprobe)                    { x.t.Delete(p.Addr, nil) }
func (x btIndex) link(*Kprobe, *sim.Counters)            {}
func (x btIndex) replace(_, ap *Kprobe, c *sim.Counters) { x.t.Replace(ap, c) }
func (x btIndex) erase(p *Kprobe, c *sim.Counters)       { x.t.Delete(p.Addr, c) }
func (x btIndex) height() int                            { return x.t.Height() }

func (x btIndex) bytes(int) []sim.NamedBytes {
	return []sim.NamedBytes{{Name: "kprobe.btree.bytes", Bytes: x.t.Bytes()}}
}

func (x btIndex) entries() ([]*Kprobe, error) { return x.t.Entries(), nil }

// SeekGE is mas_find's descent (maple.search/node/line counts).
func (x btIndex) SeekGE(addr uint64, c *sim.Counters) Cursor {
	return Cursor{mt: x.t.SeekGE(addr, c), isBT: true}
}

// SeekLE is mas_find_rev's descent.
func (x btIndex) SeekLE(addr uint64, c *sim.Counters) Cursor {
	return Cursor{mt: x.t.SeekLE(addr, c), isBT: true}
}

// Cursor is a position in the P4 tree, whichever way it is kept: an rb
// node, or a B-tree cursor (kprobe-btree). The zero Cursor is invalid. A
// cursor is a value (the iterators hold it without allocating); it must
// not be used after the registry changed.
type Cursor struct {
	rb   *rbNode
	mt   maple.Cursor[*Kprobe]
	isBT bool
}

func (cur *Cursor) ok() bool {
	if cur.isBT {
		return cur.mt.Valid()
	}
	return cur.rb != nil
}

func (cur *Cursor) probe() *Kprobe {
	if cur.isBT {
		return cur.mt.Entry()
	}
	return probe(cur.rb)
}

func (cur *Cursor) key() uint64 { return cur.probe().Addr }

// next moves to the in-order successor: one kprobe.tree.step (rb_next), or
// the B-tree's mas_next counts.
func (cur *Cursor) next(c *sim.Counters) {
	if cur.isBT {
		cur.mt.Next(c)
		return
	}
	c.Inc(opTreeStep)
	cur.rb = next(cur.rb)
}

// prev moves to the in-order predecessor (rb_prev / mas_prev).
func (cur *Cursor) prev(c *sim.Counters) {
	if cur.isBT {
		cur.mt.Prev(c)
		return
	}
	c.Inc(opTreeStep)
	cur.rb = prev(cur.rb)
}

// drop releases the position (the iterator is done).
func (cur *Cursor) drop() { *cur = Cursor{} }
