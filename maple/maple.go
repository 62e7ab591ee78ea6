// Package maple is kpsim's stand-in for lib/maple_tree.c: an ordered index
// of uint64-keyed entries with node geometry chosen like a maple range
// node, over github.com/google/btree, with every node visit and cache line
// the kernel would load counted. The kprobe-btree design puts it in place of
// the P4 rbtree; reservation-btree puts it in place of the late-init sorted
// arrays.
//
// What Linux does (6.1, include/linux/maple_tree.h, lib/maple_tree.c): a
// maple tree is a B-tree of 256-byte nodes. A maple_range_64 node (the
// node type of a tree of sparse entries) is a parent pointer, 15 pivots and
// 16 slots (MAPLE_RANGE64_SLOTS on 64-bit): pivot i is the last index that
// slot i covers. A lookup (mtree_load, mas_walk) descends from the root,
// in each node scanning the pivots in order until one is >= the index
// (mtree_range_walk), and follows that slot. mas_next and mas_prev move
// along a leaf's slots and climb through parent pointers to the next leaf.
// Stores split a full node (allocating nodes from maple_node_cache, which can
// fail: -ENOMEM) and rebalance underfull ones on erase.
//
// The mapping:
//
//   - Fan-out and size: google/btree of degree 8 holds at most 15 items and
//     16 children per node: maple_range_64's 15 pivots and 16 slots. Each
//     node is charged 256 bytes (NodeBytes).
//   - Node visits: every node the walk loads counts one maple.node, on the
//     real google/btree path. google/btree is a classic B-tree (entries also
//     in internal nodes, so a walk may stop above the leaves) where maple
//     keeps entries in leaves only; and maple spends a slot on the NULL gap
//     between two sparse entries, so a maple leaf holds ~8 probe entries
//     where this tree holds up to 15. Both make these counts a lower bound of
//     a real maple tree's: about one level less at 50k entries.
//   - Cache lines: a node visit loads the pivots scanned (linearly, as
//     mtree_range_walk does) and the slot taken: pivots occupy bytes 8-127
//     (lines 0-1), slots bytes 128-255 (lines 2-3). The first line is priced
//     with the node; every further line counts one maple.line.
//   - Steps: a cursor step from a leaf counts maple.slot (the next slot, or
//     the check that the node ends there), plus maple.line on entering a new
//     line; moving to another node counts maple.node per node entered, as
//     mas_next climbs and descends.
//
// The package reads google/btree's node structure (read-only) to walk it
// and count; mirror types checked against the library's own at init keep
// that honest (a changed layout panics at start-up, so every test fails).
package maple

import (
	"errors"
	"reflect"
	"sort"
	"unsafe"

	"github.com/google/btree"

	"github.com/kpsim/kpsim/sim"
)

// Geometry of a maple_range_64 node (include/linux/maple_tree.h, 64-bit).
const (
	Slots     = 16  // MAPLE_RANGE64_SLOTS
	Pivots    = 15  // MAPLE_RANGE64_SLOTS - 1
	NodeBytes = 256 // sizeof(struct maple_node)
	degree    = Slots / 2
	lineBytes = 64
	pivotOff  = 8   // after the parent pointer
	slotOff   = 128 // after parent and 15 pivots
	maxDepth  = 24  // a degree-8 B-tree of 2^64 entries is ~21 levels deep
)

// ErrNoMem is maple's -ENOMEM: a store needed new nodes and
// maple_node_cache could not supply them.
var ErrNoMem = errors.New("maple: node allocation failed (-ENOMEM)")

// ErrExists is -EEXIST from mtree_insert: the index is taken.
var ErrExists = errors.New("maple: index already present (-EEXIST)")

// FaultNodeAlloc makes the node allocation of a store that must split fail
// (mas_preallocate / mas_alloc_nodes: all or nothing, the tree unchanged).
var FaultNodeAlloc = sim.NewFaultPoint("maple.node.alloc",
	"a maple-tree store that must split a node cannot allocate from maple_node_cache (-ENOMEM, tree unchanged)")

// gnode and gtree mirror google/btree v1.1.3's node[T] and BTreeG[T]; init
// checks them field by field.
type gnode[T any] struct {
	items    []T
	children []*gnode[T]
	//lint:ignore U1000 mirrors google/btree's node layout
	cow *struct{}
}

type gtree[T any] struct {
	degree int
	length int
	root   *gnode[T]
	cow    *struct{}
}

func init() { checkMirror[uint64]() }

func checkMirror[T any]() {
	bt := reflect.TypeOf(btree.BTreeG[T]{})
	mt := reflect.TypeOf(gtree[T]{})
	same := func(a, b reflect.Type) {
		if a.Size() != b.Size() || a.NumField() != b.NumField() {
			panic("maple: google/btree's layout changed (" + a.String() + ")")
		}
		for i := 0; i < a.NumField(); i++ {
			fa, fb := a.Field(i), b.Field(i)
			if fa.Name != fb.Name || fa.Offset != fb.Offset || fa.Type.Kind() != fb.Type.Kind() {
				panic("maple: google/btree's layout changed (" + a.String() + "." + fa.Name + ")")
			}
		}
	}
	same(bt, mt)
	same(bt.Field(2).Type.Elem(), mt.Field(2).Type.Elem())
}

