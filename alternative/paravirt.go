package alternative

import (
	"encoding/binary"
	"fmt"
)

// Paravirt patch results of one site, as paravirt_patch decides them.
const (
	ParaDirect = "direct call"  // call <pv_ops slot function> + NOP1
	ParaNop    = "nop"          // slot is _paravirt_nop: the whole site becomes NOPs
	ParaBUG    = "paravirt_BUG" // empty slot: call paravirt_BUG + NOP1
)

// genCall writes "e8 rel32" to dest for an instruction at addr.
//
// Models arch/x86/include/asm/text-patching.h:__text_gen_insn (CALL/JMP32).
func genInsn(buf []byte, op byte, addr, dest uint64) {
	buf[0] = op
	binary.LittleEndian.PutUint32(buf[1:], uint32(int32(int64(dest-(addr+5)))))
}

// ParavirtPatch fills buf (prepared with the site's bytes) for pv_ops
// slot typ at addr and returns how many bytes it used and what it did.
// 6.1 has no inline "native" templates any more (they became
// alternatives around the pv call, see package doc): a slot is either
// _paravirt_nop (0 bytes used) or called directly.
//
// Models arch/x86/kernel/paravirt.c:paravirt_patch and paravirt_patch_call.
func (e *Env) ParavirtPatch(typ uint8, buf []byte, addr uint64) (int, string, error) {
	if int(typ) >= len(e.PVOps) {
		return 0, "", fmt.Errorf("paravirt site %#x: type %d is past pv_ops (%d slots)", addr, typ, len(e.PVOps))
	}
	fn := e.PVOps[typ]
	switch {
	case fn == 0:
		if len(buf) < 5 {
			return 0, "", fmt.Errorf("paravirt site %#x: %d bytes cannot hold a call", addr, len(buf))
		}
		genInsn(buf, x86CALL, addr, e.ParavirtBUG)
		return 5, ParaBUG, nil
	case fn == e.ParavirtNop:
		return 0, ParaNop, nil
	}
	if len(buf) < 5 {
		// apply_paravirt: BUG_ON(used > p->len).
		return 0, "", fmt.Errorf("paravirt site %#x: %d bytes cannot hold a call", addr, len(buf))
	}
	genInsn(buf, x86CALL, addr, fn)
	return 5, ParaDirect, nil
}

const (
	x86CALL  = 0xe8
	x86JMP32 = 0xe9
	x86JMP8  = 0xeb
	x86RET   = 0xc3
	x86INT3  = 0xcc
	x86NOP1  = 0x90
)

// ApplyParavirt patches every .parainstructions site: a copy of the
// site's bytes goes through paravirt_patch, the unused tail is filled
// with add_nops, and the result is written back. optimize_nops does not
// run here.
//
// Models arch/x86/kernel/alternative.c:apply_paravirt.
func (p *Patcher) ApplyParavirt(sites []ParaSite) error {
	for _, s := range sites {
		p.Stats.Paravirt.Sites++
		dst, err := p.text("paravirt", s.Instr, int(s.Len))
		if err != nil {
			return err
		}
		buf := make([]byte, s.Len)
		copy(buf, dst)
		used, action, err := p.Env.ParavirtPatch(s.Type, buf, s.Instr)
		if err != nil {
			return err
		}
		switch action {
		case ParaDirect:
			p.Stats.Paravirt.Direct++
		case ParaNop:
			p.Stats.Paravirt.Nop++
		case ParaBUG:
			p.Stats.Paravirt.BUG++
		}
		AddNops(buf[used:])
		p.textPokeEarly(SiteParavirt, s.Instr, dst, buf, action)
	}
	return nil
}
