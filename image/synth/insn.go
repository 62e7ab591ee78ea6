package synth

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
)

// An instruction template: fixed bytes with "xx" placeholders for random
// displacement/immediate bytes that never change the length.
type tmpl struct {
	b    []byte
	rand []bool
}

func mustTmpl(s string) tmpl {
	s = strings.ReplaceAll(s, " ", "")
	var t tmpl
	for i := 0; i < len(s); i += 2 {
		if s[i:i+2] == "xx" {
			t.b = append(t.b, 0)
			t.rand = append(t.rand, true)
			continue
		}
		v, err := hex.DecodeString(s[i : i+2])
		if err != nil {
			panic("synth: bad template " + s)
		}
		t.b = append(t.b, v[0])
		t.rand = append(t.rand, false)
	}
	if len(t.b) < 1 || len(t.b) > 15 {
		panic("synth: template length out of range: " + s)
	}
	return t
}

// plainByLen holds ordinary (non-branch) x86-64 instructions by length,
// 1..15 bytes, as gcc emits them in kernel code: register moves and ALU,
// loads and stores with disp8 / disp32 / SIB / RIP-relative / %gs:
// operands, immediates, movabs, and the multi-byte NOPs gas uses for
// alignment (up to the 15-byte data16-prefixed form).
var plainByLen = [16][]tmpl{}

// lenWeights is the share of each length among ordinary instructions, in
// percent: short register forms dominate, long forms are rare.
var lenWeights = [16]float64{0, 4, 15, 23, 17, 16, 6, 11, 4, 1.5, 1, 0.8, 0.3, 0.2, 0.1, 0.1}

func init() {
	src := map[int][]string{
		1:  {"53", "5b", "99", "50", "58", "98"},
		2:  {"31c0", "85c0", "89c7", "01d0", "29c8", "39d6", "f3a4", "89f8", "21c8", "09d0", "d1e8", "f7d8"},
		3:  {"4889c7", "4801d0", "4885ff", "4839f7", "8b47xx", "8947xx", "4863d0", "0fb6c0", "0fb7c0", "4c89e7", "4d85e4", "c1e0xx"},
		4:  {"488b47xx", "488947xx", "4883ffxx", "0fb647xx", "480f44c1", "488d04c7", "4c8b67xx", "48c1e8xx"},
		5:  {"b8xxxxxxxx", "bfxxxxxxxx", "488b4424xx", "3dxxxxxxxx", "25xxxxxxxx", "bexxxxxxxx", "4c8b6424xx"},
		6:  {"4805xxxxxxxx", "8b87xxxxxxxx", "81ffxxxxxxxx", "8b05xxxxxxxx", "898fxxxxxxxx", "660f1f440000"},
		7:  {"488b87xxxxxxxx", "488987xxxxxxxx", "488d3dxxxxxxxx", "488b05xxxxxxxx", "48c7c0xxxxxxxx", "4869c0xxxxxxxx", "8305xxxxxxxx01", "0f1f8000000000"},
		8:  {"488b8424xxxxxxxx", "48c747xxxxxxxxxx", "0f1f840000000000", "488b84c7xxxxxxxx"},
		9:  {"65488b0425xxxxxxxx", "660f1f840000000000"},
		10: {"48b8xxxxxxxxxxxxxxxx", "662e0f1f840000000000"},
		11: {"48c705xxxxxxxxxxxxxxxx", "48c787xxxxxxxxxxxxxxxx", "66662e0f1f840000000000"},
		12: {"48c78424xxxxxxxxxxxxxxxx", "48c784c7xxxxxxxxxxxxxxxx", "6666662e0f1f840000000000"},
		13: {"6548c70425xxxxxxxxxxxxxxxx", "666666662e0f1f840000000000"},
		14: {"66666666662e0f1f840000000000"},
		15: {"6666666666662e0f1f840000000000"},
	}
	for n, list := range src {
		for _, s := range list {
			t := mustTmpl(s)
			if len(t.b) != n {
				panic("synth: template " + s + " is not the length it is listed under")
			}
			plainByLen[n] = append(plainByLen[n], t)
		}
	}
}

// Fixed encodings (arch/x86/include/asm/{nops.h,text-patching.h,ibt.h}).
var (
	bENDBR64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}
	bNOP2    = []byte{0x66, 0x90}
	bNOP5    = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}
	bUD2     = []byte{0x0f, 0x0b}
	bSTAC    = []byte{0x0f, 0x01, 0xcb}
	bCLAC    = []byte{0x0f, 0x01, 0xca}
	bUACCESS = []byte{0x8b, 0x07} // mov (%rdi),%eax: the faulting user access
	bVZU     = []byte{0xc5, 0xf8, 0x77}
	bJMPRAX  = []byte{0xff, 0xe0}
	bRET     = []byte{0xc3, 0xcc} // ret; int3 (SLS)
	// bRETPatched is a return thunk jump after apply_returns.
	bRETPatched = []byte{0xc3, 0xcc, 0xcc, 0xcc, 0xcc}
	bCOLD       = []byte{0x48, 0x89, 0xc7}
)

const (
	opCALL  = 0xe8
	opJMP32 = 0xe9
	opJMP8  = 0xeb
	opINT3  = 0xcc
)

// pickLen draws an ordinary instruction length <= max (max >= 1).
func pickLen(rng *rand.Rand, max int) int {
	if max > 15 {
		max = 15
	}
	var total float64
	for n := 1; n <= max; n++ {
		total += lenWeights[n]
	}
	r := rng.Float64() * total
	for n := 1; n <= max; n++ {
		r -= lenWeights[n]
		if r < 0 {
			return n
		}
	}
	return max
}

// emitPlain writes a random ordinary instruction of exactly n bytes.
func emitPlain(rng *rand.Rand, dst []byte, n int) {
	list := plainByLen[n]
	t := list[rng.IntN(len(list))]
	for i, b := range t.b {
		if t.rand[i] {
			b = byte(rng.Uint32())
		}
		dst[i] = b
	}
}
