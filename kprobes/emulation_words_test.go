package kprobes

import (
	"errors"
	"testing"

	"github.com/kpsim/kpsim/x86"
)

// TestPrepareEmulationWords: each refusal of prepare_emulation is
// EOPNOTSUPP and worded as the trail and reasons give it.
func TestPrepareEmulationWords(t *testing.T) {
	insn := func(op0, op1, modrm byte, addr int) x86.Insn {
		return x86.Insn{Opcode: [3]byte{op0, op1}, ModRM: modrm, HasModRM: true, AddrBytes: addr}
	}
	for _, tc := range []struct {
		i    x86.Insn
		want string
	}{
		{insn(0x9a, 0, 0, 8), "far call (lcall) is not emulated"},
		{insn(0xea, 0, 0, 8), "far jmp (ljmp) is not emulated"},
		{insn(0xcc, 0, 0, 8), "int3 is not emulated"},
		{insn(0xcf, 0, 0, 8), "iret is not emulated"},
		{insn(0x0f, 0x01, 0xc1, 8), "VMX instruction (0f 01 /0: vmcall, vmlaunch, ...) is not emulated"},
		{insn(0xff, 0, 0x18, 8), "far indirect call is not emulated"},
		{insn(0xff, 0, 0x28, 8), "far indirect jmp is not emulated"},
		{insn(0xff, 0, 0xd0, 4), "indirect call with a 32-bit address size is not emulated"},
		{insn(0xff, 0, 0xe0, 4), "indirect jmp with a 32-bit address size is not emulated"},
		{insn(0xff, 0, 0x10, 8), "indirect call through memory is not emulated"},
		{insn(0xff, 0, 0x20, 8), "indirect jmp through memory is not emulated"},
		{insn(0xff, 0, 0xd0, 8), ""},
		{insn(0xff, 0, 0xc0, 8), ""},
		{insn(0x90, 0, 0, 8), ""},
	} {
		what, err := prepareEmulation(tc.i)
		if tc.want == "" {
			if err != nil || what != 0 {
				t.Errorf("% x modrm %#x: %v, %v; want emulated", tc.i.Opcode, tc.i.ModRM, what, err)
			}
			continue
		}
		if !errors.Is(err, EOPNOTSUPP) || what.Error() != tc.want {
			t.Errorf("% x modrm %#x: %q, %v; want %q, EOPNOTSUPP", tc.i.Opcode, tc.i.ModRM, what.Error(), err, tc.want)
		}
	}
}

// TestCopyRefusalWords: __copy_instruction's refusals keep their words.
func TestCopyRefusalWords(t *testing.T) {
	for c, want := range map[copyRefusal]string{
		copyNoDecode:         "does not decode",
		copyEmulatePrefix:    "has a Xen/KVM emulate prefix (ud2; .ascii)",
		copyInt3:             "is an int3 (someone else's breakpoint, or padding)",
		copyMaskingException: "masks interrupts for one instruction (mov to %ss / pop %ss)",
		copyRIPOutOfReach:    "is RIP-relative and its target is out of rel32 reach of the slot",
	} {
		if got := copyWhy(c); got != want {
			t.Errorf("%d: %q, want %q", c, got, want)
		}
	}
	if got := copyWhy(errors.New("x")); got != "model error: x" {
		t.Errorf("model error: %q", got)
	}
}
