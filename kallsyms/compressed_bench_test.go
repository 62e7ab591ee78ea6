package kallsyms

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// BenchmarkCompressed: Go ns per lookup of each variant (hit, miss,
// sprint_symbol, full walk) on /proc/kallsyms when readable, else the
// synthetic image. These feed a scenario's *_ns figures.
func BenchmarkCompressed(b *testing.B) {
	var tab *ktab.Tables
	func() {
		defer func() { _ = recover() }()
		tab = procTables(b)
	}()
	if tab == nil || procSkip != "" {
		tab = synthTables(b)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const k = 4096
	hits, misses, addrs := make([]string, k), make([]string, k), make([]uint64, k)
	for i := range k {
		s := tab.Syms[rng.IntN(tab.NumSyms)]
		hits[i], misses[i], addrs[i] = s.Name, s.Name+"_nx", s.Addr+uint64(rng.IntN(16))
	}
	for _, v := range AllVariants() {
		c, err := NewCompressed(tab, v, CompressedOptions{})
		if err != nil {
			b.Fatal(err)
		}
		c.PrepareBatch(nil)
		b.Run(v.String()+"/hit", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.LookupName(nil, hits[i%k])
			}
		})
		b.Run(v.String()+"/miss", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.LookupName(nil, misses[i%k])
			}
		})
		b.Run(v.String()+"/sprint_symbol", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.SprintSymbol(nil, addrs[i%k])
			}
		})
		b.Run(v.String()+"/walk", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.OnEachSymbol(nil, func([]byte, uint64) int { return 0 })
			}
		})
	}
}
