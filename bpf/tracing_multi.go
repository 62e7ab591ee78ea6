package bpf

import (
	"cmp"
	"math/bits"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

// The tracing multi link of 7.3 (Jiri Olsa's series: fentry.multi,
// fexit.multi, fsession.multi by BTF id; absent from 6.1.192 and
// 6.12.117): bpf(BPF_LINK_CREATE) → link_create → bpf_tracing_multi_attach
// (kernel/trace/bpf_trace.c) → bpf_trampoline_multi_attach
// (kernel/bpf/trampoline.c): per BTF id bpf_check_attach_btf_id_multi
// (kernel/bpf/verifier.c: BTF checks, kallsyms_lookup_name, ftrace_location)
// and bpf_trampoline_get; then, under every trampoline lock, per trampoline
// bpf_trampoline_update (x86 arch_bpf_trampoline_size and
// arch_prepare_bpf_trampoline: the trampoline JITed twice, its image in a
// bpf_prog_pack) and register_fentry_multi (an entry of data->reg); then
// one update_ftrace_direct_add for all call sites.
//
// The model covers an fentry.multi program (BPF_TRACE_FENTRY_MULTI, one
// program per trampoline, no cookies) on vmlinux functions, attached once
// on a kernel with no other trampoline or direct call.

// MaxTracingMultiCnt is kernel/trace/bpf_trace.c:MAX_TRACING_MULTI_CNT.
const MaxTracingMultiCnt = 1 << 20

// Phases of a tracing multi attach: the report's components.
var (
	PhaseTMLink = sim.NewPhase("tracing_multi.link",
		"bpf_tracing_multi_attach's once-per-link work: the syscall, copying and sorting the BTF ids (check_dup_ids), the link and its nodes (kvzalloc), bpf_link_prime, the three tracing-multi hashes, trampoline_lock_all")
	PhaseTMKallsyms = sim.NewPhase("tracing_multi.kallsyms",
		"kallsyms_lookup_name(tname) in bpf_check_attach_btf_id_multi, one per function")
	PhaseTMBTF = sim.NewPhase("tracing_multi.btf",
		"bpf_check_attach_btf_id_multi less its kallsyms_lookup_name: the deny set, BTF type and name lookups, btf_distill_func_proto, ftrace_location")
	PhaseTMTrampoline = sim.NewPhase("tracing_multi.trampoline",
		"bpf_trampoline_get (trampoline_key_table walk, a new struct bpf_trampoline), __bpf_trampoline_link_prog's bookkeeping and register_fentry_multi")
	PhaseTMJIT = sim.NewPhase("tracing_multi.jit",
		"x86 arch_bpf_trampoline_size and arch_prepare_bpf_trampoline: the scratch execmem page, the rw buffer, the trampoline emitted twice")
	PhaseTMImage = sim.NewPhase("tracing_multi.image",
		"bpf_tramp_image_alloc (bpf_prog_pack_alloc, percpu_ref_init, the bpf_trampoline_N ksym) and bpf_arch_text_copy of the image")
	PhaseTMFtrace = sim.NewPhase("tracing_multi.ftrace",
		"update_ftrace_direct_add: hash_add of the filter hash and direct_functions, direct_ops registration, ftrace_hash_rec_enable's record walk")
	PhaseTMTextPoke = sim.NewPhase("tracing_multi.text_poke",
		"ftrace_replace_code for direct_ops: the two record passes, ftrace_find_rec_direct and the text poke of every call site, the batch flushes")
)

// Counted operations of the tracing multi attach. Weights: weights.go.
var (
	OpBTFTypeByID = sim.NewOp("btf.type_by_id", wBTFTypeByID, rBTFTypeByID,
		"one btf_type_by_id or btf_name_by_offset in vmlinux BTF (an index into the types array or the string section)")
	OpBTFSetProbe = sim.NewOp("btf.id_set.probe", wBTFSetProbe, rBTFSetProbe,
		"one bsearch step of btf_id_set_contains (btf_id_deny) or btf_id_set8_contains (a hook's kfunc set)")
	OpBTFParamSuffix = sim.NewOp("btf.param_suffix", wBTFParamSuffix, rBTFParamSuffix,
		"one btf_param_match_suffix past the name load: strlen of the parameter name and a strncmp of the suffix")
	OpTrampConst = sim.NewOp("bpf.trampoline.const", wTrampConst, rTrampConst,
		"one O(1) bookkeeping step of the trampoline code (hlist_add_head, refcount set or inc, list init, field stores, an atomic charge, cond_resched)")
	OpTrampChain = sim.NewOp("bpf.trampoline.chain", wTrampChain, rTrampChain,
		"one struct bpf_trampoline visited on a trampoline_key_table chain (tr->key compared)")
	OpMutex = sim.NewOp("bpf.mutex", wMutex, rMutex,
		"one uncontended mutex_lock + mutex_unlock pair (trampoline_mutex, a trampoline lock, pack_mutex)")
	OpJITInsn = sim.NewOp("bpf.jit.insn", wJITInsn, rJITInsn,
		"one x86 instruction emitted by __arch_prepare_bpf_trampoline (emit_* helpers, EMIT macros)")
	OpJITScratch = sim.NewOp("bpf.jit.scratch_page", wJITScratch, rJITScratch,
		"arch_bpf_trampoline_size's execmem_alloc(EXECMEM_MODULE_DATA, PAGE_SIZE) and execmem_free: one vmalloc'd page in the module range, mapped and unmapped")
	OpPackWord = sim.NewOp("bpf.prog_pack.word", wPackWord, rPackWord,
		"one 64-bit word of a pack's chunk bitmap read by bitmap_find_next_zero_area in bpf_prog_pack_alloc")
	OpPackNew = sim.NewOp("bpf.prog_pack.new", wPackNew, rPackNew,
		"alloc_new_pack: a 2 MiB bpf_jit_alloc_exec, jit_fill_hole over it, set_memory_rox")
	OpPercpuRef = sim.NewOp("percpu_ref.init", wPercpuRef, rPercpuRef,
		"percpu_ref_init: an 8-byte __alloc_percpu (pcpu_alloc) and its per-CPU copies zeroed")
	OpKsymName = sim.NewOp("bpf.ksym.name", wKsymName, rKsymName,
		"snprintf(ksym->name, \"bpf_trampoline_%llu\", key)")
	OpKsymNode = sim.NewOp("bpf.ksym.node", wKsymNode, rKsymNode,
		"one rb-tree node visited by latch_tree_insert in bpf_ksym_add (the bpf_tree's two copies)")
	OpTextCopy = sim.NewOp("bpf.text_copy", wTextCopy, rTextCopy,
		"one __text_poke of text_poke_copy (bpf_arch_text_copy of a trampoline image): one per page the image spans")
	OpPageZero = sim.NewOp("mm.page.zero", wPageZero, rPageZero,
		"one 4 KiB page zeroed (__GFP_ZERO of kvzalloc's vmalloc path)")
)

// TracingMultiFunc is one BTF function of a tracing multi link: its BTF id
// (the key's low half), its name in BTF (kallsyms_lookup_name's argument)
// and its argument count (btf_func_model.nr_args, every argument 8 bytes).
type TracingMultiFunc struct {
	ID     uint32
	Name   string
	NrArgs int
}

// Resolver is kallsyms_lookup_name.
type Resolver interface {
	LookupName(c *sim.Counters, name string) (uint64, bool)
}

// TracingMultiStats is what one attach did, for reports.
type TracingMultiStats struct {
	Trampolines int
	JITInsns    int // instructions emitted (both passes)
	ImageBytes  int // per trampoline image, the last one's
	Packs       int // bpf_prog_packs allocated
	TextCopies  int
	Direct      ftrace.DirectAddStats
}

// bpfProgPack is one struct bpf_prog_pack on kernel/bpf/core.c's
// pack_list: the chunks used, filled from the start (nothing is freed
// while one link attaches).
type bpfProgPack struct{ used int }

// Pack geometry (kernel/bpf/core.c): BPF_PROG_PACK_SIZE = SZ_2M ×
// num_possible_nodes() (one node), BPF_PROG_CHUNK_SIZE = 64.
const (
	progPackSize   = 2 << 20
	progChunkSize  = 64
	progChunkCount = progPackSize / progChunkSize
	bpfInsnSafety  = 64 // arch/x86/net/bpf_jit_comp.c:BPF_INSN_SAFETY
	pageSize       = 4096
)

// TracingMulti is the kernel state a tracing multi attach works on.
type TracingMulti struct {
	Gen  image.Generation
	Syms Resolver
	Ft   *ftrace.Ftrace
	// ProgChunks is the chunks of the attached program's own JIT image:
	// it was loaded first, so the first pack holds it.
	ProgChunks int

	keyChain [1 << trampolineHashBits]int // trampoline_key_table chain lengths
	packs    []bpfProgPack
	ksyms    int // entries in bpf_tree (the program's own ksym first)
}

// trampolineHashBits is kernel/bpf/trampoline.c:TRAMPOLINE_HASH_BITS;
// trampolineLocks is TRAMPOLINE_LOCKS_TABLE_SIZE (1 << 5).
const (
	trampolineHashBits = 10
	trampolineLocks    = 1 << 5
	btfIDDenyLen       = 6 // x86-64, SMP, PREEMPT_RCU, no DEBUG_PREEMPT: BTF_ID_UNUSED + 5
)

// NewTracingMulti returns the state of a kernel whose only BPF program
// is the one to attach: one pack holding its image, one bpf ksym.
func NewTracingMulti(gen image.Generation, syms Resolver, ft *ftrace.Ftrace, progChunks int) *TracingMulti {
	return &TracingMulti{Gen: gen, Syms: syms, Ft: ft, ProgChunks: progChunks,
		packs: []bpfProgPack{{used: progChunks}}, ksyms: 1}
}

// hash64 is include/linux/hash.h:hash_64(val, bits) (hash_64_generic).
func hash64(v uint64, b int) int { return int((v * 0x61C8864680B583EB) >> (64 - b)) }

// Attach models kernel/trace/bpf_trace.c:bpf_tracing_multi_attach for
// an fentry.multi program on funcs (the ids libbpf sends, BTF id order),
// vmlinux BTF object id 1: -EOPNOTSUPP before 7.3 (no such attach type
// there: link_create refuses it), -EINVAL / -E2BIG on the count, -ENOENT
// for a function kallsyms or ftrace does not know.
func (tm *TracingMulti) Attach(c *sim.Counters, funcs []TracingMultiFunc) (TracingMultiStats, error) {
	var st TracingMultiStats
	if tm.Gen.Effective() != image.Gen73 {
		return st, errno.EOPNOTSUPP
	}
	cnt := len(funcs)
	prev := c.Enter(PhaseTMLink)
	defer c.Enter(prev)
	c.Inc(OpSyscall)
	if cnt == 0 {
		return st, errno.EINVAL
	}
	if cnt > MaxTracingMultiCnt {
		return st, errno.E2BIG
	}
	// ids = kvmalloc_objs(*ids, cnt); copy_from_user.
	kvmalloc(c, 4*cnt)
	c.Add(OpUserByte, uint64(4*cnt))
	// check_dup_ids: sort_r_nonatomic, then the neighbour scan.
	ids := make([]uint32, cnt)
	for i, f := range funcs {
		ids[i] = f.ID
	}
	var cmps uint64
	lib.KernelSort(cnt, func(a, b int) int {
		cmps++
		return cmp.Compare(ids[a], ids[b])
	}, func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
	c.Add(OpSortCmp, cmps+uint64(cnt-1))
	for i := 1; i < cnt; i++ {
		if ids[i] == ids[i-1] {
			return st, errno.EINVAL
		}
	}
	byID := make(map[uint32]TracingMultiFunc, cnt)
	for _, f := range funcs {
		byID[f.ID] = f
	}
	// link = kvzalloc_flex(*link, nodes, cnt): the link (~136 bytes) and
	// cnt bpf_tracing_multi_nodes of 72 bytes (tramp node 32, trampoline
	// pointer 8, ftrace_func_entry 32).
	kvzalloc(c, 136+72*cnt)
	c.Inc(OpTrampConst) // bpf_link_init
	c.Inc(OpLinkPrime)
	err := tm.multiAttach(c, ids, byID, &st)
	c.Enter(PhaseTMLink)
	kvfree(c, 4*cnt) // kvfree(ids)
	if err != nil {
		return st, err // bpf_link_cleanup: not modelled (the attach failed)
	}
	c.Inc(OpTrampConst) // bpf_link_settle
	return st, nil
}

// kvzalloc counts kvzalloc(size): kvmalloc (kprobe_multi.go), each
// vmalloc'd page zeroed.
func kvzalloc(c *sim.Counters, size int) {
	kvmalloc(c, size)
	if size > 8192 {
		c.Add(OpPageZero, uint64((size+pageSize-1)/pageSize))
	}
}

// kvfree counts the free of a kvmalloc'd buffer as its allocation: a
// kfree (priced as a kmalloc), or a vfree's pages given back one by one.
func kvfree(c *sim.Counters, size int) { kvmalloc(c, size) }

// multiAttach models kernel/bpf/trampoline.c:bpf_trampoline_multi_attach
// (fentry, no cookies, every trampoline new).
func (tm *TracingMulti) multiAttach(c *sim.Counters, ids []uint32, byID map[uint32]TracingMultiFunc, st *TracingMultiStats) error {
	type mnode struct {
		f    TracingMultiFunc
		key  uint64
		addr uint64
		ip   uint64
	}
	nodes := make([]mnode, 0, len(ids))
	for _, id := range ids {
		f := byID[id]
		addr, err := tm.checkAttachBTFIDMulti(c, f)
		if err != nil {
			return err // rollback_put: not modelled (the attach failed)
		}
		c.Enter(PhaseTMTrampoline)
		key := uint64(1)<<32 | uint64(id) // bpf_trampoline_compute_key: btf_obj_id(vmlinux) = 1
		ip := tm.trampolineGet(c, key, addr)
		c.Add(OpTrampConst, 3) // mnode->trampoline, node.link, node.cookie
		c.Inc(OpTrampConst)    // cond_resched
		nodes = append(nodes, mnode{f: f, key: key, addr: addr, ip: ip})
	}
	// init_tracing_multi_data: three alloc_ftrace_hash(FTRACE_HASH_DEFAULT_BITS).
	c.Enter(PhaseTMLink)
	for range 3 {
		c.Add(OpKmalloc, 2)
		c.Add(ftrace.OpHashBucketInit, 1<<ftrace.HashDefaultBits)
	}
	c.Add(OpMutex, trampolineLocks) // trampoline_lock_all (and _unlock_all)
	ips := make([]uint64, 0, len(nodes))
	for _, n := range nodes {
		c.Enter(PhaseTMTrampoline)
		c.Add(OpTrampConst, 2) // bpf_trampoline_multi_attach_init
		// __bpf_trampoline_link_prog: kind, the extension check, the
		// progs_cnt sum, bpf_trampoline_add_prog (hlist_add_head).
		c.Add(OpTrampConst, 3)
		tm.trampolineUpdate(c, n.f, n.key, st)
		// register_fentry_multi: ftrace_location(tr->ip), ftrace_hash_add
		// into data->reg (the entry is the node's), cur_image.
		c.Enter(PhaseTMTrampoline)
		tm.Ft.Location(c, n.ip)
		c.Add(OpTrampConst, 2)
		// out_free: refcount_inc, list_add(&im->list, &tr->images).
		c.Add(OpTrampConst, 2)
		ips = append(ips, n.ip)
	}
	// update_ftrace_direct_add(&direct_ops, data->reg); data->modify is empty.
	c.Enter(PhaseTMFtrace)
	ds, err := tm.Ft.UpdateDirectAdd(c, ips, PhaseTMTextPoke)
	st.Direct = ds
	if err != nil {
		return err
	}
	c.Enter(PhaseTMTrampoline)
	c.Add(OpTrampConst, uint64(len(nodes))) // bpf_trampoline_multi_attach_free: old_image is NULL
	// remove_tracing_multi_data: ftrace_hash_remove(reg) walks its buckets
	// and unlinks every entry; unreg and modify are empty.
	c.Enter(PhaseTMLink)
	c.Add(ftrace.OpHashBucket, 1<<ftrace.HashDefaultBits)
	c.Add(OpTrampConst, uint64(len(nodes)))
	st.Trampolines = len(nodes)
	return nil
}

// btfKfuncHookMax is kernel/bpf/btf.c:BTF_KFUNC_HOOK_MAX (14 hooks);
// btfKfuncSetProbes the bsearch probes of one hook's kfunc set at its
// bound, BTF_KFUNC_SET_MAX_CNT = 256 ids: the image has no BTF kfunc
// sets, so every hook is counted as a full set (an upper bound).
const (
	btfKfuncHookMax   = 14
	btfKfuncSetProbes = 9
)

// checkAttachBTFIDMulti models kernel/bpf/verifier.c:
// bpf_check_attach_btf_id_multi for a non-sleepable fentry.multi program
// on vmlinux BTF: btf_id_set_contains(&btf_id_deny); btf_type_by_id and
// btf_name_by_offset; btf_attach_func_proto (the FUNC and its name again,
// btf_kfunc_check_flag(KF_IMPLICIT_ARGS): one btf_kfunc_id_set_contains per
// hook, then the FUNC_PROTO); btf_distill_func_proto (__get_type_size of
// the return type and of each argument — btf_type_by_id of type 0 and of
// the type; the synthetic BTF has no modifier or typedef chains to follow
// — and per argument __get_arg_fmodel_flags' three
// btf_param_match_suffix, which read the parameter's name);
// kallsyms_lookup_name(tname); ftrace_location(addr).
func (tm *TracingMulti) checkAttachBTFIDMulti(c *sim.Counters, f TracingMultiFunc) (uint64, error) {
	c.Enter(PhaseTMBTF)
	c.Add(OpBTFSetProbe, uint64(bits.Len(btfIDDenyLen)))
	c.Add(OpBTFTypeByID, 2)                                 // btf_type_by_id, btf_name_by_offset
	c.Add(OpBTFTypeByID, 2)                                 // btf_attach_func_proto: the FUNC, its name
	c.Add(OpBTFSetProbe, btfKfuncHookMax*btfKfuncSetProbes) // btf_kfunc_check_flag
	c.Add(OpBTFTypeByID, 1)                                 // the FUNC_PROTO
	c.Add(OpBTFTypeByID, uint64(2*(1+f.NrArgs)))            // __get_type_size: return type, each argument
	c.Add(OpBTFTypeByID, uint64(f.NrArgs))                  // the parameter's name
	c.Add(OpBTFParamSuffix, uint64(3*f.NrArgs))             // btf_param_match_suffix
	c.Enter(PhaseTMKallsyms)
	addr, ok := tm.Syms.LookupName(c, f.Name)
	c.Enter(PhaseTMBTF)
	if !ok || addr == 0 {
		return 0, errno.ENOENT
	}
	if tm.Ft.Location(c, addr) == 0 {
		return 0, errno.ENOENT
	}
	return addr, nil
}

// trampolineGet models kernel/bpf/trampoline.c:bpf_trampoline_get →
// bpf_trampoline_lookup for a key with no trampoline yet: trampoline_mutex,
// the key-table chain walked to its end, kzalloc, direct_ops_alloc,
// ftrace_location(ip), the key and ip hlist_add_heads, refcount and list
// inits; then trampoline_lock and the func model copied. It returns tr->ip.
func (tm *TracingMulti) trampolineGet(c *sim.Counters, key, addr uint64) uint64 {
	c.Inc(OpMutex)
	h := hash64(key, trampolineHashBits)
	c.Add(OpTrampChain, uint64(tm.keyChain[h]))
	tm.keyChain[h]++
	c.Inc(OpKmalloc)
	c.Inc(OpTrampConst) // direct_ops_alloc: tr->fops = &direct_ops
	ip := tm.Ft.Location(c, addr)
	c.Add(OpTrampConst, 4) // two hlist_add_head, refcount_set, INIT_LIST_HEAD
	c.Inc(OpMutex)         // trampoline_lock
	c.Add(OpTrampConst, 2) // memcpy(&tr->func.model), tr->func.addr
	return ip
}

// TrampolineInsns is the instruction count of x86
// __arch_prepare_bpf_trampoline for one fentry program, no cookie, flags
// BPF_TRAMP_F_RESTORE_REGS, nargs 8-byte arguments, no call-depth
// tracking: push rbp, mov rbp,rsp, sub rsp, the rbx store, func_meta
// (emit_store_stack_imm64: mov + store), save_args (one store per
// argument), invoke_bpf_prog (the 5-byte skip nop, cookie mov + store,
// mov prog, lea run_ctx, call enter, mov rbx,rax, test, the je slot, lea
// ctx, call prog, mov prog, mov rsi,rbx, lea run_ctx, call exit: 15),
// restore_regs (one load per argument), the rbx load, leave, and
// emit_return's jmp to the return thunk (cpu_wants_rethunk: the AMD
// reference machine's retbleed/SRSO mitigation).
func TrampolineInsns(nargs int) int { return 2 + 1 + 1 + 2 + nargs + 15 + nargs + 1 + 1 + 1 }

// TrampolineBytes is the size arch_bpf_trampoline_size returns for the
// same trampoline: those instructions' bytes (push 1, mov 3, sub imm8 4,
// rbx store 4, func_meta mov eax,imm32 5 + store 4, invoke_bpf_prog 69 —
// nop 5, xor edi,edi 2, store 4, movabs 10, lea 4, call 5, mov 3, test 3,
// nop 2, lea 4, call 5, movabs 10, mov 3, lea 4, call 5 —, rbx load 4,
// leave 1, jmp thunk 5, 4 per argument store and load, every stack offset
// an imm8) plus BPF_INSN_SAFETY.
func TrampolineBytes(nargs int) int {
	return 1 + 3 + 4 + 4 + 9 + 4*nargs + 69 + 4*nargs + 4 + 1 + 5 + bpfInsnSafety
}

// trampolineUpdate models kernel/bpf/trampoline.c:bpf_trampoline_update
// for a trampoline's first program: bpf_trampoline_get_progs (kcalloc of
// the tnodes, freed at the end), arch_bpf_trampoline_size,
// bpf_tramp_image_alloc, arch_prepare_bpf_trampoline,
// arch_protect_bpf_trampoline (x86: nothing), register_fentry_multi (the
// caller's).
func (tm *TracingMulti) trampolineUpdate(c *sim.Counters, f TracingMultiFunc, key uint64, st *TracingMultiStats) {
	c.Add(OpKmalloc, 2) // tnodes kcalloc and kfree
	c.Add(OpTrampConst, 2)
	insns, size := TrampolineInsns(f.NrArgs), TrampolineBytes(f.NrArgs)
	// arch_bpf_trampoline_size: a scratch page, one emission pass.
	c.Enter(PhaseTMJIT)
	c.Inc(OpJITScratch)
	c.Add(OpJITInsn, uint64(insns))
	// bpf_tramp_image_alloc.
	c.Enter(PhaseTMImage)
	c.Add(OpKmalloc, 2) // im, im->skips
	c.Inc(OpTrampConst) // bpf_jit_charge_modmem
	start := tm.progPackAlloc(c, size, st)
	c.Inc(OpPercpuRef)
	c.Inc(OpKsymName)
	// bpf_image_ksym_add → bpf_ksym_add: list_add_tail_rcu and
	// latch_tree_insert (both copies of the tree); perf_event_ksymbol
	// with no listener.
	c.Add(OpTrampConst, 2)
	c.Add(OpKsymNode, uint64(2*bits.Len(uint(tm.ksyms))))
	tm.ksyms++
	// arch_prepare_bpf_trampoline: kvmalloc the rw image, emit, copy.
	c.Enter(PhaseTMJIT)
	c.Add(OpKmalloc, 2) // kvmalloc(size) and kvfree
	c.Add(OpJITInsn, uint64(insns))
	c.Enter(PhaseTMImage)
	pages := (start+size-1)/pageSize - start/pageSize + 1
	c.Add(OpTextCopy, uint64(pages))
	st.JITInsns += 2 * insns
	st.ImageBytes = size
	st.TextCopies += pages
}

// progPackAlloc models kernel/bpf/core.c:bpf_prog_pack_alloc(size) for a
// size under half a pack: pack_mutex, each pack on pack_list searched with
// bitmap_find_next_zero_area from chunk 0 (the words up to the first free
// chunk; a full pack is read to its end), a new pack when none has room,
// bitmap_set. It returns the image's byte offset in its pack.
func (tm *TracingMulti) progPackAlloc(c *sim.Counters, size int, st *TracingMultiStats) int {
	c.Inc(OpMutex)
	nbits := (size + progChunkSize - 1) / progChunkSize
	for i := range tm.packs {
		p := &tm.packs[i]
		c.Add(OpPackWord, uint64(min(p.used/64+1, progChunkCount/64)))
		if p.used+nbits <= progChunkCount {
			pos := p.used
			p.used += nbits
			c.Inc(OpTrampConst) // bitmap_set
			return pos * progChunkSize
		}
	}
	c.Inc(OpPackNew)
	mm.SetMemoryCalls(c, 1, tm.Ft.CPUs) // set_memory_rox of the new pack
	st.Packs++
	tm.packs = append(tm.packs, bpfProgPack{used: nbits})
	c.Inc(OpTrampConst)
	return 0
}
