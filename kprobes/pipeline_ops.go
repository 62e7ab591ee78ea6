package kprobes

import "github.com/kpsim/kpsim/sim"

// Phases of a registration run, in pipeline order. The address-safety
// checks get a phase each so a report shows which table scan costs what.
var (
	PhaseNameLookup = sim.NewPhase("name_lookup", "_kprobe_addr: kallsyms name and size/offset lookups, ENDBR adjust")
	PhaseRereg      = sim.NewPhase("rereg_check", "warn_kprobe_rereg: __get_valid_kprobe")
	PhaseFtrace     = sim.NewPhase("safety.ftrace", "check_ftrace_location: ftrace_location")
	PhaseText       = sim.NewPhase("safety.text", "core_kernel_text / __module_text_address, gate area, module checks")
	PhaseBlacklist  = sim.NewPhase("safety.blacklist", "within_kprobe_blacklist")
	PhaseJumpLabel  = sim.NewPhase("safety.jump_label", "jump_label_text_reserved(addr, addr)")
	PhaseStaticCall = sim.NewPhase("safety.static_call", "static_call_text_reserved(addr, addr)")
	PhaseBug        = sim.NewPhase("safety.bug", "find_bug")
	PhaseCFI        = sim.NewPhase("safety.cfi", "is_cfi_preamble_symbol")
	PhasePrepare    = sim.NewPhase("prepare", "prepare_kprobe: can_probe, insn slot, arch_copy_kprobe")
	PhaseInsert     = sim.NewPhase("insert", "existence check, hlist_add_head_rcu (+ tree insert), aggregation")
	PhaseArm        = sim.NewPhase("arm", "arm_kprobe: get_optimized_kprobe, int3 text_poke + sync, or ftrace arming")
	PhaseOptimize   = sim.NewPhase("optimize", "try_to_optimize_kprobe: can_optimize, copy_optimized_instructions, arch_check_optimized_kprobe")
	PhaseOptimizer  = sim.NewPhase("optimizer", "kprobe_optimizer worker: batched jump writes and unoptimizations").
			In(sim.Kworker, "kernel/kprobes.c: DECLARE_DELAYED_WORK(optimizing_work, kprobe_optimizer); kick_kprobe_optimizer queues it on system_wq with schedule_delayed_work(OPTIMIZE_DELAY)")
	PhaseUnregister = sim.NewPhase("unregister", "unregister_kprobes: disarm, unhash, free")
)

