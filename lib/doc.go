// Package lib models the parts of the kernel's lib/ that kpsim's models
// call: lib/sort.c's heapsort (KernelSort, and the table sorts built on
// it), lib/bsearch.c's halving search (LowerBound), and the late-init
// address index the reservation checks build with them (Index: a sorted
// array, or under reservation-btree a maple-like B-tree).
package lib
