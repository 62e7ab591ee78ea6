package fprobe

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
)

var chrCmpOp = kallsyms.OpChrCmp

// kernelSortStrings runs lib/sort.c:sort_r (image.KernelSort, the exact
// heapsort) over names with cmp; swap, when non-nil, mirrors each swap
// (symbols_swap_r moving the cookies along).
func kernelSortStrings(names []string, cmp func(a, b string) int, swap func(a, b int)) {
	image.KernelSort(len(names), func(a, b int) int { return cmp(names[a], names[b]) }, func(a, b int) {
		names[a], names[b] = names[b], names[a]
		if swap != nil {
			swap(a, b)
		}
	})
}
