package bpf

// Weights of the link-create ops, in cycles. Sources: a C benchmark on the
// build machine (ns × 2.6 GHz, the reference clock of every other weight;
// see the bpf branch notes for the program) or documented hardware facts.
const (
	wSyscall     = 170
	rSyscall     = "C benchmark syscall(SYS_getppid): 65 ns ≈ 170 cycles (entry/exit with this machine's mitigations); bpf_attr's copy is a few cache lines more, not priced"
	wCopyName    = 40
	rCopyName    = "hardware fact: __get_user of one pointer (stac, load, clac ≈ 20 cycles with SMAP) plus strncpy_from_user's set-up and final check (~20 cycles)"
	wUserByte    = 0.25
	rUserByte    = "hardware fact: strncpy_from_user's do_strncpy_from_user copies a word (8 bytes) per ~2-cycle iteration with has_zero: ≈ 0.25 cycles/byte"
	wKmalloc     = 80
	rKmalloc     = "as ftrace.hash.copy (BenchmarkWeightHashCopy, 30.6 ns ≈ 80 cycles): a SLUB fast-path allocation of a small object"
	wVmallocPage = 250
	rVmallocPage = "hardware fact: per 4 KiB page, a buddy-allocator page from the per-CPU lists (~150 cycles) plus one PTE write and the vm_struct bookkeeping of vmap_pages_range (~100 cycles); no zeroing (kvmalloc_array without __GFP_ZERO)"
	wSortCmp     = 8
	rSortCmp     = "hardware fact: sort_r's indirect call of the comparator plus two pointer loads from an L1/L2-resident array (~8 cycles); characters priced as kallsyms.chr_cmp"
	wLinkPrime   = 2600
	rLinkPrime   = "hardware fact: bpf_link_prime = idr_alloc_cyclic under a spinlock, anon_inode_getfile (alloc_file_pseudo: struct file + dentry, two slab objects and refcounts), get_unused_fd_flags, fd_install ≈ 1 µs at 2.6 GHz"
	wModBounds   = 1
	rModBounds   = "hardware fact: two compares against module_addr_min/max, L1-hot across the address loop"
)
