package scenarios

import "time"

// measureFor runs m(n) with n grown as testing.B grows b.N (predict the n
// that fills the budget from the last run, 1.2x over, at most 100x growth
// per step) until one run takes at least budget or n reaches maxN, and
// returns the last run and its n. A zero budget runs m(maxN) once: the
// fixed --n count.
func measureFor[T any](budget time.Duration, maxN int, m func(n int) (T, error)) (T, int, error) {
	if budget <= 0 {
		r, err := m(maxN)
		return r, maxN, err
	}
	n := 1
	for {
		t0 := time.Now()
		r, err := m(n)
		if err != nil {
			return r, n, err
		}
		d := time.Since(t0)
		if d >= budget || n >= maxN {
			return r, n, nil
		}
		next := n * 100
		if d > 0 {
			next = int(1.2 * float64(n) * float64(budget) / float64(d))
		}
		n = min(max(next, n+1), n*100, maxN)
	}
}
