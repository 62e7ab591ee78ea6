package lib

import (
	"github.com/kpsim/kpsim/maple"
	"github.com/kpsim/kpsim/sim"
)

// KeyTree is the reservation-btree alternative to a late-init sorted
// array: a maple-like B-tree (package maple) over the positions of the
// array, keyed by the array's keys. Lookups walk the tree (maple.node,
// maple.line) instead of halving the array (the index's probe op); the
// walk from the lower bound then reads the same entries in address order
// (consecutive slots of a leaf), so the callers keep counting it per entry.
type KeyTree struct {
	t *maple.Tree[int]
	n int
}

// NewKeyTree builds the tree over positions 0..n-1 of an array sorted by
// key, inserting in order (each insert a counted walk and store, splits
// included). A repeated key keeps its first position, so SeekGE returns
// what LowerBound returns.
func NewKeyTree(n int, key func(int) uint64, c *sim.Counters) *KeyTree {
	kt := &KeyTree{t: maple.New(func(i int) uint64 { return key(i) }, nil), n: n}
	for i := 0; i < n; i++ {
		_ = kt.t.Insert(i, c) // ErrExists for a repeat: the first stays
	}
	return kt
}

// LowerBound returns the first position whose key is >= v (n if none), by
// one counted walk of the tree.
func (kt *KeyTree) LowerBound(v uint64, c *sim.Counters) int {
	cur := kt.t.SeekGE(v, c)
	if !cur.Valid() {
		return kt.n
	}
	return cur.Entry()
}

// Bytes returns the tree's memory: 256 bytes per node.
func (kt *KeyTree) Bytes() int64 { return kt.t.Bytes() }

// Height returns the tree's levels.
func (kt *KeyTree) Height() int { return kt.t.Height() }

// UseTree switches the index's lookups to a B-tree over its keys
// (reservation-btree); Bytes then reports the tree.
func (x *SortedIndex[T]) UseTree(key func(T) uint64, c *sim.Counters) {
	x.tree = NewKeyTree(len(x.Sorted), func(i int) uint64 { return key(x.Sorted[i]) }, c)
}

// Tree returns the B-tree the lookups use, or nil for the sorted array.
func (x *SortedIndex[T]) Tree() *KeyTree { return x.tree }

// Seek returns the first position whose key is >= v: a halving search of
// the sorted array (onProbe per step) or, with UseTree, a walk of the tree.
func (x *SortedIndex[T]) Seek(v uint64, key func(T) uint64, onProbe func(), c *sim.Counters) int {
	if x.tree != nil {
		return x.tree.LowerBound(v, c)
	}
	return LowerBound(len(x.Sorted), func(i int) uint64 { return key(x.Sorted[i]) }, v, onProbe)
}
