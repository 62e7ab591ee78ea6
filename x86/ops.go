package x86

import "github.com/kpsim/kpsim/sim"

// Counted operations. The weights are Go micro-benchmark measurements on
// kpsim's development machine (see bench_test.go and the rationale strings),
// used as proxies for the kernel work; they are not fitted to anything.
var (
	// OpDecode is one insn_decode_kernel() call.
	OpDecode = sim.NewOp("x86.decode.insn", decodeCycles, decodeRationale,
		"one insn_decode_kernel() call (arch/x86/lib/insn.c:insn_decode)")
	// OpJumpSizeOpcode is one byte-compare sizing of a jump-label site (P3).
	OpJumpSizeOpcode = sim.NewOp("x86.jump_size.opcode", jumpSizeCycles, jumpSizeRationale,
		"one arch_jump_entry_size() from opcode bytes (P3): eb/e9 test, then memcmp against x86_nops[2] / x86_nops[5]")
)

const (
	decodeCycles    = 90
	decodeRationale = "BenchmarkKernelDecode: 33-37 ns/insn (3 runs) for kpsim's Go model of insn.c's " +
		"table-driven length decode over a 34-insn kernel-like mix, on a 2-core AMD EPYC at ~2.6 GHz = ~86-96 cycles. " +
		"Proxy: insn_decode() does the same per-byte attribute lookups and field extraction in C (plus a ~100-byte " +
		"struct insn memset); the full Decode with x86asm naming (~320-350 ns) is simulator work, not kernel work"

	jumpSizeCycles    = 12
	jumpSizeRationale = "BenchmarkJumpEntrySize: 4.0-5.1 ns/op (3 runs) on a 2-core AMD EPYC at ~2.6 GHz = ~10-13 cycles " +
		"for the opcode test plus at most two short byte compares (and the counter increment)"
)
