package kprobes

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestDecodeMemoMatchesDecode: insn_decode_kernel answered from the memo
// gives the decoder's instruction, error and count, for text that
// collides in the memo, the same text at several addresses, and text that
// changes under an address (a module loaded where another was).
func TestDecodeMemoMatchesDecode(t *testing.T) {
	// A few instructions and junk, to draw the text from.
	pieces := [][]byte{
		x86.NOP5[:], {0x55}, {0x48, 0x89, 0xe5}, {0xf3, 0x0f, 0x1e, 0xfa}, {0xe8, 1, 2, 3, 4},
		{0xc3}, {0x0f, 0x0b}, {0xcc}, {0x0f, 0xff}, {0x66, 0x90}, {0xff, 0x25, 0, 0, 0, 0},
	}
	rapid.Check(t, func(rt *rapid.T) {
		cm, cd := sim.NewCounters(false), sim.NewCounters(false)
		kp := &Kprobes{decodes: newDecodeMemo(), C: cm, insn: x86.For(0)}
		text := map[uint64][]byte{} // the text at each address, until it changes
		for i := rapid.IntRange(1, 100).Draw(rt, "steps"); i > 0; i-- {
			addr := uint64(rapid.IntRange(0, 100).Draw(rt, "addr")) * 0x20
			code := text[addr]
			if code == nil || rapid.IntRange(0, 3).Draw(rt, "change") == 0 {
				code = nil
				for len(code) < x86.MaxInsnSize {
					code = append(code, rapid.SampledFrom(pieces).Draw(rt, "piece")...)
				}
				code = code[:rapid.IntRange(1, x86.MaxInsnSize).Draw(rt, "len")]
				text[addr] = code
			}
			gi, ge := kp.decodeMemo(code)
			wi, we := x86.DecodeKernel(cd, code)
			if !reflect.DeepEqual(gi, wi) || (ge == nil) != (we == nil) || ge != nil && ge.Error() != we.Error() {
				rt.Fatalf("%#x % x: memo %+v %v, decode %+v %v", addr, code, gi, ge, wi, we)
			}
			if x, y := cm.Total(x86.OpDecode), cd.Total(x86.OpDecode); x != y || cm.Sum() != cd.Sum() {
				rt.Fatalf("counts: memo %d (all %d), decode %d (all %d)", x, cm.Sum(), y, cd.Sum())
			}
		}
	})
}
