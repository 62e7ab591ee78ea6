package image

// KernelSort sorts n elements exactly as the kernel's lib/sort.c:sort_r
// does: the bottom-up heapsort with its particular sift-down and backtrack.
// The kernel sorts the jump-label table by (key, code) and the static-call
// sites by key only (kernel/static_call_inline.c:static_call_site_cmp);
// with equal keys the resulting order is whatever this heapsort leaves,
// so a faithful model must run the same algorithm on the link-order table.
//
// cmp returns <0, 0, >0 like the kernel's cmp_func; swap exchanges two
// elements. Indices are element indices (the kernel's byte offsets divided
// by the element size, which leaves the parent computation unchanged).
//
// Models lib/sort.c:sort_r.
func KernelSort(num int, cmp func(a, b int) int, swap func(a, b int)) {
	n, a := num, num/2
	if a == 0 {
		return
	}
	// parent mirrors lib/sort.c:parent with size = lsbit = 1.
	parent := func(i int) int {
		i--
		i -= i & 1
		return i / 2
	}
	for {
		if a != 0 {
			a--
		} else {
			n--
			if n == 0 {
				break
			}
			swap(0, n)
		}
		var b, c, d int
		for b = a; ; {
			c = 2*b + 1
			d = c + 1
			if d >= n {
				break
			}
			if cmp(c, d) >= 0 {
				b = c
			} else {
				b = d
			}
		}
		if d == n {
			b = c
		}
		for b != a && cmp(a, b) >= 0 {
			b = parent(b)
		}
		c = b
		for b != a {
			b = parent(b)
			swap(b, c)
		}
	}
}

// SortJumpEntries puts a link-order jump table into the order
// jump_label_init leaves it in: by key, then by code address.
//
// Models kernel/jump_label.c:jump_label_sort_entries (jump_label_cmp).
func SortJumpEntries(e []JumpEntry) {
	KernelSort(len(e), func(i, j int) int {
		a, b := &e[i], &e[j]
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		case a.Code < b.Code:
			return -1
		case a.Code > b.Code:
			return 1
		}
		return 0
	}, func(i, j int) { e[i], e[j] = e[j], e[i] })
}

// SortStaticCallSites puts link-order static-call sites into the order
// static_call_init leaves them in: by key only, ties as the heapsort leaves them.
//
// Models kernel/static_call_inline.c:static_call_sort_entries.
func SortStaticCallSites(s []StaticCallSite) {
	KernelSort(len(s), func(i, j int) int {
		switch {
		case s[i].Key < s[j].Key:
			return -1
		case s[i].Key > s[j].Key:
			return 1
		}
		return 0
	}, func(i, j int) { s[i], s[j] = s[j], s[i] })
}

// SortByKey sorts s by key with KernelSort (lib/sort.c's heapsort, as the
// kernel's late-init index builders would call sort()), calling onCmp once
// per comparison so the caller can count it.
func SortByKey[T any](s []T, key func(*T) uint64, onCmp func()) {
	KernelSort(len(s), func(i, j int) int {
		onCmp()
		a, b := key(&s[i]), key(&s[j])
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}, func(i, j int) { s[i], s[j] = s[j], s[i] })
}

// LowerBound returns the first i in [0, n) with key(i) >= v (n if none),
// by the classic halving search, calling onProbe once per step so the
// caller can count it: ceil(log2(n+1)) or fewer steps.
func LowerBound(n int, key func(int) uint64, v uint64, onProbe func()) int {
	lo, hi := 0, n
	for lo < hi {
		onProbe()
		mid := int(uint(lo+hi) >> 1)
		if key(mid) < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// SortedIndex is a late-init address index: entries sorted by address and
// the bytes charged per entry (8 for a pointer, 4 for a u32 offset). The
// jump-label, static-call and bug indexes embed it.
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
