package lib

// SortedIndex is a late-init address index: entries sorted by address and
// the bytes charged per entry (8 for a pointer, 4 for a u32 offset, 16 for
// a merged range), or under reservation-btree a B-tree over them. LateIndex
// builds it for the jump-label, static-call, bug and blacklist indexes.
type SortedIndex[T any] struct {
	Sorted     []T
	entryBytes int
	tree       *KeyTree // reservation-btree: lookups walk this instead
}

// NewSortedIndex wraps entries already sorted by address.
func NewSortedIndex[T any](sorted []T, entryBytes int) SortedIndex[T] {
	return SortedIndex[T]{Sorted: sorted, entryBytes: entryBytes}
}

// Len returns the number of indexed entries.
func (x *SortedIndex[T]) Len() int { return len(x.Sorted) }

// EntryBytes returns the bytes charged per indexed entry.
func (x *SortedIndex[T]) EntryBytes() int { return x.entryBytes }

// Bytes returns the index's memory: Len() × EntryBytes(), or the B-tree's
// nodes with UseTree.
func (x *SortedIndex[T]) Bytes() int64 {
	if x.tree != nil {
		return x.tree.Bytes()
	}
	return int64(len(x.Sorted)) * int64(x.entryBytes)
}
