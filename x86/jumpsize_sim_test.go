package x86

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

// TestJumpEntrySizeSimMatchesDecode: for site encodings (with any
// displacement, any trailing bytes, truncated) and for random bytes, the
// simulator's shortcut gives JumpEntrySizeDecode's size, error and count.
func TestJumpEntrySizeSimMatchesDecode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var code []byte
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			code = []byte{JMP8InsnOpcode}
		case 1:
			code = []byte{JMP32InsnOpcode}
		case 2:
			code = NOP2[:]
		case 3:
			code = NOP5[:]
		}
		code = append(append([]byte(nil), code...), rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "rest")...)
		code = code[:rapid.IntRange(0, len(code)).Draw(t, "len")]
		cs, cd := sim.NewCounters(false), sim.NewCounters(false)
		ns, es := JumpEntrySizeSim(cs, code)
		nd, ed := JumpEntrySizeDecode(cd, code)
		if ns != nd || (es == nil) != (ed == nil) || (es != nil && es.Error() != ed.Error()) {
			t.Fatalf("% x: sim %d, %v; decode %d, %v", code, ns, es, nd, ed)
		}
		if cs.Total(OpDecode) != cd.Total(OpDecode) {
			t.Fatalf("% x: counts differ", code)
		}
		if nw, _ := JumpEntrySizeSim(nil, code); nw != nd {
			t.Fatalf("% x: uncounted form %d, decode %d", code, nw, nd)
		}
	})
}
