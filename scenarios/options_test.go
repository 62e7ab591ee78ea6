package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// testManyOptions are DefaultManyOptions on the 6.1 reference image
// (synth.DefaultConfig, the image these tests were written on): they test
// the scenario machinery, which does not depend on the generation, and the
// 6.1 image runs them in half the time of the 7.3 default under -race.
// TestDefaultManyOptionsIsSeriesBase runs the default itself; each
// generation's behaviour has its own tests (docs/generations.md).
func testManyOptions() ManyOptions {
	o := DefaultManyOptions()
	o.Image = synth.DefaultConfig()
	return o
}

// TestDefaultManyOptionsIsSeriesBase: the default image is 7.3's, the
// series base, and the series keeps its decisions there.
func TestDefaultManyOptionsIsSeriesBase(t *testing.T) {
	o := DefaultManyOptions()
	if o.Image.Gen != image.Gen73 || o.Image.Gen.String() != sim.SeriesBase {
		t.Fatalf("default image generation %v, want %s", o.Image.Gen, sim.SeriesBase)
	}
	o.N = 300
	o.Image.SampleFunctions = o.N // the sample's 50,000 functions would only slow the test
	s := mustSetup(t, o)
	if s.Kernel.Config.Gen != image.Gen73 || !s.Kernel.Config.IBT || !s.Kernel.Config.CallPadding {
		t.Fatalf("image: gen %v IBT %v call padding %v", s.Kernel.Config.Gen, s.Kernel.Config.IBT, s.Kernel.Config.CallPadding)
	}
	rep, err := RunMany(s, []RunSpec{{Name: "none"}, {Name: "series", Switches: sim.PresetSeries.Set}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var digests []string
	for _, r := range rep.Runs {
		if r.Registered != o.N {
			t.Fatalf("%s: %d of %d registered", r.Name, r.Registered, o.N)
		}
		digests = append(digests, r.Digest+" "+r.WhyDigest)
	}
	if digests[0] != digests[1] {
		t.Errorf("series changes 7.3's decisions: %v", digests)
	}
}
