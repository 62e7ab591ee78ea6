package x86_test

import (
	"fmt"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

func ExampleDecode() {
	// The start of a function on an IBT kernel: endbr64, then the
	// __fentry__ call site, then a jump-label NOP2.
	text := []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 0x10, 0x00, 0x00, 0x00, 0x66, 0x90}
	addr := uint64(0xffffffff81000000)
	for off := 0; off < len(text); {
		in, err := x86.Decode(nil, text[off:])
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%#x: %-8s len %d kind %v", addr+uint64(off), in.Mnemonic, in.Len, in.Kind)
		if in.HasRel {
			fmt.Printf(" -> %#x", in.Target(addr+uint64(off)))
		}
		fmt.Println()
		off += in.Len
	}
	// Output:
	// 0xffffffff81000000: endbr64  len 4 kind endbr
	// 0xffffffff81000004: call     len 5 kind call -> 0xffffffff81000019
	// 0xffffffff81000009: nop      len 2 kind nop
}

func ExampleJumpEntrySize() {
	c := sim.NewCounters(false)
	for _, site := range [][]byte{
		{0xeb, 0x10},                   // JMP8
		{0xe9, 0x00, 0x01, 0x00, 0x00}, // JMP32
		x86.NOP2[:],
		x86.NOP5[:],
		{0x90, 0x90}, // not a jump-label site: the kernel BUGs
	} {
		n, err := x86.JumpEntrySize(c, site)
		fmt.Println(n, err)
	}
	fmt.Println("counted:", c.Total(x86.OpJumpSizeOpcode))
	// Output:
	// 2 <nil>
	// 5 <nil>
	// 2 <nil>
	// 5 <nil>
	// 0 x86: BUG: jump entry is not a 2- or 5-byte JMP/NOP: 90 90
	// counted: 5
}
