package scenarios

import (
	"slices"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestPhaseOrderComplete: every phase this binary registers has its place
// in PhaseOrder, and PhaseOrder names no phase that does not exist (the
// scenarios package links every front door, so it registers them all).
func TestPhaseOrderComplete(t *testing.T) {
	registered := map[string]bool{}
	for _, p := range sim.Phases() {
		registered[p.Name] = true
		if !slices.Contains(PhaseOrder, p.Name) {
			t.Errorf("phase %q is registered but missing from PhaseOrder", p.Name)
		}
	}
	seen := map[string]bool{}
	for _, name := range PhaseOrder {
		if !registered[name] {
			t.Errorf("PhaseOrder names %q, which no package registers", name)
		}
		if seen[name] {
			t.Errorf("PhaseOrder names %q twice", name)
		}
		seen[name] = true
	}
	if got := PhaseNames(); !slices.Equal(got, PhaseOrder) {
		t.Errorf("PhaseNames() = %v, want PhaseOrder", got)
	}
}
