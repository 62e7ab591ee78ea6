package x86

import (
	"errors"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

func mustDecode(t *testing.T, s string) Insn {
	t.Helper()
	in, err := Decode(nil, hx(t, s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return in
}

func TestIsEndbr(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want bool
	}{
		{"f3 0f 1e fa", true},
		{"f3 0f 1e fb", true},
		{"66 0f 1f 00", true}, // sealed (poisoned) ENDBR
		{"f3 0f 1e fa 55", true},
		{"0f 1f 40 00", false}, // NOP4 is not the poison
		{"f3 0f 1e", false},
		{"f3 0f 1e f9", false},
		{"e8 00 00 00 00", false},
	} {
		if got := IsEndbr(hx(t, tc.hex)); got != tc.want {
			t.Errorf("IsEndbr(%s) = %v", tc.hex, got)
		}
	}
	if !IsEndbr(ENDBR64[:]) || !IsEndbr(ENDBR32[:]) || !IsEndbr(EndbrPoison[:]) {
		t.Error("constants")
	}
}

// TestDecoderIsEndbr: 7.3's gen_endbr_poison is "nopl -42(%rax)"
// (0xd6401f0f); 6.1.192 and 6.12.117 poison with "osp nopl (%rax)"
// (0x001f0f66). Each generation's is_endbr knows only its own.
func TestDecoderIsEndbr(t *testing.T) {
	for _, tc := range []struct {
		hex            string
		g61, g612, g73 bool
	}{
		{"f3 0f 1e fa", true, true, true},
		{"f3 0f 1e fb", true, true, true},
		{"66 0f 1f 00", true, true, false},
		{"0f 1f 40 d6", false, false, true},
		{"0f 1f 40 00", false, false, false},
		{"0f 1f 40", false, false, false},
	} {
		for _, g := range []struct {
			gen  image.Generation
			want bool
		}{{image.Gen61, tc.g61}, {image.Gen612, tc.g612}, {image.Gen73, tc.g73}, {image.GenUnknown, tc.g61}} {
			if got := For(g.gen).IsEndbr(hx(t, tc.hex)); got != g.want {
				t.Errorf("%s: IsEndbr(%s) = %v", g.gen, tc.hex, got)
			}
		}
	}
}

func TestIsIndirectJump(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want bool
	}{
		{"ff e0", true}, {"41 ff e3", true}, {"ff 25 00 10 00 00", true},
		{"ff 24 c5 00 00 00 00", true}, {"ff 2c 24", true}, {"ea 01 02 03 04 05 06", true},
		{"ff d0", false}, {"ff 15 00 10 00 00", false}, {"ff c0", false}, {"ff 30", false},
		{"e9 00 00 00 00", false}, {"eb 00", false}, {"c3", false},
	} {
		if got := IsIndirectJump(mustDecode(t, tc.hex)); got != tc.want {
			t.Errorf("IsIndirectJump(%s) = %v", tc.hex, got)
		}
	}
}

func TestIsExceptionInsn(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want bool
	}{
		{"0f ff", true}, {"0f b9 00", true}, {"0f 0b", true}, {"cc", true},
		{"cd 03", true}, {"ce", true}, {"f1", true},
		{"90", false}, {"c3", false}, {"0f 1f 00", false}, {"f3 0f 1e fa", false},
		{"0f 0b 78 65 6e 0f a2", false}, // xen cpuid: opcode is the cpuid's
	} {
		if got := IsExceptionInsn(mustDecode(t, tc.hex)); got != tc.want {
			t.Errorf("IsExceptionInsn(%s) = %v", tc.hex, got)
		}
	}
}

func TestInsnJumpIntoRange(t *testing.T) {
	// can_optimize(paddr): insn_jump_into_range(&insn, paddr + 1, 4), i.e.
	// targets in [paddr+1, paddr+5], both ends inclusive.
	const paddr = 0x1000
	for _, tc := range []struct {
		hex  string
		addr uint64
		want bool
	}{
		{"eb 00", 0xffe, false},             // target 0x1000 = paddr itself
		{"eb 01", 0xffe, true},              // 0x1001
		{"eb 05", 0xffe, true},              // 0x1005: inclusive upper bound
		{"eb 06", 0xffe, false},             // 0x1006
		{"75 fc", 0x1008, false},            // 0x100a-4 = 0x1006
		{"75 f8", 0x1008, true},             // 0x100a-8 = 0x1002
		{"e9 f6 ff ff ff", 0x1008, true},    // 0x100d-10 = 0x1003
		{"0f 84 f4 ff ff ff", 0x1008, true}, // 0x100e-12 = 0x1002
		{"0f 84 f8 ff ff ff", 0x1008, false},
		{"e2 f9", 0x1008, true},           // loop: 0x100a-7 = 0x1003
		{"e3 f9", 0x1008, true},           // jrcxz
		{"e8 f8 ff ff ff", 0x1008, false}, // 0x1005, but calls are not checked
		{"ff e0", 0x1008, false},
		{"c5 f9 72 f0 f6", 0x1008, true}, // vpslld $-10: VEX opcode 0x72 read as a jcc (kernel quirk)
	} {
		if got := InsnJumpIntoRange(mustDecode(t, tc.hex), tc.addr, paddr+1, DISP32Size); got != tc.want {
			t.Errorf("InsnJumpIntoRange(%s at %#x) = %v, want %v", tc.hex, tc.addr, got, tc.want)
		}
	}
}

