package x86

import (
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"f3 0f 1e fa", "0f 01 ca", "0f c7 f8", "c4 e2 78 49 c0", "c5 f8 77", "c5 fc 77",
		"66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00", "48 b8 88 77 66 55 44 33 22 11",
		"65 48 8b 04 25 28 00 00 00", "e8 00 00 00 00", "0f 84 00 10 00 00", "ff 25 00 10 00 00",
		"0f 0b 78 65 6e 0f a2", "62 f1 fd 48 7f 00", "ea 01 02 03 04 05 06", "0f ff", "cc", "c3",
	} {
		f.Add(hx(nil, s))
	}
	f.Add(benchText)
	f.Fuzz(func(t *testing.T, code []byte) {
		in, err := Decode(nil, code)
		if err != nil {
			return
		}
		if in.Len < 1 || in.Len > MaxInsnSize || in.Len > len(code) {
			t.Fatalf("% x: len %d", code, in.Len)
		}
		if in.Mnemonic == "" {
			t.Fatalf("% x: no mnemonic", code)
		}
		// The decode of a prefix of the buffer that holds the whole
		// instruction gives the same answer.
		in2, err := Decode(nil, code[:in.Len])
		if err != nil || in2 != in {
			t.Fatalf("% x: truncated to %d: %+v %v, was %+v", code, in.Len, in2, err, in)
		}
		// Classification helpers never panic on any decoded insn.
		_ = IsIndirectJump(in)
		_ = IsExceptionInsn(in)
		_ = CanBoost(in, true)
		_ = InsnJumpIntoRange(in, 0xffffffff81000000, 0xffffffff81000001, 4)
		_, _ = JumpEntrySize(nil, code)
		_, _ = JumpEntrySizeDecode(nil, code)
	})
}