// Cycle weights of the per-probe work that involves no lookup. The kernel
// operations behind them cannot be run on this machine (they need ring 0),
// so each weight is an order of magnitude assembled from documented
// hardware costs; they are the weights a user is most likely to want to
// override from a cost file measured with perf on their own hardware.
const (
	// text_poke(): use_temporary_mm (two CR3 writes, ~200-300 cycles each
	// with PCID), set and clear one PTE, a small memcpy, and a local INVLPG
	// (~150-250 cycles on Zen/Skylake per Agner Fog's instruction tables),
	// with IRQs off and text_mutex held.
	wTextPoke = 1500
	rTextPoke = "documented: 2 CR3 writes (~250 each) + PTE set/clear + INVLPG (~200, Agner Fog tables) + memcpy ≈ 1500 cycles"
	// text_poke_sync() = on_each_cpu(do_sync_core): the sender's fixed
	// cost of one IPI broadcast and waiting for the acknowledgements,
	// ≈ 1 µs round trip on current x86 servers.
	wSync = 2600
	rSync = "documented order of magnitude: an IPI broadcast round trip ≈ 1 µs ≈ 2600 cycles at 2.6 GHz"
	// Per online CPU in a sync: one x2APIC ICR write and that CPU's
	// serialising handler the sender waits for.
	wSyncCPU = 150
	rSyncCPU = "documented: one x2APIC ICR write (an MSR write, ~100-200 cycles) per target CPU"
	// perf_event_text_poke with no listener: a few loads and a branch.
	wPerfPoke = 20
	rPerfPoke = "a handful of L1 loads and a not-taken branch (no perf listener)"
	// One slot_used[] byte of an insn page checked: sequential, L1.
	wSlotScan = 1
	rSlotScan = "sequential byte compare in L1: ~1 cycle"
	// One kprobe_insn_page visited on c->pages: a dependent load.
	wSlotPage = 14
	rSlotPage = "one dependent load, L2 hit (Zen L2 ≈ 14 cycles)"
	// A new insn page: kmalloc + module_alloc (vmalloc of one page) +
	// set_memory_ro + set_memory_x (page-table updates and a TLB flush on
	// every CPU) + perf_event_ksymbol.
	wSlotAlloc = 30000
	rSlotAlloc = "vmalloc + two set_memory_* calls each ending in a cross-CPU TLB flush (IPI broadcast, ~2600) plus page-table walks ≈ 30k cycles"
	// 6.12's insn page: execmem_alloc (a vmalloc of one page, as
	// module_alloc) and one set_memory_rox where 6.1 made two calls.
	wSlotAllocExecmem = wSlotAlloc - wSetMemory
	rSlotAllocExecmem = "no measurement: kprobe.insn_page.alloc (30k, a vmalloc and two set_memory_* calls) less one set_memory_* call (a TLB-flush IPI broadcast, ~2600, plus its page-table walk, ~1000)"
	// One set_memory_* call on a few pages: change_page_attr's walk and a
	// cross-CPU TLB flush.
	wSetMemory = wSync + 1000
	// 7.3: a page carved from the execmem ROX cache: a maple-tree walk of
	// free_areas and stores into busy_areas and free_areas, under a mutex.
	wExecmemCacheAlloc = 6*latL2 + 3*latL3
	rExecmemCacheAlloc = "no documented source: ~6 dependent maple-node loads (L2, ~14) for the walk and ~3 node stores on cold lines (L3, ~42)"
	// 7.3: execmem_cache_populate_alloc: vmalloc of 2 MiB (huge mapping),
	// int3 fill of 2 MiB, one set_memory_rox over 512 pages.
	// wSlotAlloc - 2*wSetMemory + pmdSize/16 + wSetMemory = 157,472,
	// rounded to the 4 significant digits a cost file keeps (a documented
	// weight must survive the round trip).
	wExecmemCachePopulate = 157500
	rExecmemCachePopulate = "no measurement: the vmalloc part of kprobe.insn_page.alloc (30k less two set_memory_* calls), a 2 MiB fill at ~16 bytes/cycle of streaming stores (~131k), one set_memory_rox (~3600)"
	// 7.3: execmem_cache_free of one page: execmem_force_rw (set_memory_nx
	// + set_memory_rw), an int3 fill of 4 KiB, execmem_restore_rox
	// (set_memory_rox), a maple store; the clean work is deferred.
	wExecmemCacheFree = 3*wSetMemory + pageSize/16 + 2*latL3
	rExecmemCacheFree = "no measurement: three set_memory_* calls (each a TLB-flush IPI broadcast ~2600 plus a page-table walk ~1000), a 4 KiB fill at ~16 bytes/cycle, two cold maple-node stores"
	// 6.12+: one objpool per-CPU slot of a kretprobe's rethook:
	// __vmalloc_node of at least a page and its memset (or the kvfree).
	wObjpoolSlot = wSlotAlloc - 2*wSetMemory
	rObjpoolSlot = "no measurement: the vmalloc part of kprobe.insn_page.alloc (30k less its two set_memory_* calls, ~22.8k)"
	// 7.3: one atomic on another CPU's text_poke_array_refs line.
	wTextPokeRef = latL3
	rTextPokeRef = "no documented source: an atomic store or lock dec on another CPU's per-cpu line, a cross-core miss taken as one L3 latency (~42)"
	// 6.12+: cond_resched() with no reschedule pending.
	wCondResched = wConst
	rCondResched = "a per-CPU flag test and a not-taken branch (as kprobe.check.const)"
	// kmalloc/kzalloc on the SLUB fast path.
	wKmalloc = 80
	rKmalloc = "SLUB fast path ≈ 20-30 ns ≈ 60-80 cycles (cmpxchg on the per-cpu freelist)"
	// copy_from_kernel_nofault of MAX_INSN_SIZE bytes.
	wCopyInsn = 40
	rCopyInsn = "pagefault_disable + a 15-byte copy from L1/L2: ~40 cycles"
	// O(1) checks: core_kernel_text bounds, in_gate_area_no_mm, flag
	// tests, alternatives_text_reserved on an SMP boot (empty list).
	wConst = 5
	rConst = "a couple of compares on L1-hot globals"
	// synchronize_rcu / synchronize_rcu_tasks: the caller sleeps for a
	// grace period; its CPU cost is two context switches. The wall time
	// (milliseconds) is not CPU cycles and is not modelled.
	wSyncRCU = 5000
	rSyncRCU = "caller's CPU cost of blocking for a grace period: ~2 context switches ≈ 5000 cycles (wall time not modelled)"
	// One node of the optimizer's unoptimizing_list visited.
	wOptListVisit = 42
	rOptListVisit = "one dependent load on a cold optimized_kprobe: L3 hit (Zen ≈ 42 cycles)"
	// Reading the 4 bytes at a symbol start for is_endbr.
	wEndbrRead = 40
	rEndbrRead = "copy_from_kernel_nofault of 4 bytes: pagefault_disable + one load, ~40 cycles"
	// One is_cfi_trap lookup (can_probe, 6.12.117 and 7.3 with CFI, only
	// on a movl 0xBA / addl 0x03): a linear walk of __cfi_traps.
	wCFITrap = latL3
	rCFITrap = "no documented source: the image has no __cfi_traps table, so the walk's length is unknown; one L3 load (~42 cycles) stands for the lookup"
)

