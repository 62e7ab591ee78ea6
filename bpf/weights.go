package bpf

import "github.com/kpsim/kpsim/alternative"

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

// Weights of the tracing multi attach (tracing_multi.go). Latencies as
// kprobes/pipeline_ops.go's (AMD Zen: L1 ≈ 4-5, L2 ≈ 14, L3 ≈ 42 cycles).
const (
	wBTFTypeByID    = 42
	rBTFTypeByID    = "hardware fact: one dependent load into vmlinux BTF's types array or string section (~5 MB, not cache resident for scattered ids): an L3 hit, ~42 cycles"
	wBTFSetProbe    = 4
	rBTFSetProbe    = "hardware fact: one bsearch step over a BTF id set of at most 256 entries (2 KiB), L1-hot across the per-function loop (~4 cycles)"
	wBTFParamSuffix = 12
	rBTFParamSuffix = "hardware fact: strlen of a short, L1-hot parameter name and a strncmp of a 7-17 byte suffix, ~12 cycles"
	wTrampConst     = 10
	rTrampConst     = "hardware fact: a few stores or an atomic to one or two lines of a just-allocated (L1/L2) object, ~10 cycles"
	wTrampChain     = 42
	rTrampChain     = "hardware fact: one dependent load of a kmalloc'd struct bpf_trampoline on a hash chain (cold line, L3 hit ~42 cycles)"
	wMutex          = 40
	rMutex          = "hardware fact: uncontended mutex_lock + mutex_unlock are two lock cmpxchg on an L1/L2 line (~20 cycles each)"
	wJITInsn        = 12
	rJITInsn        = "hardware fact: an emit_* helper computes the encoding (register/offset tests, is_imm8) and stores 1-10 bytes through the prog cursor: a handful of L1 stores and branches, ~12 cycles"
	wJITScratch     = 250 + 1000 + 500
	rJITScratch     = "composed: mm.vmalloc.page (250: the page and its PTE) + alloc_vmap_area's augmented rb-tree search and insert in the module range (~1000: ~20 dependent node loads at L2/L3) + execmem_free's vfree (unmap, lazy purge bookkeeping, ~500)"
	wPackWord       = 1
	rPackWord       = "hardware fact: find_next_zero_bit reads the 4 KiB chunk bitmap sequentially, ~1 cycle per 64-bit word (prefetched, L2)"
	wPackNew        = 138200
	rPackNew        = "as execmem.cache.populate (kprobes/pipeline_ops.go): a vmalloc (~1500), a 2 MiB fill at ~16 bytes/cycle (~131k), one set_memory_rox (~5660: CPA walk, a flush broadcast's fixed part, INVLPG; its per-CPU parts counted as set_memory.flush.*) — the same work alloc_new_pack does"
	wPercpuRef      = 400
	rPercpuRef      = "as percpu.alloc (trace/ops.go): alloc_percpu's pcpu_alloc_mutex, chunk bitmap search and a memset per CPU ≈ 150 ns ≈ 400 cycles; percpu_ref_init's own field stores are noise beside it"
	wKsymName       = 200
	rKsymName       = "hardware fact: vsnprintf of a 15-character literal and a u64 in decimal (number(): ~20 divide-by-10 steps via multiply, ~8 cycles each) ≈ 200 cycles"
	wKsymNode       = 42
	rKsymNode       = "hardware fact: one rb-tree node compared on the way down latch_tree_insert (cold struct bpf_ksym line, L3 hit ~42 cycles)"
	wTextCopy       = alternative.TextPokeCycles
	rTextCopy       = "as text_poke (alternative/textpoke.go): one __text_poke through the poking mm, derived part by part ≈ 1300 cycles; text_poke_copy does not sync cores"
	wPageZero       = 128
	rPageZero       = "hardware fact: clear_page_erms (rep stosb) of 4 KiB at ~32 bytes/cycle ≈ 128 cycles"
)
