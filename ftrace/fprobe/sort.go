package fprobe

import (
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/lib"
)

var chrCmpOp = kallsyms.OpChrCmp

// kernelSortStrings runs lib/sort.c:sort_r (lib.KernelSort, the exact
// heapsort) over names with cmp; swap, when non-nil, mirrors each swap
// (symbols_swap_r moving the cookies along).
func kernelSortStrings(names []string, cmp func(a, b string) int, swap func(a, b int)) {
	lib.KernelSort(len(names), func(a, b int) int { return cmp(names[a], names[b]) }, func(a, b int) {
		names[a], names[b] = names[b], names[a]
		if swap != nil {
			swap(a, b)
		}
	})
}
