package alternative

import (
	"encoding/binary"
	"fmt"

	"github.com/kpsim/kpsim/x86"
)

// Alternative site results.
const (
	AltReplaced = "replaced" // the replacement (relocated) + 0x90 padding, then optimize_nops
	AltKept     = "kept"     // feature test false: original kept, optimize_nops only
)

// recomputeJump re-targets a 5-byte replacement jmp (already copied into
// buf) for its new home at orig and shrinks it to "eb rel8" + NOP3 when
// the displacement fits. Only 5-byte replacements are handled; a 2-byte
// jmp replacement is copied as is. It reports whether the short form was
// written.
//
// Models arch/x86/kernel/alternative.c:recompute_jump, including its
// arithmetic: negative displacements always keep the 5-byte form, since
// ((n_dspl - 2) & 0xff) == (n_dspl - 2) never holds for them.
func recomputeJump(a AltInstr, buf []byte) (short, done bool) {
	if a.ReplLen != 5 {
		return false, false
	}
	oDspl := int32(binary.LittleEndian.Uint32(buf[1:]))
	nextRIP := a.Repl + uint64(a.ReplLen)
	tgt := nextRIP + uint64(int64(oDspl))
	nDspl := int32(int64(tgt - a.Instr))
	var two bool
	if int64(tgt-a.Instr) >= 0 {
		two = nDspl-2 <= 127
	} else {
		two = (nDspl-2)&0xff == nDspl-2
	}
	if two {
		nDspl -= 2
		buf[0] = x86JMP8
		buf[1] = byte(int8(nDspl))
		AddNops(buf[2:5])
		return true, true
	}
	nDspl -= 5
	buf[0] = x86JMP32
	binary.LittleEndian.PutUint32(buf[1:], uint32(nDspl))
	return false, true
}

// ApplyAlternatives patches every .altinstructions entry in table order
// (later entries may overwrite earlier ones on purpose, as
// ALTERNATIVE_2/ALTERNATIVE_TERNARY rely on). An entry whose feature test
// passes gets its replacement copied in, a 5-byte e8 call re-based for
// the new address, a 5-byte jmp re-targeted by recompute_jump, the rest
// padded with 0x90; then, patched or not, optimize_nops turns each run of
// two or more single-byte NOPs in the site into kernel NOPs.
//
// Models arch/x86/kernel/alternative.c:apply_alternatives.
func (p *Patcher) ApplyAlternatives(alts []AltInstr) error {
	for _, a := range alts {
		st := &p.Stats.Alternatives
		st.Sites++
		f := a.Feature()
		if f >= featureLimit {
			return fmt.Errorf("alternative at %#x: feature bit %d is past the capability array", a.Instr, f)
		}
		n := max(int(a.InstrLen), int(a.ReplLen))
		dst, err := p.text("alternative", a.Instr, n)
		if err != nil {
			return err
		}
		// Patch if the feature is present, or absent with ALT_NOT.
		if p.CPU.Features.Has(f) != a.Inv() {
			repl := p.Mem.Text(a.Repl, int(a.ReplLen))
			if len(repl) < int(a.ReplLen) {
				return fmt.Errorf("alternative at %#x: replacement %#x (+%d bytes): %w", a.Instr, a.Repl, a.ReplLen, ErrUnmapped)
			}
			buf := make([]byte, n)
			copy(buf, repl)
			// 0xe8 is a relative call: fix the offset.
			if a.ReplLen == 5 && buf[0] == x86CALL {
				rel := int32(binary.LittleEndian.Uint32(buf[1:])) + int32(int64(a.Repl-a.Instr))
				binary.LittleEndian.PutUint32(buf[1:], uint32(rel))
				st.CallFixed++
			}
			if a.ReplLen > 0 && (repl[0] == x86JMP8 || repl[0] == x86JMP32) {
				if short, done := recomputeJump(a, buf); done {
					if short {
						st.JmpShort++
					} else {
						st.JmpNear++
					}
				}
			}
			for i := int(a.ReplLen); i < int(a.InstrLen); i++ {
				buf[i] = x86NOP1
			}
			st.Replaced++
			p.textPokeEarly(SiteAlternative, a.Instr, dst, buf, AltReplaced)
		} else {
			p.record(SiteAlternative, a.Instr, dst[:a.InstrLen], AltKept)
		}
		p.optimizeNops(a.Instr, int(a.InstrLen))
	}
	return nil
}

// optimizeNops walks the site at addr instruction by instruction and
// rewrites every run of two or more single-byte NOPs (0x90) inside it
// with add_nops. It stops at the first instruction the kernel decoder
// rejects. The last record of the site (Patcher.Record) gets the final
// bytes.
//
// Models arch/x86/kernel/alternative.c:optimize_nops and
// optimize_nops_range.
func (p *Patcher) optimizeNops(addr uint64, n int) {
	site := p.Mem.Text(addr, n)
	changed := optimizeNops(func(i int) []byte { return p.Mem.Text(addr+uint64(i), 15) }, site)
	if changed < 0 {
		p.Stats.Alternatives.Undecodable++
		changed = -changed - 1
	}
	p.Stats.Alternatives.NopRuns += changed
	if p.Record && len(p.Sites) > 0 {
		if s := &p.Sites[len(p.Sites)-1]; s.Addr == addr && s.Kind == SiteAlternative {
			copy(s.After, site)
		}
	}
}

// optimizeNops is optimize_nops over site (writable), reading
// instructions through at(i), which returns the bytes from offset i on
// (the decoder may look past the site's end, as the kernel's does). It
// returns the number of NOP runs rewritten, or -(runs+1) when the walk
// stopped at an undecodable instruction.
func optimizeNops(at func(i int) []byte, site []byte) int {
	runs := 0
	for i := 0; ; {
		insn, err := x86.DecodeKernel(nil, at(i))
		if err != nil {
			return -(runs + 1)
		}
		if insn.Len == 1 && insn.Opcode[0] == x86NOP1 {
			// optimize_nops_range
			j := i
			for j < len(site) && site[j] == x86NOP1 {
				j++
			}
			if j-i > 1 {
				AddNops(site[i:j])
				runs++
			}
			i += j - i
		} else {
			i += insn.Len
		}
		if i >= len(site) {
			return runs
		}
	}
}

// OptimizeNops is optimize_nops on a buffer: every run of two or more
// 0x90 bytes becomes kernel NOPs. The walk decodes only inside buf plus
// zero bytes after it, as apply_retpolines' 16-byte buffer. It returns
// the runs rewritten (negative as above when it stops early).
func OptimizeNops(buf []byte) int {
	pad := make([]byte, len(buf)+16)
	copy(pad, buf)
	n := optimizeNops(func(i int) []byte { return pad[i:min(i+15, len(pad))] }, pad[:len(buf)])
	copy(buf, pad)
	return n
}
