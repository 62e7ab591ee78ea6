package ftrace

// Weights of the code-patching work, composed from the same documented
// costs the kprobes pipeline charges (kprobes/pipeline_ops.go): one
// text_poke ≈ 1500 cycles (two CR3 writes, PTE set/clear, INVLPG), one
// sync-core IPI round ≈ 2600 + 150 per CPU ≈ 3800 cycles on 8 CPUs. None
// can be measured here (ring 0); override them from a cost file measured
// with perf on your hardware.
const (
	// ftrace_verify_code (a 5-byte no-fault read) + text_poke_queue, and
	// the three text_poke writes text_poke_bp_batch makes per site (int3,
	// tail, head): 3 x 1500 + ~200, less text_poke_loc_init's
	// insn_decode_kernel, which was in the ~200 and is counted apart as
	// x86.decode.insn (90 cycles, x86/ops.go): 3 x 1500 + ~110.
	wReplaceSite = 4610
	rReplaceSite = "composed: 3 text_poke per site in text_poke_bp_batch (3 x 1500) + verify/queue (~200, less the 90-cycle insn_decode_kernel of text_poke_loc_init, counted as x86.decode.insn)"
	// text_poke_bp_batch's three sync-core IPI rounds: 3 x 3800.
	wPokeBatch = 11400
	rPokeBatch = "composed: 3 sync-core IPI rounds x (2600 + 8 CPUs x 150)"
	// ftrace_startup's constant part: add_ftrace_ops, creating the ops
	// trampoline (an executable allocation plus set_memory_*, like a
	// kprobe insn page ≈ 30k) and update_ftrace_function.
	wOpsRegister = 40000
	rOpsRegister = "composed: trampoline allocation + set_memory_ro/x (~30k, as a kprobe insn page) + list and function updates (~10k)"
	// ftrace_shutdown's constant part: remove_ftrace_ops and
	// update_ftrace_function (one text_poke_bp: 3 pokes + 3 syncs).
	wOpsUnregister = 16000
	rOpsUnregister = "composed: one text_poke_bp (3 x 1500 + 3 x 3800)"
	// FTRACE_UPDATE_TRACE_FUNC: two ftrace_update_ftrace_func (4
	// text_poke_bp in all) and an smp_call_function sync.
	wUpdateTraceFunc = 67000
	rUpdateTraceFunc = "composed: 4 text_poke_bp (4 x (3 x 1500 + 3 x 3800)) + one IPI round (3800)"
)
