package x86

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/sim"
	"golang.org/x/arch/x86/x86asm"
)

// hx parses spaced hex; t may be nil (package-level test data).
func hx(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// pads are appended after each test instruction so that a decoder that reads
// too far (x86asm's vzeroupper) is caught whatever follows.
var pads = []string{"", "90 90 90 90 90 90 90 90 90 90 90 90 90 90 90", "00 00 00 00 00 00 00", "cc cc cc cc", "c3"}

type decodeCase struct {
	hex      string
	len      int
	mnemonic string
	kind     Kind
	rel      int64 // only checked when hasRel
	hasRel   bool
	op       x86asm.Op // checked when nonzero
}

func runDecodeCases(t *testing.T, cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		for _, pad := range pads {
			code := append(hx(t, tc.hex), hx(t, pad)...)
			in, err := Decode(nil, code)
			if err != nil {
				t.Errorf("%s [+%s]: %v", tc.hex, pad, err)
				continue
			}
			if in.Len != tc.len || in.Mnemonic != tc.mnemonic || in.Kind != tc.kind {
				t.Errorf("%s [+%s]: got len %d %q %v, want len %d %q %v",
					tc.hex, pad, in.Len, in.Mnemonic, in.Kind, tc.len, tc.mnemonic, tc.kind)
			}
			if in.HasRel != tc.hasRel || (tc.hasRel && in.Rel != tc.rel) {
				t.Errorf("%s: rel %v %d, want %v %d", tc.hex, in.HasRel, in.Rel, tc.hasRel, tc.rel)
			}
			if tc.op != 0 && in.Op != tc.op {
				t.Errorf("%s: op %v, want %v", tc.hex, in.Op, tc.op)
			}
		}
	}
}

