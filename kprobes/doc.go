// Package kprobes models the kprobe registry of kernel/kprobes.c (Debian
// linux-source-6.1, 6.1.192) on x86-64: the 64-bucket hash table that every
// get_kprobe() walks, and the proposed address-ordered tree of the kprobes
// lookup-cost series (P4) with its two iterators (P5: address ranges, P6: a
// monotonic address cursor).
//
// # What is modelled exactly
//
//   - The hash table: KprobeTableSize (64) hlist buckets indexed by the
//     kernel's hash_ptr(addr, KprobeHashBits), chains newest-first
//     (hlist_add_head_rcu), an aggregator taking over an address at the
//     same chain position (hlist_replace_rcu), O(1) removal (hlist_del_rcu).
//     GetKprobe counts one "kprobe.hash.visit" per chain node it compares,
//     so a hit at position j costs j visits and a miss costs the chain
//     length, exactly as the kernel's loop.
//   - One entry per probed address: a plain probe or an aggregator; the
//     children of an aggregator are on its list (ap->list), never hashed.
//   - Unregistration (__unregister_kprobe_top/_bottom): which entry leaves
//     the table, when an aggregator stays (still has children, or is queued
//     for unoptimization and becomes "unused"), and how flags change.
//
// # What is proposed (P4–P6, inferred from the series' cover letter)
//
// With the tree enabled (NewRegistry(true), i.e. the kprobe-tree switch),
// every table insert, replace and delete is mirrored in a red-black tree
// keyed by address. Its descents count "kprobe.tree.search" once and
// "kprobe.tree.visit" per node compared; in-order successor/predecessor
// steps count "kprobe.tree.step"; rebalancing counts "kprobe.tree.insert" /
// "kprobe.tree.erase" once each (amortised O(1) in a red-black tree).
//
// The tree is github.com/emirpasic/gods/trees/redblacktree, wrapped by this
// package's rbIndex so no caller sees it. A red-black tree was chosen over
// google/btree because the series says "rbtree": one node per probe,
// binary descents and parent-pointer successor steps (rb_next) are the
// memory-access pattern the kernel patch would have, so a count of nodes
// visited means the same thing in the model and in the kernel. A B-tree of
// degree d compares up to 2d-1 keys per node in one or two cache lines and
// resumes iteration by re-descending from the root: its counts would model
// a different data structure.
//
// # Why a probe was refused or left unoptimized
//
// Every error RegisterKprobe returns, and every reason a registered probe
// is not optimized (a post handler, can_optimize or
// copy_optimized_instructions refusing, an armed probe inside the jump's
// bytes, a slot allocation failing, a later probe force-unoptimizing it,
// ftrace), leaves a Reason: the deciding check as the kernel call chain
// and what it found, offsets relative to the symbol
// ("check_kprobe_address_safe: jump_label_text_reserved: NOP5 site at
// +5"). Kprobe.Why returns it and Kprobe.State says where the probe
// stands. A Reason is derived from the image by the simulator, never
// through a counted lookup, so it costs no count and is the same under
// every switch set. Setting Kprobes.Trail to a Recorder records every
// check in order (the decision trail `kpsim explain` prints); a front door
// records its own steps to the same Recorder, nesting the core's with
// Indent.
//
// # Concurrency
//
// A Registry is not safe for concurrent use: every kernel caller holds
// kprobe_mutex. Iterators detect (they do not tolerate) a registry change
// while they are live; see RangeIter and AddrIter.
package kprobes
