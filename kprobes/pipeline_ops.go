package kprobes

import (
	"time"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

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
// so each weight is derived from documented hardware costs and published
// kernel measurements (docs/cost-model.md); they are the weights a user is
// most likely to want to override from a cost file measured with perf on
// their own hardware. text_poke and text_poke_sync are counted by package
// alternative, the set_memory_* broadcasts' per-CPU parts by package mm,
// both shared with ftrace, the tracing layer and BPF.
const (
	// perf_event_text_poke with no listener: a few loads and a branch.
	wPerfPoke = 20
	rPerfPoke = "a handful of L1 loads and a not-taken branch (no perf listener)"
	// One slot_used[] byte of an insn page checked: sequential, L1.
	wSlotScan = 1
	rSlotScan = "sequential byte compare in L1: ~1 cycle"
	// One kprobe_insn_page visited on c->pages: a dependent load.
	wSlotPage = 14
	rSlotPage = "one dependent load, L2 hit (Zen L2 ≈ 14 cycles)"
	// A new insn page (6.1): kzalloc of the kprobe_insn_page, module_alloc
	// of one page (a vmalloc), set_memory_ro + set_memory_x (each a CPA
	// walk and a cpa_flush TLB-flush broadcast) and perf_event_ksymbol.
	// Each broadcast's per-CPU parts are counted apart
	// (mm.SetMemoryCalls over the online CPUs); the weight is the rest.
	wSlotAlloc      = wKmalloc + wVmallocPage + 2*wSetMemory + 100
	rSlotAlloc      = "derived: kzalloc (40) + module_alloc of a page (~1500: the alloc share of a 0.97 µs vmalloc+vfree pair, Rezki's test_vmalloc fix_size_alloc_test, LKML 2019-07-01) + set_memory_ro and set_memory_x (each a CPA walk ~400, a cpa_flush broadcast's fixed part 5000 and INVLPG ~260; the broadcasts' per-CPU parts are counted as set_memory.flush.cpu and set_memory.flush.handler) + perf_event_ksymbol (~100) ≈ 12,960"
	rSlotAllocRange = "7000 (fast CPA and broadcast) to 50000 (a large-page split in CPA, ~8000 each, and idle CPUs' wake-up in the broadcasts)"
	// 6.12's insn page: execmem_alloc (a vmalloc of one page, as
	// module_alloc) and one set_memory_rox where 6.1 made two calls.
	wSlotAllocExecmem      = wSlotAlloc - wSetMemory
	rSlotAllocExecmem      = "derived: kprobe.insn_page.alloc (12,960: a vmalloc and two set_memory_* calls) less one set_memory_* call (5,660), since execmem_alloc + set_memory_rox make one CPA pass and one flush (arch/x86/kernel/kprobes/core.c:alloc_insn_page, 6.12)"
	rSlotAllocExecmemRange = "4000 to 25000: kprobe.insn_page.alloc's range less one set_memory_* call"
	// One set_memory_* call's part that does not depend on the CPU count
	// (package mm), and a vmalloc'd page.
	wSetMemory   = mm.SetMemoryCycles
	wVmallocPage = mm.VmallocPageCycles
	// 7.3: a page carved from the execmem ROX cache: a maple-tree walk of
	// free_areas and stores into busy_areas and free_areas, under a mutex.
	wExecmemCacheAlloc = 6*latL2 + 3*latL3
	rExecmemCacheAlloc = "no documented source: ~6 dependent maple-node loads (L2, ~14) for the walk and ~3 node stores on cold lines (L3, ~42)"
	// 7.3: execmem_cache_populate_alloc: vmalloc of 2 MiB (huge mapping),
	// int3 fill of 2 MiB, one set_memory_rox over 512 pages.
	// wVmallocPage + pmdSize/16 + wSetMemory = 138,232, rounded to the 4
	// significant digits a cost file keeps (a documented weight must
	// survive the round trip).
	wExecmemCachePopulate = 138200
	rExecmemCachePopulate = "derived: a vmalloc (~1500, as kprobe.insn_page.alloc's), a 2 MiB fill at ~16 bytes/cycle of streaming stores (~131k), one set_memory_rox (~5660: CPA walk, a flush broadcast's fixed part, INVLPG; its per-CPU parts counted as set_memory.flush.*)"
	// 7.3: execmem_cache_free of one page: execmem_force_rw (set_memory_nx
	// + set_memory_rw), an int3 fill of 4 KiB, execmem_restore_rox
	// (set_memory_rox), a maple store; the clean work is deferred.
	wExecmemCacheFree = 3*wSetMemory + pageSize/16 + 2*latL3
	rExecmemCacheFree = "derived: three set_memory_* calls (each a CPA walk ~400, a TLB-flush broadcast's fixed part 5000 and INVLPG ~260; their per-CPU parts counted as set_memory.flush.*), a 4 KiB fill at ~16 bytes/cycle, two cold maple-node stores"
	// 6.12+: one objpool per-CPU slot of a kretprobe's rethook:
	// __vmalloc_node of at least a page and its memset (or the kvfree).
	wObjpoolSlot = wVmallocPage
	rObjpoolSlot = "derived: one vmalloc of a page (~1500: the alloc share of a 0.97 µs vmalloc+vfree pair, Rezki's test_vmalloc)"
	// 7.3: one atomic on another CPU's text_poke_array_refs line.
	wTextPokeRef = latL3
	rTextPokeRef = "no documented source: an atomic store or lock dec on another CPU's per-cpu line, a cross-core miss taken as one L3 latency (~42)"
	// 6.12+: cond_resched() with no reschedule pending.
	wCondResched = wConst
	rCondResched = "a per-CPU flag test and a not-taken branch (as kprobe.check.const)"
	// One kmalloc/kzalloc or one kfree on the SLUB fast path.
	wKmalloc      = 40
	rKmalloc      = "derived: a SLUB fast-path alloc+free pair is 42-47 cycles (commit fbd02630c6e3, Brouer 2015), a kmalloc(256)+kfree pair 60-116 (Lameter's 2014 series as quoted by Brouer); a 6.x distro config adds 10-60 (init_on_alloc zeroing, freelist hardening): ~80 a pair, 40 a call"
	rKmallocRange = "20 (half a bare fast-path pair) to 150 (a slow-path refill from the partial list every few calls)"
	// copy_from_kernel_nofault of MAX_INSN_SIZE bytes.
	wCopyInsn  = 40
	rCopyInsn  = "pagefault_disable + a 15-byte copy from L1/L2: ~40 cycles"
	rCopyRange = "20 (L1-hot bytes) to 100 (a cold line of kernel text)"
	// O(1) checks: core_kernel_text bounds, in_gate_area_no_mm, flag
	// tests, alternatives_text_reserved on an SMP boot (empty list).
	wConst = 5
	rConst = "a couple of compares on L1-hot globals"
	// synchronize_rcu / synchronize_rcu_tasks: the caller sleeps for a
	// grace period; its CPU cost is blocking and being woken: about two
	// context switches. The grace period itself is time, not cycles: each
	// op declares it as a wait (sim.Op.Waits), which reports show apart.
	wSyncRCU      = 5000
	rSyncRCU      = "caller's CPU cost of blocking for a grace period: ~2 context switches ≈ 5000 cycles (the grace period is reported as a wait)"
	wSyncRCULo    = 2600
	wSyncRCUHi    = 13000
	rSyncRCURange = "two context switches: 1-1.4 µs each from perf bench sched pipe's 2.79 µs per round trip (Ingo Molnar, LKML 2025-05-31), to 5 µs with a remote wake-up IPI and cold caches"
)

// Grace periods: how long the caller of synchronize_rcu and
// synchronize_rcu_tasks sleeps.
const (
	gpTypical = 9500 * time.Microsecond
	gpLo      = 3 * time.Millisecond
	gpHi      = 130 * time.Millisecond
	rGP       = "a normal RCU grace period: ~9.5 ms on a 36-CPU system with 6.x's wake via callback, ~4 ms with 7.3's default rcu_normal_wake_from_gp (Joel Fernandes, \"rcu: Fix synchronize_rcu latency by removing CPU threshold for wake_from_gp\"); low: one force-quiescent-state period (RCU_JIFFIES_TILL_FORCE_QS, 3-4 ms); high: 64 concurrent callers on 64 CPUs, up to 130 ms (Uladzislau Rezki, LKML 2025-06-11)"
	// RCU Tasks waits for every task to pass a voluntary context switch,
	// polling with a backoff; it is far slower than RCU.
	gpTasksTypical = 25 * time.Millisecond
	gpTasksLo      = 8 * time.Millisecond
	gpTasksHi      = time.Second
	rGPTasks       = "an RCU Tasks grace period: ~25 ms without holdouts (Tasks Trace averages 980 ms, McKenney 2020, and is '40x slower than RCU Tasks', commit 2393a613d2e3); low: its pre- and post-GP synchronize_rcu; high: a holdout task or a back-to-back request, each a HZ/10 sleep (kernel/rcu/tasks.h) and more"
)

const (
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
	opTextPoke  = alternative.OpTextPoke
	opPerfPoke  = sim.NewOp("perf.text_poke", wPerfPoke, rPerfPoke, "one perf_event_text_poke (no listener)")
	opSlotScan  = sim.NewOp("kprobe.insn_slot.scan", wSlotScan, rSlotScan, "one slot_used[] byte checked by __get_insn_slot")
	opSlotPage  = sim.NewOp("kprobe.insn_slot.page", wSlotPage, rSlotPage, "one kprobe_insn_page visited by __get_insn_slot / __free_insn_slot")
	opSlotAlloc = sim.NewOp("kprobe.insn_page.alloc", wSlotAlloc, rSlotAlloc, "one new executable insn page").
			Range(7000, 50000, rSlotAllocRange)
	opSlotAllocExecmem = sim.NewOp("kprobe.insn_page.alloc.execmem", wSlotAllocExecmem, rSlotAllocExecmem, "one new insn page from execmem_alloc + set_memory_rox (6.12)").
				Range(4000, 25000, rSlotAllocExecmemRange)
	opExecmemCacheAlloc    = sim.NewOp("execmem.cache.alloc", wExecmemCacheAlloc, rExecmemCacheAlloc, "one insn page carved from the execmem ROX cache (7.3)")
	opExecmemCachePopulate = sim.NewOp("execmem.cache.populate", wExecmemCachePopulate, rExecmemCachePopulate, "the execmem ROX cache grown by 2 MiB for an insn page (7.3)")
	opExecmemCacheFree     = sim.NewOp("execmem.cache.free", wExecmemCacheFree, rExecmemCacheFree, "one insn page given back to the execmem ROX cache (7.3)")
	opObjpoolSlot          = sim.NewOp("objpool.slot", wObjpoolSlot, rObjpoolSlot, "one per-CPU objpool slot of a kretprobe's rethook allocated or freed (6.12+)")
	opTextPokeRef          = sim.NewOp("text_poke.refs.cpu", wTextPokeRef, rTextPokeRef, "one per-CPU text_poke_array_refs set or dropped by a batch (7.3)")
	opCondResched          = sim.NewOp("cond_resched", wCondResched, rCondResched, "one cond_resched() in a text_poke_bp batch (6.12+)")
	opKmalloc              = sim.NewOp("kmalloc", wKmalloc, rKmalloc, "one kmalloc/kzalloc/kfree").
				Range(20, 150, rKmallocRange)
	opCopyInsn = sim.NewOp("kprobe.copy_insn", wCopyInsn, rCopyInsn, "copy_from_kernel_nofault of an instruction").
			Range(20, 100, rCopyRange)
	opConst   = sim.NewOp("kprobe.check.const", wConst, rConst, "one O(1) check (text bounds, gate area, alternatives on SMP)")
	opSyncRCU = sim.NewOp("synchronize_rcu", wSyncRCU, rSyncRCU, "one synchronize_rcu (the caller's CPU cost; the grace period is a wait)").
			Range(wSyncRCULo, wSyncRCUHi, rSyncRCURange).
			Waits(gpTypical, gpLo, gpHi, rGP)
	opSyncRCUTasks = sim.NewOp("synchronize_rcu_tasks", wSyncRCU, rSyncRCU, "one synchronize_rcu_tasks in kprobe_optimizer (the caller's CPU cost; the grace period is a wait)").
			Range(wSyncRCULo, wSyncRCUHi, rSyncRCURange).
			Waits(gpTasksTypical, gpTasksLo, gpTasksHi, rGPTasks)
	opOptListVisit = sim.NewOp("kprobe.optlist.visit", wOptListVisit, rOptListVisit, "one node of unoptimizing_list walked (optprobe_queued_unopt)")
	opEndbrRead    = sim.NewOp("kprobe.endbr.read", wEndbrRead, rEndbrRead, "arch_adjust_kprobe_addr's 4-byte read")
	opCFITrap      = sim.NewOp("kprobe.cfi_trap", wCFITrap, rCFITrap, "one is_cfi_trap lookup in can_probe (6.12+, CFI kernels)")
	opModText      = sim.NewOp("module.text_address", 42, "hardware fact: ~3 dependent rb-node loads x 14-cycle L2 (mod_tree)", "__module_text_address: mod_tree lookup")
)

// Fault points of the pipeline.
var (
	FaultInsnSlot    = sim.NewFaultPoint("kprobe.insn_slot.alloc", "__get_insn_slot: c->alloc of a new kprobe_insn_page fails (the descriptor is kfree'd): register_kprobe -ENOMEM; register_kprobes unregisters the probes before it")
	FaultOptinsnSlot = sim.NewFaultPoint("kprobe.optinsn_slot.alloc", "get_optinsn_slot cannot allocate a new page: arch_prepare_optimized_kprobe -ENOMEM, the probe stays int3 (optimization silently skipped)")
	FaultAggrAlloc   = sim.NewFaultPoint("kprobe.aggr.alloc", "alloc_aggr_kprobe's kzalloc fails: register_aggr_kprobe returns -ENOMEM (the probe already there is untouched); in try_to_optimize_kprobe the probe silently stays an int3 probe")
)
