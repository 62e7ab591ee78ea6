package extable

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkWeightProbe: one step of lib/extable.c:search_extable (bsearch
// with cmp_ex_search) over a 4096-entry table of 12-byte relative
// exception_table_entry (ex_to_insn = &x->insn + x->insn), random keys —
// the size of a distro vmlinux __ex_table.
//
//	go test -run '^$' -bench Weight -count 5 ./extable/
func BenchmarkWeightProbe(b *testing.B) {
	const n = 4096
	type ent struct {
		insn int32
		_    [2]int32 // fixup, data
	}
	tab := make([]ent, n)
	base := uint64(0xffffffff81000000)
	addr := func(i int) uint64 { return base + uint64(i)*12 + uint64(int64(tab[i].insn)) }
	for i := range tab {
		tab[i].insn = int32(i*211 - i*12) // insn address = base + 211*i
	}
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([]uint64, 1<<16)
	for i := range keys {
		keys[i] = base + uint64(rng.IntN(n*211))
	}
	b.ResetTimer()
	found := 0
	for i := 0; i < b.N; {
		k := keys[i&(1<<16-1)]
		lo, num := 0, n
		for num > 0 {
			i++
			p := lo + num>>1
			a := addr(p)
			if k == a {
				found++
				break
			}
			if k > a {
				lo = p + 1
				num--
			}
			num >>= 1
		}
	}
	_ = found
}
