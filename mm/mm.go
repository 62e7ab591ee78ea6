// Package mm models the executable-memory work kprobes, ftrace and BPF
// pay when they need new kernel text: a page from vmalloc (mm/vmalloc.c;
// module_alloc in 6.1, execmem_alloc in 6.12 and 7.3) and the page
// attribute changes that make it read-only and executable
// (arch/x86/mm/pat/set_memory.c).
//
// # What Linux does
//
// set_memory_ro, set_memory_x and set_memory_rox walk the page tables of
// the range (change_page_attr_set_clr: __change_page_attr per page, and its
// direct-map alias), and when a PTE changed, cpa_flush drops the stale
// translations from every CPU: for at most tlb_single_page_flush_ceiling
// (33) pages it runs on_each_cpu(__cpa_flush_tlb), one call-function IPI
// to every other online CPU, each flushing the pages with INVLPG;
// otherwise flush_tlb_all. So each call costs the caller a walk and a
// broadcast's fixed part, plus per other CPU the queueing and the wait,
// and costs each other CPU an interrupt. 6.1's alloc_insn_page and
// create_trampoline make two calls (set_memory_ro, set_memory_x); 6.12's
// and 7.3's one (set_memory_rox).
//
// The callers keep their composed weights (an insn page, a trampoline, a
// prog pack) for the parts that do not depend on the machine, built from
// the constants here, and count each call's per-CPU parts with
// SetMemoryCalls over the online CPUs, so --cpus moves them.
package mm

import (
	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/sim"
)

// Weights (docs/cost-model.md gives every part's source).
const (
	// VmallocPageCycles is the allocation's share (~60%) of a vmalloc +
	// vfree pair of one page: 0.97 µs a pair ≈ 2500 cycles (Uladzislau
	// Rezki's test_vmalloc fix_size_alloc_test, LKML 2019-07-01).
	VmallocPageCycles = 1500
	// SetMemoryCycles is one set_memory_* call's part on the caller that
	// does not depend on the CPU count: the CPA walk of a few pages and
	// their alias (~400, an estimate: a 4-5 level walk, cpa_lock, the PTE
	// store), the broadcast's fixed part (the sender side of an
	// on_each_cpu, as alternative.SyncCycles) and the local INVLPG
	// (~100 ns, arch/x86/mm/tlb.c).
	SetMemoryCycles = cpaWalk + alternative.SyncCycles + invlpg

	cpaWalk = 400
	invlpg  = 260
	// The flush handler on another CPU: interrupt entry/exit, the
	// call-function queue and EOI (~1000, as text_poke.sync.handler's)
	// and one INVLPG per page (one page here).
	wFlushHandler      = 1000 + invlpg
	rFlushHandler      = "derived: interrupt entry/exit, the call-function queue and the x2APIC EOI (~1000, as text_poke.sync.handler's) + __cpa_flush_tlb's INVLPG of the page (~100 ns ≈ 260: arch/x86/mm/tlb.c's tlb_single_page_flush_ceiling comment)"
	rFlushHandlerRange = "700 (entry/exit 600, INVLPG 100) to 2400 (entry/exit 2000 with the entry mitigations, INVLPG 400)"
	rFlushCPU          = "as text_poke.sync.cpu: per target CPU, the call-function entry queued (csd_lock + llist_add on a remote line) and its acknowledgement collected (csd_lock_wait): two core-to-core line transfers (kernel/smp.c:smp_call_function_many_cond)"
	rFlushCPURange     = "two core-to-core line transfers at 40-150 ns: 200-800 cycles"
)

var (
	// OpFlushCPU is the caller's per-CPU part of one set_memory_* call's
	// TLB-flush broadcast.
	OpFlushCPU = sim.NewOp("set_memory.flush.cpu", alternative.SyncCPUCycles, rFlushCPU,
		"one other CPU in a set_memory_* call's cpa_flush broadcast: the caller's queueing and wait").
		Range(200, 800, rFlushCPURange)
	// OpFlushHandler is another CPU's handling of that broadcast.
	OpFlushHandler = sim.NewOp("set_memory.flush.handler", wFlushHandler, rFlushHandler,
		"one other CPU's IPI handler for a set_memory_* call's cpa_flush: interrupt entry/exit, the call-function queue, __cpa_flush_tlb").
		Range(700, 2400, rFlushHandlerRange).
		In(sim.OtherCPU, "arch/x86/mm/pat/set_memory.c:cpa_flush: on_each_cpu(__cpa_flush_tlb) runs the flush on every other online CPU from the call-function IPI")
)

// SetMemoryCalls counts the per-CPU parts of calls set_memory_* calls on a
// machine with cpus online CPUs: for every CPU but the caller, the
// caller's queueing and wait and that CPU's flush handler. The calls'
// other parts are in the caller's composed weight (SetMemoryCycles each).
//
// Models the on_each_cpu of arch/x86/mm/pat/set_memory.c:cpa_flush (6.1,
// 6.12, 7.3) for a range under tlb_single_page_flush_ceiling.
func SetMemoryCalls(c *sim.Counters, calls, cpus int) {
	alternative.OnEachCPU(c, calls, cpus, OpFlushCPU, OpFlushHandler)
}
