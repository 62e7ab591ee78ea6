package kallsyms

// Weights of walk.go's ops, in cycles. The seq_file weights come from a C
// micro-benchmark of the same library calls (glibc 2.36, gcc -O2, listed in
// the bpf branch notes) measured on this project's build machine and
// converted at the reference 2.6 GHz, like the Go benchmarks elsewhere:
// ns × 2.6 = cycles. The kernel's vsnprintf is a close relative of glibc's
// (same format walk, number() for %px), so snprintf of the same line
// stands in for seq_printf.
const (
	wModIterStep = 5
	rModIterStep = "hardware fact: one list_head next load plus num_symtab compare on an L1/L2-hot module struct (~5 cycles L1 load-to-use)"

	wSymType = 4
	rSymType = "hardware fact: header byte load + token_index load + token byte load, all L1 after the record was located (~4 cycles)"

	wShowLine = 253
	rShowLine = "C benchmark snprintf(\"%016lx %c %s\\n\") of a 8-31 char name: 97 ns ≈ 253 cycles"

	wSeqRead = 303
	rSeqRead = "C benchmark read(2) of 4 KiB from /dev/zero (syscall + 4 KiB copy_to_user): 117 ns ≈ 303 cycles"
)
