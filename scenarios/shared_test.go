package scenarios

import (
	"sync"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// TestConcurrentRunsShareImage: runs on one image share its read-only
// simulator structures (the fast scans, ftrace's boot records, the
// kallsyms tables), built by whichever run comes first. Runs started
// together on a fresh image (so the structures are built concurrently),
// then again one after another, must count the same, op by op, with the
// same digests and kernel memory. Under -race this proves the sharing
// race-free.
func TestConcurrentRunsShareImage(t *testing.T) {
	n := 400
	if race.Enabled || testing.Short() {
		n = 150
	}
	cfg := smallImage(16)
	cfg.SampleFunctions = n
	cfg.ProbeTargets = synth.SampleSize(cfg, n)
	k := fixture.Generate(t, cfg)
	o := testManyOptions()
	o.N, o.Image = n, cfg
	o.ImageProbes, o.Mixed, o.Via, o.OptimizeEvery = n/2, true, doors.ViaRegisterKprobe, 17
	s, err := PrepareManyOn(k, o)
	if err != nil {
		t.Fatal(err)
	}
	specs := []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}
	conc := make([]*RunResult, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := RunMany(s, []RunSpec{sp}, machine.Wire, sim.DefaultCosts(), "", nil)
			if err != nil {
				errs[i] = err
				return
			}
			conc[i] = rep.Runs[0]
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	serial, err := RunMany(s, specs, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range conc {
		w := serial.Runs[i]
		sameRun(t, "concurrent", c, "serial", w)
		if c.RetainedBytes != w.RetainedBytes {
			t.Errorf("%s: retained bytes concurrent %d, serial %d", c.Name, c.RetainedBytes, w.RetainedBytes)
		}
		if c.TotalOps == 0 || c.Registered == 0 {
			t.Fatalf("%s: nothing counted or registered", c.Name)
		}
	}
}