// Tree is an ordered index of entries keyed by key(entry), unique keys.
type Tree[T any] struct {
	bt     *btree.BTreeG[T]
	key    func(T) uint64
	Faults *sim.Faults // the fault plan node allocations consult (may be nil)
}

// New returns an empty tree. faults may be nil.
func New[T any](key func(T) uint64, faults *sim.Faults) *Tree[T] {
	less := func(a, b T) bool { return key(a) < key(b) }
	return &Tree[T]{bt: btree.NewG(degree, less), key: key, Faults: faults}
}

func (t *Tree[T]) root() *gnode[T] {
	return (*gtree[T])(unsafe.Pointer(t.bt)).root
}

// Len returns the number of entries.
func (t *Tree[T]) Len() int { return t.bt.Len() }

// Height returns the number of levels (0 when empty).
func (t *Tree[T]) Height() int {
	h := 0
	for n := t.root(); n != nil; h++ {
		if len(n.children) == 0 {
			return h + 1
		}
		n = n.children[0]
	}
	return h
}

// Nodes returns the number of nodes. Simulator-side: walks the tree.
func (t *Tree[T]) Nodes() int {
	var count func(*gnode[T]) int
	count = func(n *gnode[T]) int {
		if n == nil {
			return 0
		}
		s := 1
		for _, c := range n.children {
			s += count(c)
		}
		return s
	}
	return count(t.root())
}

// Bytes returns the tree's memory: NodeBytes per node.
func (t *Tree[T]) Bytes() int64 { return int64(t.Nodes()) * NodeBytes }

// Entries returns every entry in key order. Simulator-side, uncounted.
func (t *Tree[T]) Entries() []T {
	out := make([]T, 0, t.Len())
	t.bt.Ascend(func(v T) bool { out = append(out, v); return true })
	return out
}

// countNode counts one node visit that scans pivots up to position i (0-
// based, i == len(items) when the walk leaves by the last slot) and loads
// slot i: the first line goes with the node, the rest are maple.line.
func countNode(c *sim.Counters, nitems, i int) {
	c.Inc(opNode)
	scanned := min(i+1, nitems)
	lines := 1 // pivot lines 0..(8+8*scanned-1)/64, then the slot's line
	if scanned > 0 {
		lines = (pivotOff+8*scanned-1)/lineBytes + 1
	}
	lines++ // slot i's line (2 or 3), never a pivot line
	c.Add(opLine, uint64(lines-1))
}

// descend walks from the root to key, counting, and returns the path of
// nodes and positions (first item >= key in each node), whether key was
// found (in the last node of the path at its position) and the number of
// full nodes on the path.
func (t *Tree[T]) descend(key uint64, c *sim.Counters, p *path[T]) (found bool, full int) {
	c.Inc(opSearch)
	p.depth = 0
	for n := t.root(); n != nil; {
		i := sort.Search(len(n.items), func(i int) bool { return t.key(n.items[i]) >= key })
		found = i < len(n.items) && t.key(n.items[i]) == key
		countNode(c, len(n.items), i)
		if len(n.items) >= 2*degree-1 {
			full++
		}
		p.push(n, i)
		if found || len(n.children) == 0 {
			return found, full
		}
		n = n.children[i]
	}
	return false, full
}

// Insert models mtree_insert(mt, key, entry): a walk from the root
// (counted), the leaf store (maple.store) and one maple.split per full node
// on the way (google/btree splits every full node it passes, as maple
// splits a full node and its full ancestors). If a split is needed and
// FaultNodeAlloc fires, nothing changes and ErrNoMem is returned.
func (t *Tree[T]) Insert(v T, c *sim.Counters) error {
	var p path[T]
	found, full := t.descend(t.key(v), c, &p)
	if found {
		return ErrExists
	}
	if full > 0 && t.Faults.Fail(FaultNodeAlloc) {
		return ErrNoMem
	}
	c.Inc(opStore)
	c.Add(opSplit, uint64(full))
	t.bt.ReplaceOrInsert(v)
	return nil
}

// Replace models a store of a new entry at an existing index (mas_store
// over the same range): a walk from the root (maple entries carry no node
// pointer back into the tree, unlike an intrusive rb_node) and a slot
// store. It reports whether the key was present.
func (t *Tree[T]) Replace(v T, c *sim.Counters) bool {
	var p path[T]
	found, _ := t.descend(t.key(v), c, &p)
	if !found {
		return false
	}
	c.Inc(opSlotStore)
	// In place, as mas_wr_slot_store: google/btree's ReplaceOrInsert would
	// split full nodes on the way down, which a same-key store never needs.
	top := p.f[p.depth-1]
	top.n.items[top.i] = v
	return true
}

// Delete models mtree_erase(mt, key): a walk from the root (counted) and
// the removal with its rebalancing (maple.erase, amortised). It reports
// whether the key was present.
func (t *Tree[T]) Delete(key uint64, c *sim.Counters) bool {
	var p path[T]
	found, _ := t.descend(key, c, &p)
	if !found {
		return false
	}
	c.Inc(opErase)
	top := p.f[p.depth-1] // the entry found ends the path
	t.bt.Delete(top.n.items[top.i])
	return true
}

