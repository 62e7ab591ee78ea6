package scenarios

import (
	"fmt"
	"math"
	"testing"
)

func TestFitGrowth(t *testing.T) {
	ns := []int{5000, 10000, 20000, 40000, 50000}
	for _, tc := range []struct {
		a, b, c, slope float64
	}{
		{0, 0, 3, 2},        // pure N²
		{0, 7, 0, 1},        // pure N
		{0, 40, 0.002, -1},  // mixed: slope between 1 and 2
		{1e6, 40, 0.002, 0}, // with a constant
	} {
		ys := make([]float64, len(ns))
		for i, n := range ns {
			x := float64(n)
			ys[i] = tc.a + tc.b*x + tc.c*x*x
		}
		f := fitGrowth(ns, ys)
		ymax, nmax := ys[len(ys)-1], float64(ns[len(ns)-1])
		close := func(got, want, scale float64) bool { return math.Abs(got-want) <= 1e-9*scale }
		if !close(f.A, tc.a, ymax) || !close(f.B, tc.b, ymax/nmax) || !close(f.C, tc.c, ymax/nmax/nmax) || f.R2 < 0.999999 {
			t.Errorf("%+v: fit %+v", tc, f)
		}
		if tc.slope > 0 && math.Abs(f.Slope-tc.slope) > 1e-9 {
			t.Errorf("%+v: slope %v", tc, f.Slope)
		}
		if tc.slope < 0 && (f.Slope <= 1 || f.Slope >= 2) {
			t.Errorf("%+v: slope %v not between 1 and 2", tc, f.Slope)
		}
	}
	// Two points: a line through both.
	f := fitGrowth([]int{10, 20}, []float64{5, 9})
	if math.Abs(f.A-1) > 1e-9 || math.Abs(f.B-0.4) > 1e-9 || f.C != 0 {
		t.Errorf("two points: %+v", f)
	}
}

func TestParseNs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"5000:50000:5000", []int{5000, 10000, 15000, 20000, 25000, 30000, 35000, 40000, 45000, 50000}, false},
		{"100:250:100", []int{100, 200}, false},
		{"300,100,200", []int{100, 200, 300}, false},
		{"100", nil, true},
		{"100,100", nil, true},
		{"0:10:5", nil, true},
		{"10:5:1", nil, true},
		{"1:2", nil, true},
		{"a,b", nil, true},
		{"1:100000:1", nil, true},
	} {
		got, err := ParseNs(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if !tc.bad && len(got) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
		for i := range tc.want {
			if i < len(got) && got[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
				break
			}
		}
	}
}

func FuzzParseNs(f *testing.F) {
	for _, s := range []string{"5000:50000:5000", "1,2,3", "100:250:100", "0:1:1", "9:3:1", "1:2", ",", "1,,2", "-1,2", "1:1000000:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := ParseNs(s)
		if err != nil {
			return
		}
		if len(ns) < 2 || len(ns) > 1001 {
			t.Fatalf("%q: %d values", s, len(ns))
		}
		for i, n := range ns {
			if n < 1 || i > 0 && n <= ns[i-1] {
				t.Fatalf("%q: %v not positive and strictly increasing", s, ns)
			}
		}
	})
}

func ExampleParseNs() {
	ns, _ := ParseNs("5000:20000:5000")
	fmt.Println(ns)
	ns, _ = ParseNs("20000,5000,10000")
	fmt.Println(ns)
	// Output:
	// [5000 10000 15000 20000]
	// [5000 10000 20000]
}
