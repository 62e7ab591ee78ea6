package soak

import "testing"

// BenchmarkCampaign runs one campaign of b.N steps on none and two sampled
// sets: ns/op is the cost of one step on three machines, compared.
func BenchmarkCampaign(b *testing.B) {
	img := loadImage(b)
	o := Options{Seed: 1, Steps: b.N, CampaignSteps: b.N, Sets: 2, Workers: 1}
	b.ResetTimer()
	s, err := Run(img, o, nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(s.Divergences) > 0 {
		b.Fatal(s.Divergences[0])
	}
}
