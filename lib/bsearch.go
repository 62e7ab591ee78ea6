package lib

// LowerBound returns the first i in [0, n) with key(i) >= v (n if none),
// by the classic halving search (lib/bsearch.c's halving, asked for the
// lower bound rather than an equal key, as the late-init indexes need),
// calling onProbe once per step so the caller can count it:
// ceil(log2(n+1)) or fewer steps.
func LowerBound(n int, key func(int) uint64, v uint64, onProbe func()) int {
	lo, hi := 0, n
	for lo < hi {
		onProbe()
		mid := int(uint(lo+hi) >> 1)
		if key(mid) < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
