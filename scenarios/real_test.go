package scenarios

import (
	"os"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/sim"
)

func realKernel(t *testing.T) *image.Kernel {
	const p = "../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	k, err := load.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.ApplyReturns(); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRealKernelSameDecisions: on the Debian 6.1 kernel, the generated
// targets (every ablation run) and a probe on every 7th function of the
// kernel reach the same decisions in every mode.
func TestRealKernelSameDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and probes the real kernel")
	}
	k := realKernel(t)
	o := DefaultManyOptions()
	o.N = 2000
	s, err := PrepareManyFor(k, o)
	if err != nil {
		t.Fatal(err)
	}
	rep := checkSameDecisions(t, s, allSpecs(), "")
	if r := rep.Runs[0]; r.Registered != 2000 || r.Optimized != 2000 {
		t.Fatalf("targets on the real kernel: registered %d optimized %d", r.Registered, r.Optimized)
	}
	k = realKernel(t)
	o.AllFunctions, o.Batch = true, false
	all, err := PrepareManyFor(k, o)
	if err != nil {
		t.Fatal(err)
	}
	var sample []ProbeSpec
	for i := 0; i < len(all.Probes); i += 7 {
		sample = append(sample, all.Probes[i])
	}
	all.Probes = sample
	rep = checkSameDecisions(t, all, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}, "")
	if r := rep.Runs[0]; r.Rejected["EINVAL"] == 0 || r.Optimized == 0 {
		t.Fatalf("every-function sample: registered %d optimized %d rejected %v", r.Registered, r.Optimized, r.Rejected)
	}
}
