package kallsyms

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/kpsim/kpsim/internal/fixture"
)

// The micro-benchmarks behind the cost weights in weights.go. Each runs the
// modelled kernel operation's memory pattern at the kernel's table sizes
// (≈150k symbols), so ns/op × the clock gives the weight.

const benchSyms = 150000

// BenchmarkWeightExpandCompare: kallsyms_expand_symbol + compare_symbol_name
// on a random record: read a length byte, then each token index → token
// table entry → copy its bytes, then compare with the wanted name.
func BenchmarkWeightExpandCompare(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	tokens, blob, offs := fixture.CompressedNames(rng, benchSyms, 10)
	// Token table as the kernel lays it out: NUL-terminated strings plus a
	// u16 index, copied byte by byte like kallsyms_expand_symbol's loop.
	var ttab []byte
	var tidx [256]uint16
	for i, t := range tokens {
		tidx[i] = uint16(len(ttab))
		ttab = append(ttab, t...)
		ttab = append(ttab, 0)
	}
	want := []byte("tcp_sock_release")
	var buf [512]byte
	pick := make([]int, 1<<16)
	for i := range pick {
		pick[i] = offs[rng.IntN(len(offs))]
	}
	b.ResetTimer()
	var sink int
	for i := 0; i < b.N; i++ {
		o := pick[i&(1<<16-1)]
		n := int(blob[o])
		w := 0
		for _, t := range blob[o+1 : o+1+n] {
			for p := int(tidx[t]); ttab[p] != 0; p++ {
				buf[w] = ttab[p]
				w++
			}
		}
		k := 0
		for k < w && k < len(want) && buf[k] == want[k] {
			k++
		}
		sink += k
	}
	_ = sink
}

// BenchmarkWeightAddrProbe: one step of a binary search over a 4-byte
// offset table of 150k entries (600 KB: L2-resident on this machine) with
// unpredictable branches.
func BenchmarkWeightAddrProbe(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	tab := make([]int32, benchSyms)
	for i := range tab {
		tab[i] = int32(i * 97)
	}
	keys := make([]int32, 1<<16)
	for i := range keys {
		keys[i] = int32(rng.IntN(benchSyms * 97))
	}
	steps := 0
	b.ResetTimer()
	for i := 0; i < b.N; {
		key := keys[i&(1<<16-1)]
		lo, hi := 0, len(tab)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if tab[mid] <= key {
				lo = mid
			} else {
				hi = mid
			}
			steps++
			i++
		}
	}
	_ = sort.Search
}

// BenchmarkWeightSeqScan: a sequential scan over 24-byte Elf64_Sym entries
// comparing a field, as find_kallsyms_symbol does per module symbol.
func BenchmarkWeightSeqScan(b *testing.B) {
	// 24 bytes like Elf64_Sym: st_name/st_info/st_other/st_shndx, st_value, st_size.
	tab := make([][3]uint64, 4096)
	for i := range tab {
		tab[i][1] = uint64(i * 64)
	}
	b.ResetTimer()
	var best uint64
	for i := 0; i < b.N; i++ {
		v := tab[i&4095][1]
		if v <= 100000 && v > best {
			best = v
		}
	}
	_ = best
}
