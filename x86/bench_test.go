package x86

import (
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// benchText is a kernel-like instruction mix: IBT entry, fentry NOP5,
// prologue, loads/stores with disp8/disp32/SIB, RIP-relative and %gs
// accesses, ALU, compare-and-branch (rel8 and rel32), a direct call, a
// jump-label NOP2, an indirect call via a retpoline-style thunk, epilogue,
// return thunk jump and int3 padding. 34 instructions, 128 bytes.
var benchText = func() []byte {
	var b []byte
	for _, s := range []string{
		"f3 0f 1e fa",                      // endbr64
		"0f 1f 44 00 00",                   // __fentry__ site (NOPed)
		"55",                               // push %rbp
		"48 89 e5",                         // mov %rsp,%rbp
		"41 57",                            // push %r15
		"41 56",                            // push %r14
		"53",                               // push %rbx
		"48 83 ec 18",                      // sub $0x18,%rsp
		"48 89 fb",                         // mov %rdi,%rbx
		"65 48 8b 04 25 28 00 00 00",       // mov %gs:0x28,%rax
		"48 89 44 24 10",                   // mov %rax,0x10(%rsp)
		"31 c0",                            // xor %eax,%eax
		"48 8b 47 08",                      // mov 0x8(%rdi),%rax
		"48 85 c0",                         // test %rax,%rax
		"74 2a",                            // je rel8
		"8b 88 a0 01 00 00",                // mov 0x1a0(%rax),%ecx
		"66 90",                            // jump-label NOP2
		"48 8b 15 10 20 30 00",             // mov rip(%rip),%rdx
		"48 8d 74 24 08",                   // lea 0x8(%rsp),%rsi
		"e8 7b 5a ff ff",                   // call rel32
		"85 c0",                            // test %eax,%eax
		"0f 85 f0 00 00 00",                // jne rel32
		"48 8b 04 c5 00 00 00 00",          // mov table(,%rax,8),%rax
		"e8 00 10 00 00",                   // call __x86_indirect_thunk_rax
		"83 7b 10 02",                      // cmpl $0x2,0x10(%rbx)
		"0f 94 c0",                         // sete %al
		"48 83 c4 18",                      // add $0x18,%rsp
		"5b",                               // pop %rbx
		"41 5e",                            // pop %r14
		"41 5f",                            // pop %r15
		"5d",                               // pop %rbp
		"e9 00 20 00 00",                   // jmp __x86_return_thunk
		"cc",                               // int3 (SLS padding)
		"66 66 2e 0f 1f 84 00 00 00 00 00", // padding NOP
	} {
		b = append(b, hx(nil, s)...)
	}
	return b
}()

func walk(b *testing.B, f func([]byte) int) {
	insns := 0
	for i := 0; i < b.N; i++ {
		for off := 0; off < len(benchText); {
			off += f(benchText[off:])
			insns++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(insns), "ns/insn")
}

// BenchmarkDecode: the full Decode (kernel length model + x86asm naming).
func BenchmarkDecode(b *testing.B) {
	c := sim.NewCounters(false)
	walk(b, func(code []byte) int {
		in, err := Decode(c, code)
		if err != nil {
			b.Fatal(err)
		}
		return in.Len
	})
}

// BenchmarkKernelDecode: only the model of insn.c's table-driven length
// decode, the work insn_decode_kernel() does. This is the OpDecode proxy.
func BenchmarkKernelDecode(b *testing.B) {
	walk(b, func(code []byte) int {
		l, err := kernelDecode(code)
		if err != nil {
			b.Fatal(err)
		}
		return l.length
	})
}

var jumpSites = [][]byte{hx(nil, "eb 10"), hx(nil, "e9 00 01 00 00"), NOP2[:], NOP5[:]}

func BenchmarkJumpEntrySize(b *testing.B) {
	c := sim.NewCounters(false)
	for i := 0; i < b.N; i++ {
		if _, err := JumpEntrySize(c, jumpSites[i&3]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJumpEntrySizeDecode(b *testing.B) {
	c := sim.NewCounters(false)
	for i := 0; i < b.N; i++ {
		if _, err := JumpEntrySizeDecode(c, jumpSites[i&3]); err != nil {
			b.Fatal(err)
		}
	}
}
