package alternative

import "github.com/kpsim/kpsim/sim"

// Run-time text patching: what arch/x86/kernel/alternative.c does after
// boot, when kprobes, optprobes, ftrace and static keys rewrite kernel text
// on a live SMP machine. Its cost is counted here, once, for every caller
// (kprobes, ftrace, the tracing layer), so that each per-CPU term follows
// the machine's online CPU count.
//
// # What Linux does
//
// text_poke(addr, opcode, len) maps the target page writable in a
// temporary mm (use_temporary_mm: a CR3 switch, with PCID a non-flushing
// one), sets one PTE of text_poke_mm, memcpy()s the bytes, clears the PTE,
// flushes it from the local TLB and switches CR3 back, all with IRQs off
// under text_mutex. The other CPUs may still execute stale bytes from
// their instruction caches, so the caller then runs text_poke_sync():
// on_each_cpu(do_sync_core, NULL, 1) in 6.1 and 6.12
// (smp_text_poke_sync_each_cpu in 7.3), which queues a call-function entry
// on every other online CPU, sends each an IPI, runs do_sync_core locally
// and spins until every CPU has run its handler (sync_core: an IRET to
// self or SERIALIZE) and released the entry. text_poke_bp_batch does three
// rounds of this for a batch of sites: int3 on every site, then the tails,
// then the first bytes, each round followed by a sync.
//
// So one sync costs the sender a fixed part (queueing, the wait for the
// slowest acknowledgement) and a per-CPU part (one ICR write and one
// call-function entry per target), and costs each other CPU an interrupt:
// work that `perf stat CMD` does not count (it runs in the other CPUs'
// interrupt context) but `perf stat -a` does.

// Weights. None of this work can run in user space (CR3 writes, PTE
// changes, ICR writes and IPIs are privileged), so each weight is derived
// from published kernel measurements and documented latencies, summed
// part by part; each op's range is the sum of its parts' low and high
// ends (kpsim run many --sensitivity moves it there). docs/cost-model.md
// gives every part's source. Times convert at 2.6 GHz (the reference
// machine's clock); core-bound parts keep their cycle counts.
const (
	// text_poke (6.x): irq save/restore (37 cycles, commit fbd02630c6e3),
	// two page-table walks, the PTE lock, set and clear (~200), two
	// switch_mm_irqs_off calls' bookkeeping (~400), a flushing CR3 load
	// of the poking ASID (~300: "comparable to INVLPG", commit
	// e7b52ffd45a6; INVLPG ~100 ns, arch/x86/mm/tlb.c) and a NOFLUSH one
	// back (~150: "on the order of a hundred cycles",
	// Documentation/arch/x86/pti.rst), the copy with its TLB miss and the
	// verify (~100), flush_tlb_mm_range on the unloaded poking mm (~70: a
	// tlb_gen increment, no INVLPG, no IPI).
	wTextPoke                = 1300
	rTextPoke                = "derived: irq save/restore 37 (commit fbd02630c6e3) + PTE walks, lock, set/clear ~200 + switch_mm bookkeeping x2 ~400 + flushing CR3 load ~300 (commit e7b52ffd45a6: comparable to INVLPG, ~100 ns) + NOFLUSH CR3 load ~150 (Documentation/arch/x86/pti.rst: order of a hundred cycles) + copy, TLB miss, verify ~100 + flush_tlb_mm_range on the unloaded poking mm ~70 ≈ 1300"
	rTextPokeRange           = "sum of the parts' low (715) and high (2110) ends: the CR3 costs span 100-500 cycles, the bookkeeping 200-600"
	wTextPokeLo, wTextPokeHi = 800, 2200

	// text_poke_sync's fixed part for the sender: the local
	// do_sync_core under irq save (IRET to self ~110 ns ≈ 290, commit
	// c198b121b1a1; 37), one ICR write with its mfence; lfence
	// (weak_wrmsr_fence; ~250, no published latency), the IPI's delivery
	// (~1 µs) and the slowest target's handler (~1300), which the sender
	// spins on in csd_lock_wait.
	wSync            = 5000
	rSync            = "derived: local do_sync_core (IRET to self ~110 ns ≈ 290, commit c198b121b1a1) + irq save/restore 37 + one x2APIC ICR write with weak_wrmsr_fence (~250, no published latency) + IPI delivery (~1 µs ≈ 2600) + the slowest target's handler the sender waits for (~1300) ≈ 4500-5500"
	rSyncRange       = "3000 (handler and delivery at their low ends) to 10000 (the high ends); an idle target adds its C-state exit on top (C1 1-2 µs, Skylake-SP C6 133 µs: drivers/idle/intel_idle.c), which a busy machine does not pay"
	wSyncLo, wSyncHi = 3000, 10000

	// Per other online CPU of a sync, on the sender: csd_lock and
	// llist_add onto the target's call_single_queue (a remote line), and
	// csd_lock_wait pulling the target-written csd back.
	wSyncCPU               = 300
	rSyncCPU               = "derived: per target CPU, queueing its call-function entry (csd_lock + llist_add on a remote line, ~150) and collecting its acknowledgement (csd_lock_wait, ~150): two core-to-core line transfers, ~40-100 ns each (kernel/smp.c:smp_call_function_many_cond)"
	rSyncCPURange          = "two core-to-core line transfers at 40-150 ns: 200-800 cycles; cross-socket targets sit at the high end"
	wSyncCPULo, wSyncCPUHi = 200, 800

	// Per other online CPU of a sync, on that CPU: the IPI's interrupt
	// entry and exit, flush_smp_call_function_queue, EOI (~1000), and
	// sync_core (IRET to self ~290).
	wSyncHandler                   = 1300
	rSyncHandler                   = "derived: interrupt entry/exit, the call-function queue and the x2APIC EOI (~1000: kernel entry ~440 + exit ~270 cycles on Xeon E5 v3, lastweek.io 2019, plus the queue's line traffic) + sync_core by IRET to self (~110 ns ≈ 290, commit c198b121b1a1)"
	rSyncHandlerRange              = "850 (entry/exit 600, IRET 250) to 2400 (entry/exit 2000 with the entry mitigations, IRET 400)"
	wSyncHandlerLo, wSyncHandlerHi = 850, 2400
)

