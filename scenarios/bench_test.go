package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// The simulator's own speed on the default image (kpsim run many --n 50000
// --patches series / none): image generation, then one run. ns/op is the
// whole command's work; compare two benchmark runs with benchstat.

func benchMany(b *testing.B, n int, sw sim.Switches) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		o := DefaultManyOptions()
		o.N = n
		s, err := PrepareMany(o)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := RunMany(s, []RunSpec{{sw.Name(), sw}}, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Runs[0].TotalOps), "kernel-ops")
		b.ReportMetric(float64(rep.Runs[0].RetainedBytes)/(1<<20), "retained-MiB")
	}
}

func BenchmarkManySeries50k(b *testing.B) { benchMany(b, 50000, sim.PresetSeries.Set) }
func BenchmarkManyNone50k(b *testing.B)   { benchMany(b, 50000, 0) }
func BenchmarkManySeries20k(b *testing.B) { benchMany(b, 20000, sim.PresetSeries.Set) }
func BenchmarkManyNone20k(b *testing.B)   { benchMany(b, 20000, 0) }
