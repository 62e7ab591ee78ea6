package kallsyms

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// TestModuleMappingSymbols: find_kallsyms_symbol skips ".L" labels (gas
// keeps some in real modules' symtabs) and "$x"-style mapping symbols, so
// an address after one still resolves to the function before it.
func TestModuleMappingSymbols(t *testing.T) {
	const base = 0xffffffffc0001000
	m := &image.Module{Name: "m", State: image.ModuleLive,
		Text: &image.Region{Name: "m .text", Kind: image.ModuleText, Module: "m", Start: base, Bytes: make([]byte, 0x1000)},
		Symbols: []image.Symbol{
			{Name: "f", Addr: base, Size: 0x40, Type: 't'},
			{Name: ".LC3", Addr: base + 0x10, Type: 'r'},
			{Name: "$x", Addr: base + 0x18, Type: 't'},
			{Name: "g", Addr: base + 0x40, Size: 0x20, Type: 't'},
		}}
	k := &image.Kernel{Symbols: []image.Symbol{{Name: "_stext", Addr: 0xffffffff81000000, Size: 0x1000, Type: 'T'}}, Modules: []*image.Module{m}}
	s := NewSorted(k)
	c := sim.NewCounters(false)
	size, off, ok := s.LookupSizeOffset(c, base+0x20)
	if !ok || size != 0x40 || off != 0x20 {
		t.Errorf("size %#x offset %#x ok %v: want f's 0x40 and 0x20", size, off, ok)
	}
	if n, _ := s.LookupSymbolName(c, base+0x20); n != "f" {
		t.Errorf("name %q, want f", n)
	}
	for name, want := range map[string]bool{".LC0": true, "$x": true, "$d.1": true, "$y": false, "$xx": false, ".data": false, "f": false} {
		if IsMappingSymbol(name) != want {
			t.Errorf("IsMappingSymbol(%q) = %v", name, !want)
		}
	}
}
