package synth

import (
	"math"
	"math/rand/v2"

	"github.com/kpsim/kpsim/image"
)

// How the gaps between functions are filled (checked with gas and ld
// 2.40, the versions Debian's 6.1 kernel was built with:
// CONFIG_AS_VERSION=24000):
//
//   - Inside one object's .text, gcc emits ".p2align 4" before every
//     function and gas fills the gap with its multi-byte NOPs (gasNops).
//   - Between input sections (objects), the linker fills. vmlinux's .text
//     output section ends with "} :text =0xcccc"
//     (arch/x86/kernel/vmlinux.lds.S), so there the fill is int3. Modules
//     (ld -r, scripts/module.lds.S has no fill for .text) and output
//     sections without a fill expression get ld's default code fill: the
//     10-byte NOP repeated, then a shorter one (ldNops).
//   - __init functions are __cold, and gcc does not align cold functions
//     (no .p2align), so .init.text holds no padding at all.

// Fill says what fills the gap after a function.
type Fill uint8

const (
	// FillNone: no gap (the next function starts where this one ends).
	FillNone Fill = iota
	// FillGasNOP: an alignment gap inside one object, gas NOPs.
	FillGasNOP
	// FillLinkerINT3: a gap between objects in vmlinux .text (=0xcccc).
	FillLinkerINT3
	// FillLinkerNOP: a gap between objects where ld uses its default code
	// fill (module .text, ld -r).
	FillLinkerNOP
)

func (f Fill) String() string {
	return [...]string{"none", "gas-nop", "ld-int3", "ld-nop"}[f]
}

// gasNopTable holds gas's NOPs by length for 64-bit code with default
// tuning (binutils gas/config/tc-i386.c alt_patt, f32_patt), as gas 2.40
// emits them for ".p2align 4": assembled and disassembled on the kpsim
// machines (TestGasPaddingMatchesAs). ld uses the same table up to 10
// bytes.
var gasNopTable = [12][]byte{
	nil,
	{0x90},
	{0x66, 0x90},
	{0x0f, 0x1f, 0x00},
	{0x0f, 0x1f, 0x40, 0x00},
	{0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
	{0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
}

// nopRun writes NOPs of at most maxLen bytes filling b, the longest first
// (gas: 11, then the rest; ld: 10s, then the rest), and returns the
// offsets of the instructions it wrote relative to b.
func nopRun(b []byte, maxLen int) []uint32 {
	var offs []uint32
	for off := 0; off < len(b); {
		n := min(maxLen, len(b)-off)
		offs = append(offs, uint32(off))
		copy(b[off:], gasNopTable[n])
		off += n
	}
	return offs
}

// writePad fills b (the gap after a function) as f says and returns the
// instruction offsets relative to b.
func writePad(b []byte, f Fill) []uint32 {
	switch f {
	case FillGasNOP:
		return nopRun(b, 11)
	case FillLinkerNOP:
		return nopRun(b, 10)
	case FillLinkerINT3:
		offs := make([]uint32, len(b))
		for i := range b {
			b[i] = opINT3
			offs[i] = uint32(i)
		}
		return offs
	}
	return nil
}

// objectEnds groups n functions (in link order) into objects
// (translation units) and marks the last function of each: object sizes
// are log-normal with median ObjectFunctionsMedian and shape
// ObjectFunctionsSigma, at least one function. The defaults are measured
// on the Debian 6.1 vmlinux (see Config).
func (g *gen) objectEnds(n int, rng *rand.Rand) []bool {
	ends := make([]bool, n)
	c := &g.cfg
	for i := 0; i < n; {
		k := int(math.Round(c.ObjectFunctionsMedian * math.Exp(c.ObjectFunctionsSigma*rng.NormFloat64())))
		k = min(max(k, 1), 4096)
		i += k
		ends[min(i, n)-1] = true
	}
	return ends
}

// padAfter fills the pad bytes after the function ft describes (in reg)
// as f says and records them in ft.
func padAfter(ft *FuncTruth, reg *image.Region, pad int, f Fill) {
	if pad <= 0 {
		return
	}
	start := ft.Addr + uint64(ft.Size) - reg.Start
	offs := writePad(reg.Bytes[start:start+uint64(pad)], f)
	for i := range offs {
		offs[i] += ft.Size
	}
	ft.Pad, ft.Fill, ft.PadInsns = uint32(pad), f, offs
}
