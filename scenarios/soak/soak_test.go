package soak

import (
	"bytes"
	"github.com/kpsim/kpsim/internal/mutant"
	"github.com/kpsim/kpsim/sim"
	"testing"
)

func loadImage(t testing.TB) *Image {
	t.Helper()
	img, err := LoadImage()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestSmallCampaignNoDivergence(t *testing.T) {
	img := loadImage(t)
	s, err := Run(img, Options{Seed: 1, Steps: 3000, CampaignSteps: 1500, Sets: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	s.Write(&b, true)
	t.Log(b.String())
	for _, d := range s.Divergences {
		t.Errorf("campaign %d: %s", d.Campaign, d)
	}
}

func TestInjectedOffByOneFoundAndShrunk(t *testing.T) {
	img := loadImage(t)
	defer mutant.SetTreeRangeOffByOne(true)()
	set, err := sim.ParseSwitches("series")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Run(img, Options{Seed: 3, Steps: 2000, CampaignSteps: 2000, Patches: []sim.Switches{set}, Workers: 1, Shrink: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Divergences) == 0 {
		t.Fatal("the injected off-by-one was not found")
	}
	d := s.Divergences[0]
	t.Logf("found: %s", d)
	if d.Shrunk == nil {
		t.Fatal("not shrunk")
	}
	for _, st := range d.Shrunk.Steps {
		t.Logf("  %s", st.Format())
	}
	t.Logf("shrunk: %s", d.Shrunk)
	if n := len(d.Shrunk.Steps); n > 4 {
		t.Errorf("shrunk to %d steps, want at most 4", n)
	}
}
