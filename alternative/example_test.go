package alternative_test

import (
	"fmt"

	"github.com/kpsim/kpsim/alternative"
)

// flat is a Memory over one byte slice (a module's sections after
// relocation would be several).
type flat struct {
	base uint64
	b    []byte
}

func (m flat) Text(addr uint64, n int) []byte {
	if addr < m.base || addr >= m.base+uint64(len(m.b)) {
		return nil
	}
	off := addr - m.base
	return m.b[off:min(uint64(len(m.b)), off+uint64(n))]
}

// A module's pv site and the ALT_NOT(XENPV) alternative around it, patched
// as module_finalize does on a bare-metal CPU: the indirect pv call
// becomes "cli" and a NOP5.
func ExamplePatcher_ModuleFinalize() {
	const text = 0xffffffffc0000000
	m := flat{text, []byte{
		0xff, 0x15, 0x00, 0x00, 0x00, 0x00, // call *pv_ops+N(%rip)
		0xfa, // .altinstr_replacement: cli
	}}
	env := &alternative.Env{PVOps: []uint64{0xffffffff81a46000}, ParavirtNop: 0xffffffff81c01b0a, ReturnThunk: 0xffffffff81e01d30}
	cpu, _ := alternative.LookupCPU("sapphire-rapids")
	p := &alternative.Patcher{CPU: cpu, Env: env, Mem: m}
	err := p.ModuleFinalize(&alternative.Tables{
		Para: []alternative.ParaSite{{Instr: text, Type: 0, Len: 6}},
		Alternatives: []alternative.AltInstr{{Instr: text, Repl: text + 6,
			CPUID: uint16(alternative.X86_FEATURE_XENPV) | alternative.FlagInv, InstrLen: 6, ReplLen: 1}},
	})
	fmt.Printf("% x %v\n", m.b[:6], err)
	// Output: fa 0f 1f 44 00 00 <nil>
}
