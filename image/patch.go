package image

import (
	"encoding/binary"
	"fmt"
)

// ApplyReturns rewrites every return-thunk jump in ReturnSites the way
// boot-time apply_returns does on a CPU that needs no return thunk: a
// "jmp __x86_return_thunk" (e9 rel32 to that symbol) becomes "ret" followed
// by int3 padding to the jump's length. Sites that are not such a jump are
// left alone (the kernel WARNs and skips them). It returns how many sites
// were patched and marks the image's returns patched.
//
// Models arch/x86/kernel/alternative.c:apply_returns (patch_return's
// "patch them out" branch).
//
// It is only for images kept as built (elfload.Load, load with CPU
// "none"): image/load boots real kernels for a CPU through package
// alternative, which models apply_returns for every mitigation mode
// together with paravirt, retpolines and alternatives. On an image already
// booted (Config.CPU set) ApplyReturns does nothing, so older callers that
// still apply it after load.Open get the booted kernel unchanged.
func (k *Kernel) ApplyReturns() (int, error) {
	if k.Config.CPU != "" {
		return 0, nil
	}
	thunks := k.SymbolsByName("__x86_return_thunk")
	if len(thunks) == 0 {
		return 0, fmt.Errorf("image %s: no __x86_return_thunk symbol: cannot apply returns", k.Name)
	}
	thunk := thunks[0].Addr
	n := 0
	for _, a := range k.ReturnSites {
		b := k.Text(a, 5)
		if len(b) < 5 || b[0] != 0xe9 {
			continue
		}
		if a+5+uint64(int64(int32(binary.LittleEndian.Uint32(b[1:])))) != thunk {
			continue
		}
		b[0] = 0xc3 // RET_INSN_OPCODE
		for i := 1; i < 5; i++ {
			b[i] = 0xcc // INT3_INSN_OPCODE
		}
		n++
	}
	k.Config.ReturnsPatched = true
	return n, nil
}