// The faults of x86asm v0.33.0 on real kernel text, each fixed here.
func TestDecodeX86asmFaults(t *testing.T) {
	runDecodeCases(t, []decodeCase{
		// 0f 01 system group: x86asm returns an error.
		{hex: "0f 01 ca", len: 3, mnemonic: "clac"},
		{hex: "0f 01 cb", len: 3, mnemonic: "stac"},
		{hex: "0f 01 cf", len: 3, mnemonic: "encls"},
		{hex: "0f 01 d7", len: 3, mnemonic: "enclu"},
		{hex: "0f 01 ee", len: 3, mnemonic: "rdpkru"},
		{hex: "0f 01 ef", len: 3, mnemonic: "wrpkru"},
		{hex: "0f 01 e8", len: 3, mnemonic: "serialize"},
		{hex: "0f 01 c1", len: 3, mnemonic: "vmcall"},
		{hex: "0f 01 c2", len: 3, mnemonic: "vmlaunch"},
		{hex: "0f 01 c3", len: 3, mnemonic: "vmresume"},
		{hex: "0f 01 c4", len: 3, mnemonic: "vmxoff"},
		{hex: "0f 01 d9", len: 3, mnemonic: "vmmcall"},
		{hex: "0f 01 d8", len: 3, mnemonic: "vmrun"},
		{hex: "0f 01 dc", len: 3, mnemonic: "stgi"},
		{hex: "0f 01 dd", len: 3, mnemonic: "clgi"},
		{hex: "0f 01 fa", len: 3, mnemonic: "monitorx"},
		{hex: "0f 01 fb", len: 3, mnemonic: "mwaitx"},
		{hex: "0f 01 fc", len: 3, mnemonic: "clzero"},
		// ... and those x86asm already handles stay x86asm's.
		{hex: "0f 01 f9", len: 3, mnemonic: "rdtscp", op: x86asm.RDTSCP},
		{hex: "0f 01 f8", len: 3, mnemonic: "swapgs", op: x86asm.SWAPGS},
		{hex: "0f 01 d0", len: 3, mnemonic: "xgetbv", op: x86asm.XGETBV},
		{hex: "0f 01 c8", len: 3, mnemonic: "monitor", op: x86asm.MONITOR},
		{hex: "0f 01 c9", len: 3, mnemonic: "mwait", op: x86asm.MWAIT},
		{hex: "0f 01 10", len: 3, mnemonic: "lgdt", op: x86asm.LGDT},
		// rdseed, rdpid (Grp9 /7 mod=3) and AMX tilerelease.
		{hex: "0f c7 f8", len: 3, mnemonic: "rdseed"},
		{hex: "48 0f c7 f8", len: 4, mnemonic: "rdseed"},
		{hex: "f3 0f c7 f8", len: 4, mnemonic: "rdpid"},
		{hex: "0f c7 f0", len: 3, mnemonic: "rdrand", op: x86asm.RDRAND},
		{hex: "c4 e2 78 49 c0", len: 5, mnemonic: "tilerelease"},
		{hex: "c4 e2 78 49 04 24", len: 6, mnemonic: "ldtilecfg"},    // (%rsp): SIB
		{hex: "c4 e2 79 49 44 24 40", len: 7, mnemonic: "sttilecfg"}, // 0x40(%rsp)
		{hex: "c4 e2 7b 49 c0", len: 5, mnemonic: "tilezero"},
		// x86asm returns a lone prefix (Op 0) for these.
		{hex: "f3 0f 1e fa", len: 4, mnemonic: "endbr64", kind: KindEndbr},
		{hex: "f3 0f 1e fb", len: 4, mnemonic: "endbr32", kind: KindEndbr},
		{hex: "f3 0f 1e c8", len: 4, mnemonic: "rdsspd"},
		{hex: "f3 48 0f 1e c8", len: 5, mnemonic: "rdsspq"},
		{hex: "f3 0f 01 d9", len: 4, mnemonic: "vmgexit"},
		{hex: "f2 0f 01 d9", len: 4, mnemonic: "vmgexit"},
		{hex: "f3 0f 01 fe", len: 4, mnemonic: "rmpadjust"},
		{hex: "f2 0f 01 fe", len: 4, mnemonic: "rmpupdate"},
		{hex: "f2 0f 01 ff", len: 4, mnemonic: "pvalidate"},
		{hex: "f3 0f 01 ff", len: 4, mnemonic: "psmash"},
		{hex: "f3 0f 01 ea", len: 4, mnemonic: "saveprevssp"},
		{hex: "f3 0f 01 e8", len: 4, mnemonic: "setssbsy"},
		{hex: "f3 0f 01 2c 24", len: 5, mnemonic: "rstorssp"},
		{hex: "66 0f ae f1", len: 4, mnemonic: "tpause"},
		{hex: "f2 0f ae f1", len: 4, mnemonic: "umwait"},
		{hex: "f3 0f ae f0", len: 4, mnemonic: "umonitor"},
		{hex: "f3 48 0f ae e8", len: 5, mnemonic: "incsspq"},
		{hex: "66 0f ae 37", len: 4, mnemonic: "clwb"},
		{hex: "66 0f ae 7c 24 08", len: 6, mnemonic: "clflushopt"},
		{hex: "66 0f 38 f8 02", len: 5, mnemonic: "movdir64b"},
		{hex: "66 0f 38 f8 84 24 00 01 00 00", len: 10, mnemonic: "movdir64b"}, // SIB + disp32
		{hex: "f2 0f 38 f8 02", len: 5, mnemonic: "enqcmd"},
		{hex: "f3 0f 38 f8 02", len: 5, mnemonic: "enqcmds"},
		{hex: "f3 0f 38 f8 45 00", len: 6, mnemonic: "enqcmds"}, // 0x0(%rbp): disp8
		{hex: "0f 38 f9 07", len: 4, mnemonic: "movdiri"},
		{hex: "66 48 0f 38 f6 df", len: 6, mnemonic: "adcx"},
		{hex: "f3 4c 0f 38 f6 80 b0 00 00 00", len: 10, mnemonic: "adox"},
		// x86asm sizes vzeroupper/vzeroall from the following byte.
		{hex: "c5 f8 77", len: 3, mnemonic: "vzeroupper", op: x86asm.VZEROUPPER},
		{hex: "c5 fc 77", len: 3, mnemonic: "vzeroall", op: x86asm.VZEROALL},
		{hex: "c4 e1 78 77", len: 4, mnemonic: "vzeroupper", op: x86asm.VZEROUPPER},
		// Other forms x86asm rejects but kernel text can hold.
		{hex: "0f 1f c0", len: 3, mnemonic: "nop", kind: KindNop, op: x86asm.NOP},
		{hex: "0f 1f f7", len: 3, mnemonic: "nop", kind: KindNop},
		{hex: "0f 0d 08", len: 3, mnemonic: "prefetchw", op: x86asm.PREFETCHW},
		{hex: "0f 78 c8", len: 3, mnemonic: "vmread"},
		{hex: "0f 79 04 24", len: 4, mnemonic: "vmwrite"},
		{hex: "66 0f 38 81 04 24", len: 6, mnemonic: "invvpid"}, // kvm-intel.ko
		{hex: "66 0f 38 80 04 24", len: 6, mnemonic: "invept"},
		{hex: "66 0f 38 82 0c 24", len: 6, mnemonic: "invpcid"},
		{hex: "0f 1c 00", len: 3, mnemonic: "cldemote"},
		{hex: "48 0f c7 5c 24 08", len: 6, mnemonic: "xrstors64"},
	})
}

