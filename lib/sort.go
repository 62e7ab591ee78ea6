package lib

import (
	"cmp"

	"github.com/kpsim/kpsim/image"
)

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
func SortJumpEntries(e []image.JumpEntry) {
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
func SortStaticCallSites(s []image.StaticCallSite) {
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
func SortByKey[T any](s []T, key func(T) uint64, onCmp func()) {
	KernelSort(len(s), func(i, j int) int {
		onCmp()
		return cmp.Compare(key(s[i]), key(s[j]))
	}, func(i, j int) { s[i], s[j] = s[j], s[i] })
}
