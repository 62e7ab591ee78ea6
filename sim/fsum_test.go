package sim

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// TestFsumExactAndOrderFree: the sum of n*w products is the correctly
// rounded exact sum (checked with big.Float), whatever the order.
func TestFsumExactAndOrderFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type term struct {
			n uint64
			w float64
		}
		terms := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) term {
			return term{
				n: rapid.Uint64Range(0, 1<<40).Draw(t, "n"),
				w: rapid.Float64Range(0, 1e4).Draw(t, "w"),
			}
		}), 0, 60).Draw(t, "terms")
		exact := new(big.Float).SetPrec(4096)
		var a fsum
		for _, x := range terms {
			a.addProduct(x.n, x.w)
			p := new(big.Float).SetPrec(4096).SetUint64(x.n)
			p.Mul(p, new(big.Float).SetPrec(4096).SetFloat64(x.w))
			exact.Add(exact, p)
		}
		want, _ := exact.Float64()
		if got := a.value(); got != want {
			t.Fatalf("fsum %v, exact %v", got, want)
		}
		perm := rapid.Permutation(terms).Draw(t, "perm")
		var b fsum
		for _, x := range perm {
			b.addProduct(x.n, x.w)
		}
		if b.value() != a.value() {
			t.Fatalf("order changed the sum: %v vs %v", b.value(), a.value())
		}
	})
	var s fsum
	s.add(1e100)
	s.add(1)
	s.add(-1e100)
	if v := s.value(); v != 1 || math.IsNaN(v) {
		t.Fatalf("1e100 + 1 - 1e100 = %v", v)
	}
}