type frame[T any] struct {
	n *gnode[T]
	i int // the current item (top frame) or the child taken (ancestors)
}

type path[T any] struct {
	f     [maxDepth]frame[T]
	depth int
}

func (p *path[T]) push(n *gnode[T], i int) {
	p.f[p.depth] = frame[T]{n, i}
	p.depth++
}

// Cursor is a position in a tree: an entry and the path to it, as a
// ma_state after a walk. The zero Cursor is invalid. A cursor must not be
// used after the tree changed (the kprobes iterators check the registry's
// generation first).
type Cursor[T any] struct {
	p     path[T]
	valid bool
}

// Valid reports whether the cursor is at an entry.
func (cur *Cursor[T]) Valid() bool { return cur.valid }

// Entry returns the entry at the cursor (the zero T when invalid).
func (cur *Cursor[T]) Entry() T {
	if !cur.valid {
		var zero T
		return zero
	}
	f := cur.p.f[cur.p.depth-1]
	return f.n.items[f.i]
}

// SeekGE models mas_find from key: the first entry with key >= key.
// Counted: one maple.search, the walk's nodes and lines, and the climb to
// the next entry when the leaf holds none >= key.
func (t *Tree[T]) SeekGE(key uint64, c *sim.Counters) Cursor[T] {
	var cur Cursor[T]
	found, _ := t.descend(key, c, &cur.p)
	if cur.p.depth == 0 {
		return cur
	}
	top := &cur.p.f[cur.p.depth-1]
	if found || top.i < len(top.n.items) {
		cur.valid = true
		return cur
	}
	cur.valid = cur.climb(c, true)
	return cur
}

// SeekLE models mas_find_rev from key: the last entry with key <= key.
func (t *Tree[T]) SeekLE(key uint64, c *sim.Counters) Cursor[T] {
	var cur Cursor[T]
	found, _ := t.descend(key, c, &cur.p)
	if cur.p.depth == 0 {
		return cur
	}
	if found {
		cur.valid = true
		return cur
	}
	top := &cur.p.f[cur.p.depth-1]
	if top.i > 0 {
		top.i--
		cur.valid = true
		return cur
	}
	cur.valid = cur.climb(c, false)
	return cur
}

// climb pops exhausted nodes until an ancestor has an item beyond the
// child taken, after it (next) or before it (prev, then stepped to); one
// maple.node per ancestor re-entered.
func (cur *Cursor[T]) climb(c *sim.Counters, next bool) bool {
	for cur.p.depth > 1 {
		cur.p.depth--
		c.Inc(opNode)
		top := &cur.p.f[cur.p.depth-1]
		if next && top.i < len(top.n.items) {
			return true
		}
		if !next && top.i > 0 {
			top.i--
			return true
		}
	}
	cur.p.depth = 0
	return false
}

func lineOf(off int) int { return off / lineBytes }

// stepLines counts the lines a move from item i to item j of one node
// newly touches (its pivot and its slot).
func stepLines(c *sim.Counters, i, j int) {
	var n uint64
	if lineOf(pivotOff+8*j) != lineOf(pivotOff+8*i) {
		n++
	}
	if lineOf(slotOff+8*j) != lineOf(slotOff+8*i) {
		n++
	}
	c.Add(opLine, n)
}

// Next models mas_next: the following entry. Counted: maple.slot for a
// move inside a leaf, maple.node per node entered otherwise.
func (cur *Cursor[T]) Next(c *sim.Counters) bool {
	if !cur.valid {
		return false
	}
	top := &cur.p.f[cur.p.depth-1]
	if len(top.n.children) == 0 {
		c.Inc(opSlot) // the next slot, or the node's end
		if top.i+1 < len(top.n.items) {
			stepLines(c, top.i, top.i+1)
			top.i++
			return true
		}
		cur.valid = cur.climb(c, true)
		return cur.valid
	}
	// internal item i: the leftmost entry of child i+1
	top.i++
	n := top.n.children[top.i]
	for {
		c.Inc(opNode)
		cur.p.push(n, 0)
		if len(n.children) == 0 {
			return true
		}
		n = n.children[0]
	}
}

// Prev models mas_prev: the preceding entry.
func (cur *Cursor[T]) Prev(c *sim.Counters) bool {
	if !cur.valid {
		return false
	}
	top := &cur.p.f[cur.p.depth-1]
	if len(top.n.children) == 0 {
		c.Inc(opSlot) // the previous slot, or the node's start
		if top.i > 0 {
			stepLines(c, top.i, top.i-1)
			top.i--
			return true
		}
		cur.valid = cur.climb(c, false)
		return cur.valid
	}
	// internal item i: the rightmost entry of child i
	n := top.n.children[top.i]
	for {
		c.Inc(opNode)
		if len(n.children) == 0 {
			cur.p.push(n, len(n.items)-1)
			return true
		}
		cur.p.push(n, len(n.children)-1)
		n = n.children[len(n.children)-1]
	}
}
