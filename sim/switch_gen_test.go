package sim

import (
	"strings"
	"testing"
)

// Every switch says what it means on each older generation, and only
// ftrace-single-lookup is upstream anywhere (7.3's ftrace_lookup_symbols
// has the cnt == 1 fast path in its merged form).
func TestSwitchOnGenerations(t *testing.T) {
	for _, s := range AllSwitches() {
		for _, g := range []string{"6.1", "6.12"} {
			a := s.On(g)
			if a.Backport == "" {
				t.Errorf("%s on %s: no backport note", s, g)
			}
			if a.Upstream {
				t.Errorf("%s is upstream in %s: the series were written on %s", s, g, SeriesBase)
			}
		}
		if up := s.On(SeriesBase).Upstream; up != (s == FtraceSingleLookup) {
			t.Errorf("%s: upstream in %s = %v", s, SeriesBase, up)
		}
	}
	if got := FtraceSingleLookup.UpstreamIn(); len(got) != 1 || got[0] != "7.3" {
		t.Errorf("ftrace-single-lookup upstream in %v, want [7.3]", got)
	}
	// The same switch reads differently on two generations.
	if a, b := IterCanProbe.On("6.1").Backport, IterCanProbe.On("6.12").Backport; a == b || !strings.HasPrefix(a, "a backport") {
		t.Errorf("iter-can-probe: 6.1 %q, 6.12 %q", a, b)
	}
}
