package scenarios

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestClockFor: the clock comes from --ghz, else the cost table's clock
// header, else the registered weights' 2.6 GHz reference machine.
func TestClockFor(t *testing.T) {
	parse := func(text string) *sim.CostTable {
		ct, err := sim.ParseCosts("my.costs", strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	for _, tc := range []struct {
		name   string
		costs  *sim.CostTable
		ghz    float64
		want   float64
		source string
	}{
		{"documented", sim.DefaultCosts(), 0, 2.6, "reference machine (AMD EPYC, 2.6 GHz"},
		{"nil", nil, 0, 2.6, "reference machine"},
		{"no clock header", parse("kmalloc 40\n"), 0, 2.6, "reference machine"},
		{"calibrated", parse("#: cpu: AMD EPYC\n#: clock: no perf_event cycle counter: CLOCK_THREAD_CPUTIME_ID ns x 2096 MHz (cpu MHz in /proc/cpuinfo; TSC measured 2096.1 MHz)\n"), 0, 2.096,
			"my.costs's measured times were converted at (its clock header: ns x 2096 MHz, cpu MHz in /proc/cpuinfo), on AMD EPYC"},
		{"perf cycles", parse("#: clock: perf_event_open cycles (user); Go-timed ops: ns x 3500 MHz (model name in /proc/cpuinfo)\n"), 0, 3.5, "ns x 3500 MHz, model name in /proc/cpuinfo), on an unnamed CPU"},
		{"unreadable header", parse("#: clock: rdtsc\n"), 0, 2.6, "reference machine"},
		{"--ghz", parse("#: clock: ns x 2096 MHz\n"), 3.1, 3.1, "--ghz"},
	} {
		c := ClockFor(tc.costs, tc.ghz)
		if c.GHz != tc.want || !strings.Contains(c.Source, tc.source) {
			t.Errorf("%s: %+v, want %v GHz from %q", tc.name, c, tc.want, tc.source)
		}
		if ms := c.MS(c.GHz * 1e6); ms < 0.999999 || ms > 1.000001 {
			t.Errorf("%s: %v GHz x 1 ms of cycles is %v ms", tc.name, c.GHz, ms)
		}
	}
	if z := (Clock{}); z.Valid() || z.Or().GHz != ReferenceGHz {
		t.Errorf("the zero Clock: valid %v, or %+v", z.Valid(), z.Or())
	}
}