func TestJumpEntrySize(t *testing.T) {
	for _, tc := range []struct {
		hex  string
		want int
	}{
		{"eb 10", 2}, {"e9 00 01 00 00", 5}, {"66 90", 2}, {"0f 1f 44 00 00", 5},
		{"eb 10 cc cc cc", 2}, {"66 90 0f 1f 44 00 00", 2},
	} {
		c := sim.NewCounters(false)
		got, err := JumpEntrySize(c, hx(t, tc.hex))
		if err != nil || got != tc.want {
			t.Errorf("JumpEntrySize(%s) = %d, %v", tc.hex, got, err)
		}
		got2, err := JumpEntrySizeDecode(c, hx(t, tc.hex))
		if err != nil || got2 != tc.want {
			t.Errorf("JumpEntrySizeDecode(%s) = %d, %v", tc.hex, got2, err)
		}
		if c.Total(OpJumpSizeOpcode) != 1 || c.Total(OpDecode) != 1 {
			t.Errorf("%s: counts %d %d", tc.hex, c.Total(OpJumpSizeOpcode), c.Total(OpDecode))
		}
	}
	for _, tc := range []struct {
		hex       string
		decodeLen int // JumpEntrySizeDecode's answer, 0 = BUG too
	}{
		{"", 0}, {"66", 0}, {"0f 1f 44 00", 0}, {"90", 0}, {"cc", 0},
		{"0f 1f 40 00", 0},       // NOP4
		{"0f 1f 44 00 01", 5},    // a 5-byte NOP, but not BYTES_NOP5
		{"31 c0", 2},             // any 2-byte insn passes the decode rule
		{"e8 00 00 00 00", 5},    // a call: 5 bytes
		{"66 0f 1f 44 00 00", 0}, // NOP6
	} {
		if n, err := JumpEntrySize(nil, hx(t, tc.hex)); !errors.Is(err, ErrJumpEntryBUG) {
			t.Errorf("JumpEntrySize(%q) = %d, %v; want BUG", tc.hex, n, err)
		}
		n, err := JumpEntrySizeDecode(nil, hx(t, tc.hex))
		if tc.decodeLen == 0 && !errors.Is(err, ErrJumpEntryBUG) {
			t.Errorf("JumpEntrySizeDecode(%q) = %d, %v; want BUG", tc.hex, n, err)
		}
		if tc.decodeLen != 0 && (err != nil || n != tc.decodeLen) {
			t.Errorf("JumpEntrySizeDecode(%q) = %d, %v; want %d", tc.hex, n, err, tc.decodeLen)
		}
	}
}

func TestCanBoost(t *testing.T) {
	for _, tc := range []struct {
		hex           string
		v61, mainline bool
	}{
		{"55", true, true},                   // push %rbp
		{"48 89 e5", true, true},             // mov
		{"48 8b 05 10 20 30 00", true, true}, // rip-relative mov (fixed up when copied)
		{"0f 1f 44 00 00", true, true},       // 0f 1f is boostable in the bitmap
		{"0f b6 47 01", true, true},          // movzx
		{"0f 84 00 10 00 00", false, false},  // jcc rel32
		{"0f 0b", false, false},              // ud2
		{"74 05", false, false},              // jcc rel8
		{"e8 00 00 00 00", false, false},     // call
		{"e9 00 00 00 00", false, false},     // jmp rel32
		{"eb 00", false, false},              // jmp rel8
		{"cc", false, false},                 // int3
		{"f0 ff 07", false, true},            // lock incl (%rdi): f0 is a prefix, opcode ff /0
		{"c1 e0 04", false, true},            // shl: Grp2
		{"d1 f0", false, false},              // Grp2 /6
		{"f7 d8", false, true},               // neg: Grp3
		{"fe c0", false, true},               // inc %al: Grp4
		{"fe c8", false, true},               // dec %al
		{"ff c0", false, true},               // inc: Grp5 /0
		{"ff e0", true, true},                // jmp *%rax: Grp5 /4
		{"ff d0", false, false},              // call *%rax
		{"2e 8b 00", false, false},           // CS override
		{"67 8b 00", false, false},           // address-size override
		{"0f 38 f6 00", false, false},        // three-byte opcode
		{"c5 f8 77", false, false},           // VEX 0x77: one opcode byte in 70-7f
		{"c3", true, true},                   // ret is boostable (opcode default)
	} {
		in := mustDecode(t, tc.hex)
		if got := CanBoost(in, false); got != tc.v61 {
			t.Errorf("CanBoost(%s, 6.1) = %v", tc.hex, got)
		}
		if got := CanBoost(in, true); got != tc.mainline {
			t.Errorf("CanBoost(%s, mainline) = %v", tc.hex, got)
		}
	}
}
