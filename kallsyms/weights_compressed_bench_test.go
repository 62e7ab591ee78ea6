package kallsyms

import (
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// Micro-benchmarks behind weights_compressed.go: each runs one modelled
// primitive's loop over the synthetic image's compressed table (72k
// records, same shape as a distro kernel's) and reports ns per unit with
// b.ReportMetric. go test -run '^$' -bench WeightC ./kallsyms/

func weightTables(b *testing.B) (*ktab.Tables, []int) {
	t := synthTables(b)
	offs := make([]int, t.NumSyms)
	p := 0
	for i := range offs {
		offs[i] = p
		p, _ = ktab.NextRecord(t.Names, p)
	}
	return t, offs
}

func randIdx(n int) []int {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]int, 1<<16)
	for i := range out {
		out[i] = rng.IntN(n)
	}
	return out
}

// BenchmarkWeightCHop: get_symbol_offset's loop from a random marker.
func BenchmarkWeightCHop(b *testing.B) {
	t, _ := weightTables(b)
	pick := randIdx(t.NumSyms)
	var hops, sink int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pos := pick[i&(1<<16-1)]
		p := int(t.Markers[pos>>8])
		for k := 0; k < pos&0xFF; k++ {
			l := int(t.Names[p])
			if l&0x80 != 0 {
				l = (l&0x7F | int(t.Names[p+1])<<7) + 1
			}
			p += l + 1
		}
		hops += pos & 0xFF
		sink += p
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hops), "ns/hop")
	_ = sink
}

// BenchmarkWeightCTok: decode every token of random records without
// writing (the token-index load + token string walk).
func BenchmarkWeightCTok(b *testing.B) {
	t, offs := weightTables(b)
	benchTokens(b, t, randRecords(t, offs))
}

// benchTokens decodes every token of the records at recs (offsets into
// kallsyms_names, taken in turn) without writing, reporting ns/tok.
func benchTokens(b *testing.B, t *ktab.Tables, recs []int) {
	var toks, sink int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := recs[i%len(recs)]
		l := int(t.Names[o])
		for _, tk := range t.Names[o+1 : o+1+l] {
			for p := int(t.TokenIndex[tk]); t.TokenTable[p] != 0; p++ {
				sink += int(t.TokenTable[p])
			}
		}
		toks += l
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(toks), "ns/tok")
	_ = sink
}

// randRecords is 64k offsets of random records of t.
func randRecords(t *ktab.Tables, offs []int) []int {
	recs := randIdx(t.NumSyms)
	for i, j := range recs {
		recs[i] = offs[j]
	}
	return recs
}

// BenchmarkWeightCExpand: kallsyms_expand_symbol on random records; the
// chr_out weight is (this − BenchmarkWeightCTok's per-record time) / chars.
func BenchmarkWeightCExpand(b *testing.B) {
	t, offs := weightTables(b)
	tl := benchExpand(b, t, randRecords(t, offs))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
	b.ReportMetric(float64(tl.chrOut)/float64(b.N), "chr/record")
}

// benchExpand runs kallsyms_expand_symbol on the records at recs (taken
// in turn), reporting ns/tok and chr/tok; it returns the tally.
func benchExpand(b *testing.B, t *ktab.Tables, recs []int) tally {
	c, _ := NewCompressed(t, Baseline, CompressedOptions{})
	var buf [KsymNameLen]byte
	var tl tally
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.expand(recs[i%len(recs)], &buf, &tl)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tl.tok), "ns/tok")
	b.ReportMetric(float64(tl.chrOut)/float64(tl.tok), "chr/tok")
	return tl
}

// BenchmarkWeightCChrCmp: strcmp of a name with the next name in name
// order (long shared prefixes), per character compared.
func BenchmarkWeightCChrCmp(b *testing.B) {
	t, _ := weightTables(b)
	o := newOracle(&Compressed{t: t})
	pick := randIdx(t.NumSyms - 1)
	bs := make([][]byte, len(o.byName))
	for j := range bs {
		bs[j] = []byte(o.syms[o.byName[j]].Name)
	}
	var tl tally
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := pick[i&(1<<16-1)]
		strcmpCount(o.syms[o.byName[j]].Name, bs[j+1], &tl)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tl.chrCmp), "ns/chr")
}

// BenchmarkWeightCLd3: get_symbol_seq at random name positions (3 byte
// loads + shifts from the 3·N-byte table).
func BenchmarkWeightCLd3(b *testing.B) {
	t, _ := weightTables(b)
	pick := randIdx(t.NumSyms)
	sink := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink += ld3(t.SeqsOfNames, pick[i&(1<<16-1)])
	}
	_ = sink
}

// BenchmarkWeightCLd4: a random u32 load from a 4·N-byte offset table
// (the dynamic32 table; a marker load is from a 4·N/256-byte table and
// no slower).
func BenchmarkWeightCLd4(b *testing.B) {
	t, offs := weightTables(b)
	tbl := make([]uint32, len(offs))
	for i, o := range offs {
		tbl[i] = uint32(o)
	}
	pick := randIdx(t.NumSyms)
	sink := uint32(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink += tbl[pick[i&(1<<16-1)]]
	}
	_ = sink
}

// BenchmarkWeightCAddr: kallsyms_sym_address at a random index.
func BenchmarkWeightCAddr(b *testing.B) {
	t, _ := weightTables(b)
	pick := randIdx(t.NumSyms)
	sink := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink += t.SymAddress(pick[i&(1<<16-1)])
	}
	_ = sink
}

// BenchmarkWeightCVisit: the per-symbol overhead of a walk: one indirect
// call of a callback (cond_resched's common case is a flag test, folded in).
func BenchmarkWeightCVisit(b *testing.B) {
	n := 0
	var fn func([]byte, uint64) int = func(name []byte, a uint64) int { n += len(name); return 0 }
	buf := []byte("vfs_read")
	var resched uint32
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if fn(buf, uint64(i)) != 0 || resched != 0 {
			break
		}
	}
}

// BenchmarkWeightCTokSeq / BenchmarkWeightCExpandSeq: the same loops over
// records in table order (the walk's and a found record's cache-hot
// case): the per-token and per-character costs without the record miss.
func BenchmarkWeightCTokSeq(b *testing.B) {
	t, offs := weightTables(b)
	benchTokens(b, t, offs)
}

func BenchmarkWeightCExpandSeq(b *testing.B) {
	t, offs := weightTables(b)
	benchExpand(b, t, offs)
}

// BenchmarkWeightCChrCmpHot: strcmp's per-character loop on cache-hot
// data (the expanded name sits in the stack buffer just written).
func BenchmarkWeightCChrCmpHot(b *testing.B) {
	a := "__pfx___traceiter_xfs_attr_leaf_to_sf"
	bb := []byte("__pfx___traceiter_xfs_attr_leaf_to_sg")
	var tl tally
	for i := 0; i < b.N; i++ {
		strcmpCount(a[:i&31+6], bb, &tl)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tl.chrCmp), "ns/chr")
}