// Behaviours of the kernel's decoder (insn.c + x86-opcode-map.txt) that
// kpsim follows.
func TestDecodeKernelRules(t *testing.T) {
	runDecodeCases(t, []decodeCase{
		// UD0 has no operands in the kernel's map: 2 bytes, not 3+.
		{hex: "0f ff", len: 2, mnemonic: "ud0", kind: KindUD, op: x86asm.UD0},
		{hex: "0f b9 00", len: 3, mnemonic: "ud1", kind: KindUD},
		// (i64) one-byte opcodes decode with 32-bit operand sizes.
		{hex: "ce", len: 1, mnemonic: "into", kind: KindInt},
		{hex: "ea 01 02 03 04 05 06", len: 7, mnemonic: "ljmp", kind: KindJmpIndirect},
		{hex: "66 ea 01 02 03 04", len: 6, mnemonic: "ljmp", kind: KindJmpIndirect},
		{hex: "9a 01 02 03 04 05 06", len: 7, mnemonic: "lcall", kind: KindCallIndirect},
		{hex: "d4 0a", len: 2, mnemonic: "aam"},
		{hex: "06", len: 1, mnemonic: "push"},
		{hex: "82 c0 01", len: 3, mnemonic: "add"},
		{hex: "f7 4c 24 08 01 00 00 00", len: 8, mnemonic: "test"}, // Grp3 /1 alias
		// Near branches are (f64): a 66 prefix does not shrink rel32.
		{hex: "66 e9 10 00 00 00", len: 6, mnemonic: "jmp", kind: KindJmp, hasRel: true, rel: 16},
		{hex: "66 e8 10 00 00 00", len: 6, mnemonic: "call", kind: KindCall, hasRel: true, rel: 16},
		// Xen emulate prefix: "ud2; .ascii "xen"; cpuid" is one 7-byte insn.
		{hex: "0f 0b 78 65 6e 0f a2", len: 7, mnemonic: "cpuid", op: x86asm.CPUID},
		{hex: "0f 0b 6b 76 6d 0f 01 c1", len: 8, mnemonic: "vmcall"},
	})
	in, err := Decode(nil, hx(t, "0f 0b 78 65 6e 0f a2"))
	if err != nil || in.EmulatePrefixLen != 5 || in.Opcode[0] != 0x0f || in.Opcode[1] != 0xa2 {
		t.Errorf("xen prefix: %+v %v", in, err)
	}
	// A plain ud2 is not swallowed by the emulate-prefix check.
	in, err = Decode(nil, hx(t, "0f 0b 78 65"))
	if err != nil || in.Len != 2 || in.Kind != KindUD {
		t.Errorf("ud2 before short tail: %+v %v", in, err)
	}
}

