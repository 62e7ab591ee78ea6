package sim

import "math"

// fsum accumulates a sum of products n*w exactly and rounds it once, so a
// report's cycle figure does not depend on the order cells are visited in
// (name order today, anything tomorrow): Shewchuk's non-overlapping
// partials, as Python's math.fsum. Each product enters as its rounded
// value plus the rounding error FMA recovers, so the result is the
// correctly rounded sum of the exact products.
type fsum struct {
	partials []float64
}

func (s *fsum) addProduct(n uint64, w float64) {
	x := float64(n) // exact: counts stay far below 2^53
	p := x * w
	s.add(p)
	s.add(math.FMA(x, w, -p))
}

func (s *fsum) add(x float64) {
	if x == 0 {
		return
	}
	i := 0
	for _, y := range s.partials {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			s.partials[i] = lo
			i++
		}
		x = hi
	}
	s.partials = append(s.partials[:i], x)
}

// value rounds the exact sum to the nearest float64 (ties as fsum does).
func (s *fsum) value() float64 {
	n := len(s.partials)
	if n == 0 {
		return 0
	}
	n--
	hi := s.partials[n]
	lo := 0.0
	for n > 0 {
		x := hi
		n--
		y := s.partials[n]
		hi = x + y
		lo = y - (hi - x)
		if lo != 0 {
			break
		}
	}
	// Half-way case: the rounding of hi+lo must account for the next partial.
	if n > 0 && ((lo < 0 && s.partials[n-1] < 0) || (lo > 0 && s.partials[n-1] > 0)) {
		y := lo * 2
		x := hi + y
		if y == x-hi {
			hi = x
		}
	}
	return hi
}