var (
	opTextPoke             = sim.NewOp("text_poke", wTextPoke, rTextPoke, "one text_poke() write")
	opSync                 = sim.NewOp("text_poke.sync", wSync, rSync, "one text_poke_sync(): IPI every online CPU and wait")
	opSyncCPU              = sim.NewOp("text_poke.sync.cpu", wSyncCPU, rSyncCPU, "one CPU IPIed by a text_poke_sync")
	opPerfPoke             = sim.NewOp("perf.text_poke", wPerfPoke, rPerfPoke, "one perf_event_text_poke (no listener)")
	opSlotScan             = sim.NewOp("kprobe.insn_slot.scan", wSlotScan, rSlotScan, "one slot_used[] byte checked by __get_insn_slot")
	opSlotPage             = sim.NewOp("kprobe.insn_slot.page", wSlotPage, rSlotPage, "one kprobe_insn_page visited by __get_insn_slot / __free_insn_slot")
	opSlotAlloc            = sim.NewOp("kprobe.insn_page.alloc", wSlotAlloc, rSlotAlloc, "one new executable insn page")
	opSlotAllocExecmem     = sim.NewOp("kprobe.insn_page.alloc.execmem", wSlotAllocExecmem, rSlotAllocExecmem, "one new insn page from execmem_alloc + set_memory_rox (6.12)")
	opExecmemCacheAlloc    = sim.NewOp("execmem.cache.alloc", wExecmemCacheAlloc, rExecmemCacheAlloc, "one insn page carved from the execmem ROX cache (7.3)")
	opExecmemCachePopulate = sim.NewOp("execmem.cache.populate", wExecmemCachePopulate, rExecmemCachePopulate, "the execmem ROX cache grown by 2 MiB for an insn page (7.3)")
	opExecmemCacheFree     = sim.NewOp("execmem.cache.free", wExecmemCacheFree, rExecmemCacheFree, "one insn page given back to the execmem ROX cache (7.3)")
	opObjpoolSlot          = sim.NewOp("objpool.slot", wObjpoolSlot, rObjpoolSlot, "one per-CPU objpool slot of a kretprobe's rethook allocated or freed (6.12+)")
	opTextPokeRef          = sim.NewOp("text_poke.refs.cpu", wTextPokeRef, rTextPokeRef, "one per-CPU text_poke_array_refs set or dropped by a batch (7.3)")
	opCondResched          = sim.NewOp("cond_resched", wCondResched, rCondResched, "one cond_resched() in a text_poke_bp batch (6.12+)")
	opKmalloc              = sim.NewOp("kmalloc", wKmalloc, rKmalloc, "one kmalloc/kzalloc/kfree")
	opCopyInsn             = sim.NewOp("kprobe.copy_insn", wCopyInsn, rCopyInsn, "copy_from_kernel_nofault of an instruction")
	opConst                = sim.NewOp("kprobe.check.const", wConst, rConst, "one O(1) check (text bounds, gate area, alternatives on SMP)")
	opSyncRCU              = sim.NewOp("synchronize_rcu", wSyncRCU, rSyncRCU, "one synchronize_rcu / synchronize_rcu_tasks (caller CPU only)")
	opOptListVisit         = sim.NewOp("kprobe.optlist.visit", wOptListVisit, rOptListVisit, "one node of unoptimizing_list walked (optprobe_queued_unopt)")
	opEndbrRead            = sim.NewOp("kprobe.endbr.read", wEndbrRead, rEndbrRead, "arch_adjust_kprobe_addr's 4-byte read")
	opCFITrap              = sim.NewOp("kprobe.cfi_trap", wCFITrap, rCFITrap, "one is_cfi_trap lookup in can_probe (6.12+, CFI kernels)")
	opModText              = sim.NewOp("module.text_address", 42, "hardware fact: ~3 dependent rb-node loads x 14-cycle L2 (mod_tree)", "__module_text_address: mod_tree lookup")
)

// Fault points of the pipeline.
var (
	FaultInsnSlot    = sim.NewFaultPoint("kprobe.insn_slot.alloc", "__get_insn_slot: c->alloc of a new kprobe_insn_page fails (the descriptor is kfree'd): register_kprobe -ENOMEM; register_kprobes unregisters the probes before it")
	FaultOptinsnSlot = sim.NewFaultPoint("kprobe.optinsn_slot.alloc", "get_optinsn_slot cannot allocate a new page: arch_prepare_optimized_kprobe -ENOMEM, the probe stays int3 (optimization silently skipped)")
	FaultAggrAlloc   = sim.NewFaultPoint("kprobe.aggr.alloc", "alloc_aggr_kprobe's kzalloc fails: register_aggr_kprobe returns -ENOMEM (the probe already there is untouched); in try_to_optimize_kprobe the probe silently stays an int3 probe")
)
