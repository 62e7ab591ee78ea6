package scenarios

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// fastPathSpecs are the switch sets the fast-path differential runs: the
// upstream and the presets, and each alternative design (their indexes
// sit beside the fast kprobe_table: the rhashtable has none, the B-trees
// keep the hash table).
func fastPathSpecs() []RunSpec {
	series := sim.PresetSeries.Set
	sets := []sim.Switches{
		0, series, sim.PresetAll.Set,
		sim.Switches(0).WithHashBits(10),
		series.With(sim.KprobeRhashtable),
		sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree),
		series.With(sim.ReservationBtree),
	}
	out := make([]RunSpec, len(sets))
	for i, ss := range sets {
		out[i] = RunSpec{Name: ss.Name(), Switches: ss}
	}
	return out
}

// sameRun requires runs a and b (named an and bn in the errors) to have
// the same full counter matrix (every op of every phase), decisions and
// reasons digests and kernel-memory figures.
func sameRun(t *testing.T, an string, a *RunResult, bn string, b *RunResult) {
	t.Helper()
	ops, phases := sim.Ops(), sim.Phases()
	for ph := range phases {
		for op := range ops {
			if x, y := a.Counters.Get(sim.PhaseAt(ph), sim.OpAt(op)), b.Counters.Get(sim.PhaseAt(ph), sim.OpAt(op)); x != y {
				t.Errorf("%s: phase %s op %s: %s %d, %s %d", a.Name, phases[ph].Name, ops[op].Name, an, x, bn, y)
			}
		}
	}
	if a.Digest != b.Digest || a.WhyDigest != b.WhyDigest {
		t.Errorf("%s: digests %s %s/%s, %s %s/%s", a.Name, an, a.Digest, a.WhyDigest, bn, b.Digest, b.WhyDigest)
	}
	if fmt.Sprint(a.KernelMem) != fmt.Sprint(b.KernelMem) {
		t.Errorf("%s: kernel memory %s %v, %s %v", a.Name, an, a.KernelMem, bn, b.KernelMem)
	}
}

// runBothWays runs the specs on s with the simulator's fast paths and
// again with the straightforward walks (ManyOptions.Walk, i.e.
// machine.Config.Walk: the chain walks of
// get_kprobe, the slot-page walks, the linear table scans) and requires
// the same full counter matrix (every op of every phase), kernel-memory
// figures, decisions digest and reasons digest, run by run.
func runBothWays(t *testing.T, s *ManySetup, specs []RunSpec) *ManyReport {
	t.Helper()
	run := func(walk bool) *ManyReport {
		ws := *s
		ws.Opts.Walk = walk
		rep, err := RunMany(&ws, specs, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	fast, walk := run(false), run(true)
	for i, f := range fast.Runs {
		sameRun(t, "fast", f, "walk", walk.Runs[i])
		if f.TotalOps == 0 || f.Registered == 0 {
			t.Fatalf("%s: nothing counted or registered (registered %d, rejected %v, not tried %d)", f.Name, f.Registered, f.Rejected, f.NotTried)
		}
	}
	return fast
}

// TestFastPathsMatchWalk: whole scenarios, fast paths against the
// straightforward walks, through every front door, on generated targets
// (long hash chains, many slot pages) and on mixed image probes
// (aggregation, refusals of every kind, unregistering aggregated probes).
func TestFastPathsMatchWalk(t *testing.T) {
	n := 2500
	if race.Enabled || testing.Short() {
		n = 300
	}
	specs := fastPathSpecs()
	cases := []struct {
		name  string
		setup func(o *ManyOptions)
	}{
		{"register_kprobes", func(o *ManyOptions) {}},
		{"register_kprobe/mixed", func(o *ManyOptions) {
			o.N, o.ImageProbes, o.Mixed, o.Via, o.OptimizeEvery = n/5, n/2, true, doors.ViaRegisterKprobe, 17
		}},
		// The event doors take traceable functions (as TestFrontDoorsSameDecisions).
		{"kprobe_events/each", func(o *ManyOptions) {
			o.Via, o.Enable, o.LinesPerWrite = doors.ViaKprobeEvents, doors.EnableEach, 7
			o.Targets, o.Placement, o.Offset, o.OptimizeEvery = TargetsTraceable, PlaceOffset, 5, 13
		}},
		{"perf_kprobe", func(o *ManyOptions) {
			o.Via = doors.ViaPerfKprobe
			o.Targets, o.Placement, o.Offset, o.OptimizeEvery = TargetsTraceable, PlaceOffset, 5, 13
		}},
	}
	// One image for every case (generation is most of the time under -race).
	cfg := smallImage(15)
	cfg.SampleFunctions = n // only the probed sample functions
	cfg.ProbeTargets = synth.SampleSize(cfg, n)
	k := fixture.Generate(t, cfg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := testManyOptions()
			o.N, o.Image = n, cfg
			tc.setup(&o)
			s, err := PrepareManyOn(k, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Targets) > n {
				s.Targets = s.Targets[:n]
			}
			sp := specs
			switch {
			case tc.name != "register_kprobes" && tc.name != "register_kprobe/mixed":
				sp = specs[:2] // the designs through the other doors: same registry calls
			case tc.name == "register_kprobes" && (race.Enabled || testing.Short()):
				sp = specs[:3] // CI time: the designs run on the mixed probes
			}
			rep := runBothWays(t, s, sp)
			if tc.name == "register_kprobe/mixed" {
				r := rep.Runs[0]
				if len(r.Rejected) < 2 || r.Optimized == 0 {
					t.Fatalf("mixed placements too tame: rejected %v optimized %d", r.Rejected, r.Optimized)
				}
			}
		})
	}
}
