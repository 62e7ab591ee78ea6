package ftrace

import (
	"github.com/kpsim/kpsim/alternative"
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// The single direct_ops of 7.3 (CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS, x86-64
// with DYNAMIC_FTRACE_WITH_DIRECT_CALLS): every BPF trampoline's call site is
// one entry of direct_ops' filter hash and of direct_functions (ip →
// trampoline), both built by update_ftrace_direct_add.

// TextPokeArrayMax is arch/x86/kernel/alternative.c:TEXT_POKE_ARRAY_MAX:
// PAGE_SIZE / sizeof(struct smp_text_poke_loc) (rel_addr 4, disp 4, len 1,
// opcode 1, text[TEXT_POKE_MAX_OPCODE_SIZE = 5], old 1: 16 bytes) = 256
// sites per smp_text_poke_batch_finish.
const TextPokeArrayMax = 4096 / 16

// OpDirectRegister is ftrace_startup's constant work for direct_ops.
var OpDirectRegister = sim.NewOp("ftrace.direct.register", wDirectRegister, rDirectRegister,
	"constant work of register_ftrace_function_nolock(direct_ops) outside the record and hash walks: add_ftrace_ops and update_ftrace_function (direct_ops brings its trampoline, FTRACE_REGS_ADDR)")

// DirectAddStats is what UpdateDirectAdd did, for reports.
type DirectAddStats struct {
	Sites   int // call sites patched by ftrace_replace_code
	Batches int // smp_text_poke_batch_finish flushes
}

// hashAddChains returns the chains (head first) of the hash hash_add(NULL,
// src) builds: alloc_and_copy_ftrace_hash(fls(min(n, 32)), NULL), then src
// iterated bucket by bucket (src is a FTRACE_HASH_DEFAULT_BITS hash filled
// with add_ftrace_hash_entry, i.e. hlist_add_head, in the order of ips), each
// entry prepended to its new chain.
// hash_add's size is fls(min(count, 32)): 6 bits, 64 buckets, from 32
// entries up, however many the hash holds.
func hashAddChains(ips []uint64) (bits int, chains [][]uint64) {
	bits = fls(min(len(ips), 32))
	src := make([][]uint64, 1<<HashDefaultBits)
	for _, ip := range ips {
		t := hashKey(ip, HashDefaultBits)
		src[t] = append([]uint64{ip}, src[t]...) // hlist_add_head
	}
	chains = make([][]uint64, 1<<bits)
	for _, l := range src {
		for _, ip := range l {
			j := hashKey(ip, bits)
			chains[j] = append(chains[j], ip)
		}
	}
	for _, ch := range chains {
		slices.Reverse(ch) // each add was an hlist_add_head
	}
	return bits, chains
}

// UpdateDirectAdd models kernel/trace/ftrace.c:update_ftrace_direct_add(
// &direct_ops, hash) as bpf_trampoline_multi_attach calls it on a kernel
// with no direct caller yet (direct_functions is EMPTY_HASH, direct_ops
// unregistered): ips are the call sites in the order register_fentry_multi
// added them to the FTRACE_HASH_DEFAULT_BITS hash data->reg.
//
//  1. every entry of hash looked up in direct_functions (EMPTY_HASH: one
//     empty bucket);
//  2. hash_add twice (the new filter hash and the new direct_functions):
//     64 buckets each (hash_add caps its size at 32 entries), hash iterated,
//     one add_ftrace_hash_entry_direct (kmalloc) per entry;
//  3. register_ftrace_function_nolock → ftrace_startup: ftrace_hash_rec_enable
//     walks the records until every entry matched, looking each up in the
//     64-bucket filter hash; FTRACE_UPDATE_CALLS (and the trace function
//     when direct_ops is the first ops) → ftrace_replace_code: two passes
//     over every record; per changed site ftrace_get_addr_new →
//     ftrace_find_rec_direct (a lookup in the 64-bucket direct_functions)
//     and its text poke; a batch flush every TEXT_POKE_ARRAY_MAX sites (the
//     records are in address order, so text_poke_addr_ordered never
//     flushes early).
//
// The records' flags are not updated: the model attaches once. replace is
// the phase ftrace_replace_code's work is counted in (a report's seam: the
// text pokes apart from the hash work).
func (ft *Ftrace) UpdateDirectAdd(c *sim.Counters, ips []uint64, replace sim.Phase) (DirectAddStats, error) {
	var st DirectAddStats
	if len(ips) == 0 {
		return st, EINVAL
	}
	// 1. Make sure requested entries are not already registered.
	c.Add(OpHashBucket, 1<<HashDefaultBits)
	c.Add(OpHashLookup, uint64(len(ips)))
	// 2. hash_add(old_filter_hash = NULL, hash), hash_add(direct_functions, hash).
	bits, chains := hashAddChains(ips)
	for range 2 {
		c.Add(OpHashBucketInit, 1<<bits)
		c.Add(OpHashBucket, 1<<HashDefaultBits)
		c.Add(OpHashAdd, uint64(len(ips)))
	}
	pos := make(map[uint64]int, len(ips)) // 1-based position on its chain
	for _, ch := range chains {
		for i, ip := range ch {
			pos[ip] = i + 1
		}
	}
	// 3. register_ftrace_function_nolock(ops) → ftrace_startup.
	before := traceFunc(ft.opsCount())
	c.Inc(OpDirectRegister)
	// ftrace_hash_rec_enable: __ftrace_hash_rec_update(ops, true).
	matched, visits := 0, 0
	var lookups, nodes uint64
	var sites []int
	for p := range ft.flat {
		if matched == len(pos) {
			break
		}
		visits++
		r := ft.rec(p)
		if r.Flags&FlDisabled != 0 {
			continue // skip_record
		}
		lookups++
		if k, ok := pos[r.IP]; ok {
			nodes += uint64(k)
			matched++
			if r.Count() == 0 {
				sites = append(sites, p) // nop → call: ftrace_replace_code patches it
			}
		} else {
			nodes += uint64(len(chains[hashKey(r.IP, bits)]))
		}
	}
	c.Add(OpRecVisit, uint64(visits))
	c.Add(OpHashLookup, lookups)
	c.Add(OpHashNode, nodes)
	c.Add(OpRecMatch, uint64(matched))
	if traceFunc(ft.opsCount()+1) != before {
		c.Inc(OpUpdateTraceFunc)
		alternative.SyncCPUs(c, updateTraceFuncSyncs, ft.CPUs)
	}
	// ftrace_replace_code(enable).
	prev := c.Enter(replace)
	defer c.Enter(prev)
	c.Add(OpReplaceCheck, uint64(2*len(ft.flat)))
	for _, p := range sites {
		c.Inc(OpHashLookup) // ftrace_find_rec_direct
		c.Add(OpHashNode, uint64(pos[ft.rec(p).IP]))
	}
	st.Sites = len(sites)
	st.Batches = (len(sites) + TextPokeArrayMax - 1) / TextPokeArrayMax
	c.Add(OpReplaceSite, uint64(st.Sites))
	c.Add(OpTextPokeBatch, uint64(st.Batches))
	alternative.SyncCPUs(c, pokeBatchSyncs*st.Batches, ft.CPUs)
	return st, nil
}
