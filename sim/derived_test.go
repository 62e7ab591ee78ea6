package sim_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

func TestDerivedBuildsOnce(t *testing.T) {
	var d sim.Derived
	type key struct{}
	var builds atomic.Int32
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = sim.DerivedValue(&d, key{}, func() *int { builds.Add(1); v := 42; return &v })
		}()
	}
	wg.Wait()
	if builds.Load() != 1 {
		t.Fatalf("built %d times, want 1", builds.Load())
	}
	for _, p := range got {
		if p != got[0] || *p != 42 {
			t.Fatalf("runs got different values")
		}
	}
	type other struct{}
	if v := sim.DerivedValue(&d, other{}, func() int { return 7 }); v != 7 {
		t.Fatalf("second key: %d", v)
	}
}

func ExampleDerivedValue() {
	var d sim.Derived // in practice image.Kernel.Derived()
	type sortedKey struct{}
	sorted := sim.DerivedValue(&d, sortedKey{}, func() []int { return []int{1, 2, 3} })
	_ = sorted
}