// What the synthetic image generator emits, and common compiler output.
func TestDecodeOrdinary(t *testing.T) {
	runDecodeCases(t, []decodeCase{
		{hex: "55", len: 1, mnemonic: "push"},
		{hex: "41 57", len: 2, mnemonic: "push"},
		{hex: "48 89 e5", len: 3, mnemonic: "mov"},
		{hex: "5d", len: 1, mnemonic: "pop"},
		{hex: "48 83 ec 20", len: 4, mnemonic: "sub"},
		{hex: "48 81 ec 00 01 00 00", len: 7, mnemonic: "sub"},
		{hex: "31 c0", len: 2, mnemonic: "xor"},
		{hex: "48 85 ff", len: 3, mnemonic: "test"},
		{hex: "f6 47 10 01", len: 4, mnemonic: "test"},
		{hex: "f7 c7 00 10 00 00", len: 6, mnemonic: "test"},
		{hex: "66 f7 c7 00 10", len: 5, mnemonic: "test"},                // Iz is 2 bytes with 66
		{hex: "8b 47 08", len: 3, mnemonic: "mov"},                       // disp8
		{hex: "48 8b 87 00 01 00 00", len: 7, mnemonic: "mov"},           // disp32
		{hex: "48 8b 44 24 08", len: 5, mnemonic: "mov"},                 // SIB + disp8
		{hex: "48 8b 04 c5 00 00 00 00", len: 8, mnemonic: "mov"},        // SIB, no base, disp32
		{hex: "48 8b 05 10 20 30 00", len: 7, mnemonic: "mov"},           // RIP-relative
		{hex: "48 8d 3d f9 ff ff ff", len: 7, mnemonic: "lea"},           // RIP-relative lea
		{hex: "65 48 8b 04 25 28 00 00 00", len: 9, mnemonic: "mov"},     // %gs:0x28
		{hex: "65 48 8b 05 00 00 00 00", len: 8, mnemonic: "mov"},        // %gs:rip
		{hex: "c7 47 08 01 00 00 00", len: 7, mnemonic: "mov"},           // mov imm32 to mem
		{hex: "48 b8 88 77 66 55 44 33 22 11", len: 10, mnemonic: "mov"}, // movabs imm64
		{hex: "48 a1 88 77 66 55 44 33 22 11", len: 10, mnemonic: "mov"}, // moffs64
		{hex: "f0 48 0f b1 17", len: 5, mnemonic: "cmpxchg"},             // lock cmpxchg
		{hex: "f0 ff 07", len: 3, mnemonic: "inc"},
		{hex: "0f b6 47 01", len: 4, mnemonic: "movzx"},
		{hex: "c8 10 00 00", len: 4, mnemonic: "enter"},
		{hex: "c9", len: 1, mnemonic: "leave"},
		{hex: "90", len: 1, mnemonic: "nop", kind: KindNop},
		{hex: "66 90", len: 2, mnemonic: "nop", kind: KindNop},
		{hex: "0f 1f 00", len: 3, mnemonic: "nop", kind: KindNop},
		{hex: "0f 1f 40 00", len: 4, mnemonic: "nop", kind: KindNop},
		{hex: "0f 1f 44 00 00", len: 5, mnemonic: "nop", kind: KindNop},
		{hex: "66 0f 1f 44 00 00", len: 6, mnemonic: "nop", kind: KindNop},
		{hex: "0f 1f 80 00 00 00 00", len: 7, mnemonic: "nop", kind: KindNop},
		{hex: "0f 1f 84 00 00 00 00 00", len: 8, mnemonic: "nop", kind: KindNop},
		{hex: "66 0f 1f 00", len: 4, mnemonic: "nop", kind: KindNop}, // sealed ENDBR poison
		{hex: "66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00", len: 15, mnemonic: "nop", kind: KindNop},
		{hex: "f3 90", len: 2, mnemonic: "pause"},
		{hex: "0f ae e8", len: 3, mnemonic: "lfence"},
		{hex: "0f ae f0", len: 3, mnemonic: "mfence"},
		{hex: "0f 0b", len: 2, mnemonic: "ud2", kind: KindUD},
		{hex: "cc", len: 1, mnemonic: "int3", kind: KindInt3},
		{hex: "cd 80", len: 2, mnemonic: "int", kind: KindInt},
		{hex: "f1", len: 1, mnemonic: "icebp", kind: KindInt},
		{hex: "c3", len: 1, mnemonic: "ret", kind: KindRet},
		{hex: "c2 08 00", len: 3, mnemonic: "ret", kind: KindRet},
		{hex: "cb", len: 1, mnemonic: "lret", kind: KindRet},
		{hex: "ca 08 00", len: 3, mnemonic: "lret", kind: KindRet},
		{hex: "eb 10", len: 2, mnemonic: "jmp", kind: KindJmp, hasRel: true, rel: 16},
		{hex: "eb fe", len: 2, mnemonic: "jmp", kind: KindJmp, hasRel: true, rel: -2},
		{hex: "e9 00 01 00 00", len: 5, mnemonic: "jmp", kind: KindJmp, hasRel: true, rel: 256},
		{hex: "e9 fb ff ff ff", len: 5, mnemonic: "jmp", kind: KindJmp, hasRel: true, rel: -5},
		{hex: "74 05", len: 2, mnemonic: "je", kind: KindJcc, hasRel: true, rel: 5},
		{hex: "7f 80", len: 2, mnemonic: "jg", kind: KindJcc, hasRel: true, rel: -128},
		{hex: "0f 84 00 10 00 00", len: 6, mnemonic: "je", kind: KindJcc, hasRel: true, rel: 4096},
		{hex: "0f 85 f0 ff ff ff", len: 6, mnemonic: "jne", kind: KindJcc, hasRel: true, rel: -16},
		{hex: "e2 fe", len: 2, mnemonic: "loop", kind: KindLoop, hasRel: true, rel: -2},
		{hex: "e3 02", len: 2, mnemonic: "jrcxz", kind: KindLoop, hasRel: true, rel: 2},
		{hex: "e8 00 00 00 00", len: 5, mnemonic: "call", kind: KindCall, hasRel: true, rel: 0},
		{hex: "e8 7b 5a ff ff", len: 5, mnemonic: "call", kind: KindCall, hasRel: true, rel: -42373},
		{hex: "2e e8 00 00 00 00", len: 6, mnemonic: "call", kind: KindCall, hasRel: true, rel: 0},
		{hex: "ff e0", len: 2, mnemonic: "jmp", kind: KindJmpIndirect},                // jmp *%rax
		{hex: "41 ff e3", len: 3, mnemonic: "jmp", kind: KindJmpIndirect},             // jmp *%r11
		{hex: "ff 25 00 10 00 00", len: 6, mnemonic: "jmp", kind: KindJmpIndirect},    // jmp *rip
		{hex: "ff 24 c5 00 00 00 00", len: 7, mnemonic: "jmp", kind: KindJmpIndirect}, // jump table
		{hex: "ff 2c 24", len: 3, mnemonic: "ljmp", kind: KindJmpIndirect},            // ff /5
		{hex: "ff d0", len: 2, mnemonic: "call", kind: KindCallIndirect},
		{hex: "ff 15 00 10 00 00", len: 6, mnemonic: "call", kind: KindCallIndirect},
		{hex: "ff 1c 24", len: 3, mnemonic: "lcall", kind: KindCallIndirect}, // ff /3
		{hex: "c7 f8 10 00 00 00", len: 6, mnemonic: "xbegin", hasRel: true, rel: 16},
		{hex: "c5 f8 57 c0", len: 4, mnemonic: "vxorps"},
		{hex: "c5 fd 7f 85 00 01 00 00", len: 8, mnemonic: "vmovdqa"},
		{hex: "c4 e3 7d 18 c1 01", len: 6, mnemonic: "vinsertf128"},
		{hex: "62 f1 fd 48 7f 00", len: 6, mnemonic: "vmovdqa64"},
		{hex: "d9 c9", len: 2, mnemonic: "fxch"},
		{hex: "db e3", len: 2, mnemonic: "fninit"},
		// retpoline thunk body (__x86_indirect_thunk_rax)
		{hex: "e8 01 00 00 00", len: 5, mnemonic: "call", kind: KindCall, hasRel: true, rel: 1},
		{hex: "48 89 04 24", len: 4, mnemonic: "mov"},
	})
}

