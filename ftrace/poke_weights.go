package ftrace

import (
	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

// Weights of the code-patching work, composed from the costs package
// alternative derives and sources (alternative/textpoke.go): one text_poke
// (alternative.TextPokeCycles), one sync-core IPI round's fixed part for
// the sender (alternative.SyncCycles). The per-CPU parts of each round
// (text_poke.sync.cpu on the sender, text_poke.sync.handler on every other
// CPU) are counted beside these ops with alternative.SyncCPUs over
// Ftrace.CPUs, so --cpus moves them. None can be measured here (ring 0);
// override them from a cost file measured with perf on your hardware.
const (
	// ftrace_verify_code (a 5-byte no-fault read) + text_poke_queue, and
	// the three text_poke writes text_poke_bp_batch makes per site (int3,
	// tail, head), less text_poke_loc_init's insn_decode_kernel, which
	// was in the ~200 and is counted apart as x86.decode.insn (90 cycles,
	// x86/ops.go).
	wReplaceSite = 3*alternative.TextPokeCycles + 110
	rReplaceSite = "composed: 3 text_poke per site in text_poke_bp_batch (3 x 1300) + verify/queue (~200, less the 90-cycle insn_decode_kernel of text_poke_loc_init, counted as x86.decode.insn)"
	// text_poke_bp_batch's three sync-core IPI rounds, their fixed part.
	wPokeBatch = pokeBatchSyncs * alternative.SyncCycles
	rPokeBatch = "composed: 3 sync-core IPI rounds x 5000 (each round's per-CPU parts are counted as text_poke.sync.cpu and text_poke.sync.handler)"
	// ftrace_startup's constant part: add_ftrace_ops and the ops
	// trampoline: 6.1's create_trampoline allocates it with module_alloc
	// and makes it set_memory_ro + set_memory_x, as 6.1's kprobe insn
	// page (arch/x86/kernel/ftrace.c); each set_memory_* ends in
	// cpa_flush, one on_each_cpu TLB-flush broadcast, whose per-CPU parts
	// are counted apart (mm.SetMemoryCalls). 7.3 makes one set_memory_rox
	// call.
	wOpsRegister      = mm.VmallocPageCycles + 2*mm.SetMemoryCycles + 500
	rOpsRegister      = "composed: module_alloc of the trampoline (~1500: the alloc share of a 0.97 µs vmalloc+vfree pair, Rezki's test_vmalloc) + set_memory_ro and set_memory_x (each a CPA walk ~400, a cpa_flush broadcast's fixed part 5000 and INVLPG ~260; the per-CPU parts counted as set_memory.flush.*) + add_ftrace_ops (~500)"
	rOpsRegisterRange = "7000 (fast CPA and broadcast) to 50000 (a large-page split in CPA, ~8000 each, and idle targets' wake-up)"
	// ftrace_shutdown's constant part: remove_ftrace_ops and
	// update_ftrace_function (one text_poke_bp: 3 pokes + 3 syncs).
	wOpsUnregister = 3*alternative.TextPokeCycles + opsUnregisterSyncs*alternative.SyncCycles
	rOpsUnregister = "composed: one text_poke_bp (3 x 1300 + 3 sync rounds x 5000; their per-CPU parts are counted as text_poke.sync.cpu and text_poke.sync.handler)"
	// FTRACE_UPDATE_TRACE_FUNC: two ftrace_update_ftrace_func (4
	// text_poke_bp in all) and an smp_call_function sync.
	wUpdateTraceFunc = 4*3*alternative.TextPokeCycles + updateTraceFuncSyncs*alternative.SyncCycles
	rUpdateTraceFunc = "composed: 4 text_poke_bp (4 x (3 x 1300 + 3 sync rounds x 5000)) + one IPI round (5000); the 13 rounds' per-CPU parts are counted as text_poke.sync.cpu and text_poke.sync.handler"
	// register_ftrace_function_nolock(direct_ops)'s constant part:
	// add_ftrace_ops and __register_ftrace_function's bookkeeping. No
	// trampoline is allocated (direct_ops sets ops->trampoline =
	// FTRACE_REGS_ADDR, so arch_ftrace_update_trampoline returns at once)
	// and the trace function's patching is ftrace.update_trace_func.
	wDirectRegister = 500
	rDirectRegister = "hardware fact: add_ftrace_ops under ftrace_lock (an uncontended mutex, two RCU list pointer stores, the ops flags) and ftrace_update_trampoline's early return, ~500 cycles; no trampoline allocation, no patching (counted apart)"
)

// Sync rounds behind the composed ops: text_poke_bp_batch makes three
// (after the int3s, the tails and the heads); ftrace_shutdown's
// update_ftrace_function one text_poke_bp; FTRACE_UPDATE_TRACE_FUNC four
// text_poke_bp and one smp_call_function(ftrace_sync_ipi).
const (
	pokeBatchSyncs       = 3
	opsUnregisterSyncs   = 3
	updateTraceFuncSyncs = 4*3 + 1
)

// rComposedRange is the source of the composed ops' ranges.
const rComposedRange = "the composition's parts at the ends of their documented ranges: text_poke 800-2200, a sync round's fixed part 3000-10000 (alternative/textpoke.go)"

// span is a composed weight's documented range.
type span struct{ lo, hi float64 }

// pokes is the range of n text_pokes plus a fixed extra.
func pokes(n, extra float64) span {
	return span{n*alternative.TextPokeCyclesLo + extra, n*alternative.TextPokeCyclesHi + extra}
}

// syncs is the range of n sync rounds' fixed parts.
func syncs(n float64) span {
	return span{n * alternative.SyncCyclesLo, n * alternative.SyncCyclesHi}
}

func (a span) plus(b span) span { return span{a.lo + b.lo, a.hi + b.hi} }

// of declares the range on op.
func (a span) of(op sim.Op) sim.Op { return op.Range(a.lo, a.hi, rComposedRange) }
