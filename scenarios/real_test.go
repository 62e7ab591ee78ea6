package scenarios

import (
	"os"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// mustPrepareFor is PrepareManyFor for a test, which fails on an error.
func mustPrepareFor(t testing.TB, k *image.Kernel, o ManyOptions) *ManySetup {
	t.Helper()
	s, err := PrepareManyFor(k, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// longRealKernel is realKernel for a test -short skips, saying why.
func longRealKernel(t *testing.T, why string) *image.Kernel {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	return realKernel(t)
}

func realKernel(t testing.TB) *image.Kernel {
	const p = "../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	k, err := load.Open(p) // booted for alternative.DefaultCPU
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// realMany prepares n generated targets on the real kernel (skipped in
// short mode), with the options it used.
func realMany(t *testing.T, n int) (ManyOptions, *ManySetup) {
	t.Helper()
	if testing.Short() {
		t.Skip("loads and probes the real kernel")
	}
	o := testManyOptions()
	o.N = n
	s, err := PrepareManyFor(realKernel(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return o, s
}

// TestRealKernelSameDecisions: on the Debian 6.1 kernel, the generated
// targets (every ablation run) and a probe on every 7th function of the
// kernel reach the same decisions in every mode.
func TestRealKernelSameDecisions(t *testing.T) {
	o, s := realMany(t, 2000)
	rep := checkSameDecisions(t, s, allSpecs(), "")
	if r := rep.Runs[0]; r.Registered != 2000 || r.Optimized != 2000 {
		t.Fatalf("targets on the real kernel: registered %d optimized %d", r.Registered, r.Optimized)
	}
	k := realKernel(t)
	o.Targets, o.Via = TargetsAllFunctions, doors.ViaRegisterKprobe
	all := mustPrepareFor(t, k, o)
	var sample []Target
	for i := 0; i < len(all.Targets); i += 7 {
		sample = append(sample, all.Targets[i])
	}
	all.Targets = sample
	rep = checkSameDecisions(t, all, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}, "")
	if r := rep.Runs[0]; r.Rejected["EINVAL"] == 0 || r.Optimized == 0 {
		t.Fatalf("every-function sample: registered %d optimized %d rejected %v", r.Registered, r.Optimized, r.Rejected)
	}
}

// TestDebianProfileMatchesRealKernel: the synthetic kernel calibrated to
// the Debian kernel's counts (synth.Debian61Config), with the targets placed
// as on the real image (after _etext), costs what the real kernel costs:
// total estimated cycles within 5% for none and for the series.
func TestDebianProfileMatchesRealKernel(t *testing.T) {
	o, real := realMany(t, 3000)
	o.Image = synth.Debian61Config()
	o.Image.ProbeTargetsAt = 1
	syn := mustSetup(t, o)
	specs := []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}}
	rr, err := RunMany(real, specs, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := RunMany(syn, specs, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		a, b := rr.Runs[i].EstCycles, rs.Runs[i].EstCycles
		if d := (b - a) / a; d > 0.05 || d < -0.05 {
			t.Errorf("%s: real kernel %.3g cycles, debian-6.1 profile %.3g (%+.1f%%)", specs[i].Name, a, b, 100*d)
		}
		t.Logf("%s: real %.4g, synthetic debian-6.1 %.4g cycles", specs[i].Name, a, b)
	}
}