func TestDecodeFields(t *testing.T) {
	in, err := Decode(nil, hx(t, "65 48 8b 04 25 28 00 00 00"))
	if err != nil {
		t.Fatal(err)
	}
	if !in.HasPrefix(0x65) || in.REX != 0x48 || in.OpcodeLen != 1 || in.Opcode[0] != 0x8b ||
		!in.HasModRM || in.ModRM != 0x04 || !in.HasSIB || in.SIB != 0x25 || in.DispLen != 4 || in.Disp != 0x28 {
		t.Errorf("gs mov fields: %+v", in)
	}
	in, _ = Decode(nil, hx(t, "66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00"))
	if in.NPrefixes != 2 || in.PrefixLen != 7 || in.LastPrefix != 0x2e || in.Map != 1 || in.Opcode[1] != 0x1f {
		t.Errorf("long nop prefixes: %+v", in)
	}
	in, _ = Decode(nil, hx(t, "48 8b 05 10 20 30 00"))
	if !in.RIPRelative() || in.Disp != 0x302010 {
		t.Errorf("rip-relative: %+v", in)
	}
	in, _ = Decode(nil, hx(t, "f3 0f 38 f8 02"))
	if in.OpcodeLen != 3 || in.Opcode != [3]byte{0x0f, 0x38, 0xf8} || in.Map != 2 || in.ModRMReg() != 0 {
		t.Errorf("enqcmds opcode: %+v", in)
	}
	in, _ = Decode(nil, hx(t, "c5 f9 72 f0 02")) // vpslld $2: one VEX opcode byte 0x72
	if in.VEXLen != 2 || in.OpcodeLen != 1 || in.Opcode[0] != 0x72 || in.Imm != 2 || in.Kind != KindOther {
		t.Errorf("vex fields: %+v", in)
	}
	in, _ = Decode(nil, hx(t, "66 c7 f8 10 00"))
	if in.Len != 5 || in.Rel != 16 || in.OpndBytes != 2 {
		t.Errorf("xbegin rel16: %+v", in)
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		addr uint64
		want uint64
	}{
		{"eb 10", 0xffffffff81000000, 0xffffffff81000012},
		{"eb fe", 0xffffffff81000000, 0xffffffff81000000},
		{"e9 fb ff ff ff", 0xffffffff81000100, 0xffffffff81000100},
		{"e8 00 00 00 00", 0xffffffff81000000, 0xffffffff81000005},
		{"0f 85 f0 ff ff ff", 0xffffffff81000100, 0xffffffff810000f6},
		{"e8 00 00 00 80", 0xffffffff81000000, 0xffffffff81000005 - 0x80000000},
	} {
		in, err := Decode(nil, hx(t, tc.hex))
		if err != nil {
			t.Fatal(err)
		}
		if got := in.Target(tc.addr); got != tc.want {
			t.Errorf("%s at %#x: target %#x, want %#x", tc.hex, tc.addr, got, tc.want)
		}
	}
	in, _ := Decode(nil, hx(t, "c3"))
	if in.Target(0x1000) != 0 {
		t.Error("ret has a target")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want error
	}{
		{"", ErrTruncated},
		{"e8 00 00", ErrTruncated},
		{"0f", ErrTruncated},
		{"66 66", ErrTruncated},
		{"48 8b 84 24 00 01", ErrTruncated},
		{"c5 f8", ErrTruncated},
		// 16 prefix bytes: longer than MAX_INSN_SIZE.
		{"66 66 66 66 66 66 66 66 66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00", ErrTruncated},
		{"f0 f2 f3 2e 3e 90", ErrInvalid},       // 5 distinct legacy prefixes
		{"48 ea 01 02 03 04 05 06", ErrInvalid}, // ptr16:64 does not exist
		{"0f 04", ErrInvalid},
		{"0f 19 c0", ErrInvalid},          // kernel: 2 bytes, hardware: 3; refuse
		{"c4 e3 e1 6b d9 40", ErrInvalid}, // FMA4: not in the kernel's map
		{"0f 38 ff c0", ErrInvalid},
	} {
		_, err := Decode(nil, hx(t, tc.hex))
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: err %v, want %v", tc.hex, err, tc.want)
		}
	}
}

func TestDecodeCounts(t *testing.T) {
	c := sim.NewCounters(false)
	Decode(c, hx(t, "90"))
	Decode(c, hx(t, "0f")) // failures are counted too
	if n := c.Total(OpDecode); n != 2 {
		t.Errorf("decode count %d, want 2", n)
	}
	if n := c.Sum(); n != 2 {
		t.Errorf("total count %d, want 2", n)
	}
}

func TestKindString(t *testing.T) {
	if KindJmpIndirect.String() != "jmp-indirect" || Kind(200).String() != "Kind(200)" {
		t.Error("Kind.String")
	}
}
