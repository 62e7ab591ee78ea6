package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/image"
)

// TestPlaceAfterFentryIBT: on an IBT kernel "after the __fentry__ call"
// is +9 behind an ENDBR64 (or its sealed poison) and +5 in a function
// the compiler gave no ENDBR64 (its address is never taken), whose
// __fentry__ call sits at +0; an untraced function stays at the ENDBR's
// end, or at +0.
func TestPlaceAfterFentryIBT(t *testing.T) {
	const base uint64 = 0xffffffff81000000
	endbr := []byte{0xf3, 0x0f, 0x1e, 0xfa}
	poison := []byte{0x66, 0x0f, 0x1f, 0x00}
	call := []byte{0xe8, 0, 0, 0, 0}
	text := make([]byte, 0x100)
	copy(text[0x00:], append(append([]byte{}, endbr...), call...))  // a: endbr, fentry at +4
	copy(text[0x40:], append(append([]byte{}, poison...), call...)) // b: sealed, fentry at +4
	copy(text[0x80:], call)                                         // c: no endbr, fentry at +0
	copy(text[0xc0:], endbr)                                        // d: endbr, not traced
	k := &image.Kernel{Config: image.Config{IBT: true},
		Regions: []*image.Region{{Name: ".text", Kind: image.CoreText, Start: base, Bytes: text}},
		Symbols: []image.Symbol{{Name: "a", Addr: base, Size: 0x40, Type: 't'}, {Name: "b", Addr: base + 0x40, Size: 0x40, Type: 't'},
			{Name: "c", Addr: base + 0x80, Size: 0x40, Type: 't'}, {Name: "d", Addr: base + 0xc0, Size: 0x40, Type: 't'}},
		McountLocs: []uint64{base + 4, base + 0x44, base + 0x80}}
	ts := []Target{{Symbol: "a"}, {Symbol: "b"}, {Symbol: "c"}, {Symbol: "d"}, {Addr: base + 0x80}}
	PlaceTargets(ts, k, PlaceAfterFentry, 0)
	for i, want := range []uint32{9, 9, 5, 4} {
		if ts[i].Offset != want {
			t.Errorf("%s: offset %d, want %d", ts[i].Symbol, ts[i].Offset, want)
		}
	}
	if ts[4].Addr != base+0x85 {
		t.Errorf("address target: %#x, want %#x", ts[4].Addr, base+0x85)
	}
	k.Config.IBT = false // 6.1's Debian kernel: no ENDBR to step over
	ts = []Target{{Symbol: "c"}}
	PlaceTargets(ts, k, PlaceAfterFentry, 0)
	if ts[0].Offset != 5 {
		t.Errorf("c without IBT: offset %d, want 5", ts[0].Offset)
	}
}