// SyncCPUCycles is the sender's cost per other CPU of one broadcast.
const SyncCPUCycles = wSyncCPU

// The documented ranges of TextPokeCycles and SyncCycles, for the ranges
// of composed weights.
const (
	TextPokeCyclesLo, TextPokeCyclesHi = wTextPokeLo, wTextPokeHi
	SyncCyclesLo, SyncCyclesHi         = wSyncLo, wSyncHi
)

// TextPokeCycles is one text_poke's weight, for composed weights that
// stand for a known number of pokes (ftrace's text_poke_bp users).
const TextPokeCycles = wTextPoke

// SyncCycles is the sender's fixed cost of one IPI broadcast and its wait,
// the unit weights composed of broadcasts (set_memory_*'s TLB flush) use.
const SyncCycles = wSync

var (
	// OpTextPoke is one text_poke() write.
	OpTextPoke = sim.NewOp("text_poke", wTextPoke, rTextPoke, "one text_poke() write").
			Range(wTextPokeLo, wTextPokeHi, rTextPokeRange)
	// OpTextPokeSync is the sender's fixed part of one text_poke_sync().
	OpTextPokeSync = sim.NewOp("text_poke.sync", wSync, rSync, "one text_poke_sync(): IPI every other online CPU, sync the local one, wait for all").
			Range(wSyncLo, wSyncHi, rSyncRange)
	// OpTextPokeSyncCPU is the sender's per-CPU part of one text_poke_sync().
	OpTextPokeSyncCPU = sim.NewOp("text_poke.sync.cpu", wSyncCPU, rSyncCPU, "one other CPU IPIed by a text_poke_sync: the sender's queueing and wait").
				Range(wSyncCPULo, wSyncCPUHi, rSyncCPURange)
	// OpSyncCoreHandler is one other CPU's handling of a text_poke_sync IPI.
	OpSyncCoreHandler = sim.NewOp("text_poke.sync.handler", wSyncHandler, rSyncHandler,
		"one other CPU's IPI handler for a text_poke_sync: interrupt entry/exit, the call-function queue, do_sync_core").
		Range(wSyncHandlerLo, wSyncHandlerHi, rSyncHandlerRange).
		In(sim.OtherCPU, "arch/x86/kernel/alternative.c:text_poke_sync: on_each_cpu(do_sync_core) runs do_sync_core on every other online CPU from the call-function IPI")
)

// TextPokeSync counts one text_poke_sync() on a machine with cpus online
// CPUs: the sender's fixed part (its own do_sync_core included), and for
// each of the cpus-1 others the sender's queueing and wait and that CPU's
// IPI handler. on_each_cpu queues and IPIs only the other CPUs
// (kernel/smp.c:smp_call_function_many_cond) and runs the function
// locally.
//
// Models arch/x86/kernel/alternative.c:text_poke_sync (6.1, 6.12;
// smp_text_poke_sync_each_cpu in 7.3).
func TextPokeSync(c *sim.Counters, cpus int) {
	SyncRounds(c, 1, cpus)
}

// SyncRounds counts rounds text_poke_sync() calls on cpus online CPUs.
// Composed weights that already carry each round's fixed part (ftrace's
// text_poke_bp users) count only the per-CPU parts with SyncCPUs.
func SyncRounds(c *sim.Counters, rounds, cpus int) {
	if rounds <= 0 {
		return
	}
	c.Add(OpTextPokeSync, uint64(rounds))
	SyncCPUs(c, rounds, cpus)
}

// SyncCPUs counts the per-CPU parts of rounds syncs on cpus online CPUs:
// for every CPU but the sender, the sender's queueing and wait and the
// handler on that CPU.
func SyncCPUs(c *sim.Counters, rounds, cpus int) {
	OnEachCPU(c, rounds, cpus, OpTextPokeSyncCPU, OpSyncCoreHandler)
}

// OnEachCPU counts the per-CPU parts of calls on_each_cpu broadcasts on
// cpus online CPUs: for each CPU but the caller, sender (the caller's
// queueing of the call-function entry and its wait for the
// acknowledgement) and handler (that CPU's IPI handler). text_poke_sync
// and cpa_flush (package mm) are its users; each names its own ops.
//
// Models the per-target work of kernel/smp.c:smp_call_function_many_cond,
// which on_each_cpu runs for every online CPU but its own.
func OnEachCPU(c *sim.Counters, calls, cpus int, sender, handler sim.Op) {
	if calls <= 0 || cpus <= 1 {
		return
	}
	others := uint64(calls * (cpus - 1))
	c.Add(sender, others)
	c.Add(handler, others)
}
