package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestSampleAddsItsFixedCount: the sample adds its 50,000 functions
// whatever --n is, and the run probes the first N; asking for more probes
// than the sample holds grows it to N.
func TestSampleAddsItsFixedCount(t *testing.T) {
	for _, tc := range []struct{ sample, n, want int }{{50000, 100, 50000}, {50, 120, 120}} {
		o := DefaultManyOptions()
		o.Image = smallImage(3)
		o.Image.SampleFunctions, o.N = tc.sample, tc.n
		s := mustSetup(t, o)
		if len(s.Kernel.SymbolsByName(synth.ProbeTargetName(tc.want-1))) != 1 || len(s.Kernel.SymbolsByName(synth.ProbeTargetName(tc.want))) != 0 {
			t.Errorf("sample %d, n %d: the image does not hold exactly %d targets", tc.sample, tc.n, tc.want)
		}
		if len(s.Probes) != tc.n || s.Probes[tc.n-1].Symbol != synth.ProbeTargetName(tc.n-1) {
			t.Errorf("sample %d, n %d: %d probes", tc.sample, tc.n, len(s.Probes))
		}
	}
}

// TestOptimizerDecodesOncePerProbe: text_poke_bp's text_poke_loc_init
// decodes the JMP32 once per optimized probe, and nothing else in the
// optimizer decodes.
func TestOptimizerDecodesOncePerProbe(t *testing.T) {
	o := DefaultManyOptions()
	o.Image = smallImage(4)
	o.Image.SampleFunctions, o.N = 300, 300
	rep, err := RunMany(mustSetup(t, o), []RunSpec{{"none", 0}}, DefaultWiring, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.Optimized == 0 {
		t.Fatal("nothing optimized")
	}
	for _, ph := range r.Phases {
		if ph.Name == "optimizer" {
			if got := ph.Counts[x86.OpDecode.Name()]; got != uint64(r.Optimized) {
				t.Fatalf("optimizer phase: %d decodes for %d optimized probes", got, r.Optimized)
			}
			return
		}
	}
	t.Fatal("no optimizer phase")
}
