package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// TestGrowthWithN: at N = 5k, 10k, 20k, 40k the upstream run's hash-chain
// walks grow quadratically (each doubling of N multiplies them by ~4), its
// table scans and decodes linearly (~2), and the none/series cycle ratio
// grows with N (the series leaves 2 get_kprobe per probe: still quadratic,
// from a far smaller base). Counts only: no timing.
func TestGrowthWithN(t *testing.T) {
	if testing.Short() {
		t.Skip("registers 37.5k probes in two modes")
	}
	ns := []int{2500, 5000, 10000, 20000}
	type point struct {
		visits, scans, decodes uint64
		ratio                  float64
	}
	var pts []point
	visit, scan, dec := fixture.Op(t, "kprobe.hash.visit"), fixture.Op(t, "jump_label.scan.entry"), fixture.Op(t, "x86.decode.insn")
	for _, n := range ns {
		o := testManyOptions()
		o.N, o.Image = n, smallImage(7)
		s := mustSetup(t, o)
		rep, err := RunMany(s, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}}, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		none, series := rep.Runs[0], rep.Runs[1]
		if none.Digest != series.Digest || none.Optimized != n {
			t.Fatalf("n=%d: digests %s/%s, optimized %d", n, none.Digest, series.Digest, none.Optimized)
		}
		pts = append(pts, point{
			visits:  none.Counters.Total(visit),
			scans:   none.Counters.Total(scan),
			decodes: none.Counters.Total(dec),
			ratio:   none.EstCycles / series.EstCycles,
		})
	}
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if g := float64(b.visits) / float64(a.visits); g < 3.5 || g > 4.5 {
			t.Errorf("n %d->%d: hash visits grew %.2fx, want ~4 (quadratic)", ns[i-1], ns[i], g)
		}
		if g := float64(b.scans) / float64(a.scans); g < 1.9 || g > 2.1 {
			t.Errorf("n %d->%d: jump-label entries scanned grew %.2fx, want ~2 (linear)", ns[i-1], ns[i], g)
		}
		if g := float64(b.decodes) / float64(a.decodes); g < 1.8 || g > 2.2 {
			t.Errorf("n %d->%d: decodes grew %.2fx, want ~2 (linear)", ns[i-1], ns[i], g)
		}
		if b.ratio <= a.ratio {
			t.Errorf("n %d->%d: none/series ratio fell from %.1f to %.1f", ns[i-1], ns[i], a.ratio, b.ratio)
		}
	}
	t.Logf("n, hash visits, jump-label entries, decodes, none/series cycles: %v %+v", ns, pts)
}
