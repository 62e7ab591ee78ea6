package kallsyms

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kpsim/kpsim/kallsyms/ktab"
	"pgregory.net/rapid"
)

// TestCompressedProperties: random small tables (short names over a tiny
// alphabet, so prefixes are shared and names repeat; repeated addresses),
// every variant against the sorted-slice oracle.
func TestCompressedProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 600).Draw(rt, "n")
		name := rapid.StringOfN(rapid.SampledFrom([]rune("ab_.")), 1, 6, -1)
		var syms []ktab.Symbol
		addr := uint64(0xffffffff81000000)
		for i := 0; i < n; i++ {
			addr += uint64(rapid.SampledFrom([]int{0, 1, 16, 300}).Draw(rt, "gap"))
			syms = append(syms, ktab.Symbol{Addr: addr, Type: rapid.SampledFrom([]byte("Tt")).Draw(rt, "type"), Name: "x" + name.Draw(rt, "name")})
		}
		tab, err := ktab.Build(syms, ktab.Options{BaseRelative: true, AllSymbols: true})
		if err != nil {
			rt.Fatal(err)
		}
		rs := allResolvers(rt, tab)
		o := newOracle(rs[0])
		for range 20 {
			q := "x" + name.Draw(rt, "query")
			want := o.matches(q)
			for _, c := range rs {
				r := lookupNameAll(c, nil, q)
				if len(want) == 0 && (r.ok || r.found || r.matches != nil) ||
					len(want) > 0 && (r.addr != want[0] || !slices.Equal(r.matches, want)) {
					rt.Fatalf("%s %q: %+v, want %x", c.Variant(), q, r, want)
				}
			}
			a := tab.Syms[0].Addr - 1 + uint64(rapid.IntRange(0, int(tab.Syms[len(tab.Syms)-1].Addr-tab.Syms[0].Addr)+2).Draw(rt, "addr"))
			var want2 string
			if rs[0].IsKsymAddr(a) {
				pos, size, off := o.pos(a)
				want2 = fmt.Sprintf("%s+%#x/%#x", o.syms[pos].Name, off, size)
			} else {
				want2 = fmt.Sprintf("0x%x", a)
			}
			for _, c := range rs {
				if got := c.SprintSymbol(nil, a); got != want2 {
					rt.Fatalf("%s sprint %#x: %q, want %q", c.Variant(), a, got, want2)
				}
			}
		}
	})
}
