package scenarios

import (
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// parallelSpecs: upstream, the series and a few ablation runs, so runs of
// very different lengths overlap.
func parallelSpecs(t testing.TB) []RunSpec {
	specs := []RunSpec{{Name: "none"}, {Name: "series", Switches: sim.PresetSeries.Set}}
	ab := AblationSpecs()
	return append(specs, ab[0], ab[len(ab)/2], ab[len(ab)-1])
}

// tinyImage is smallImage with only the probed sample functions (not
// kprobes_many.c's 50,000), so the set-up stays quick under -race.
func tinyImage(seed uint64) synth.Config {
	cfg := smallImage(seed)
	cfg.SampleFunctions = 0
	return cfg
}

// sameRuns compares everything but the wall times.
func sameRuns(t *testing.T, what string, a, b *ManyReport) {
	t.Helper()
	if len(a.Runs) != len(b.Runs) {
		t.Fatalf("%s: %d runs vs %d", what, len(a.Runs), len(b.Runs))
	}
	for i := range a.Runs {
		x, y := *a.Runs[i], *b.Runs[i]
		if x.Name != y.Name || x.Digest != y.Digest || x.WhyDigest != y.WhyDigest || !reflect.DeepEqual(x.Ops, y.Ops) ||
			x.TotalOps != y.TotalOps || x.EstCycles != y.EstCycles || !reflect.DeepEqual(x.KernelMem, y.KernelMem) ||
			!reflect.DeepEqual(x.Results, y.Results) || x.RetainedBytes != y.RetainedBytes || !reflect.DeepEqual(x.Rejected, y.Rejected) {
			t.Fatalf("%s: run %d (%s/%s) differs: retained %d vs %d, digest %s vs %s", what, i, x.Name, y.Name, x.RetainedBytes, y.RetainedBytes, x.Digest, y.Digest)
		}
		for j := range x.Phases {
			if x.Phases[j].Ops != y.Phases[j].Ops || !reflect.DeepEqual(x.Phases[j].Counts, y.Phases[j].Counts) {
				t.Fatalf("%s: run %s phase %s differs", what, x.Name, x.Phases[j].Name)
			}
		}
	}
}

// TestRunManyParallelMatchesSerial: runs at once (--jobs 3) give the serial
// report: the same runs in the same order, every count, digest, per-probe
// result and retained-bytes figure equal. Under -race it is also the proof
// that runs share nothing mutable (the image, the kallsyms tables, the
// package caches).
func TestRunManyParallelMatchesSerial(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image, o.ImageProbes, o.Mixed = 400, tinyImage(3), 150, true
	o.Via = doors.ViaRegisterKprobe
	specs := parallelSpecs(t)
	var reps []*ManyReport
	for _, jobs := range []int{1, 3} {
		o.Jobs = jobs
		s := mustSetup(t, o) // a fresh image each time: nothing carried over
		rep, err := RunMany(s, specs, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
	}
	sameRuns(t, "--jobs 1 vs 3", reps[0], reps[1])
	if reps[0].Runs[0].RetainedBytes == 0 {
		t.Fatal("no retained bytes counted")
	}
}

// TestRetainedBytesRepeatable: the same run, repeated at once and after
// garbage was made and collected, counts the same retained bytes (memory
// freed and reused by a run must never be mistaken for the shared image).
func TestRetainedBytesRepeatable(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image, o.Jobs = 300, tinyImage(7), 3
	s := mustSetup(t, o)
	spec := RunSpec{Name: "series", Switches: sim.PresetSeries.Set}
	var want uint64
	for round := 0; round < 2; round++ {
		rep, err := RunMany(s, []RunSpec{spec, spec, spec}, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Runs {
			if want == 0 {
				want = r.RetainedBytes
			}
			if r.RetainedBytes != want {
				t.Fatalf("round %d: retained %d, want %d", round, r.RetainedBytes, want)
			}
		}
		garbage := make([][]byte, 0, 1000)
		for i := 0; i < 1000; i++ {
			garbage = append(garbage, make([]byte, 64+i%512))
		}
		_ = garbage
		runtime.GC()
	}
}

// TestRunManyParallelSharedSetup: two RunMany calls on one setup at once,
// through one pool (a sweep's points), agree with each other.
func TestRunManyParallelSharedSetup(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image = 300, tinyImage(4)
	o.Pool = NewPool(2)
	s := mustSetup(t, o)
	specs := parallelSpecs(t)[:3]
	var wg sync.WaitGroup
	reps := make([]*ManyReport, 2)
	errs := make([]error, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = RunMany(s, specs, machine.Wire, sim.DefaultCosts(), "", nil)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sameRuns(t, "two at once", reps[0], reps[1])
}

type countingProgress struct {
	mu                  sync.Mutex
	starts, dones, last int
	total               int
	backwards           bool
}

func (p *countingProgress) Start(run string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	p.total = total
}

func (p *countingProgress) Update(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if done < p.last {
		p.backwards = true
	}
	p.last = done
}

func (p *countingProgress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dones++
}

// TestRunManyParallelProgress: overlapping runs report as one bar over all
// their probes, which never goes backwards and ends full.
func TestRunManyParallelProgress(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image, o.OptimizeEvery, o.Jobs = 600, tinyImage(5), 64, 2
	s := mustSetup(t, o)
	p := &countingProgress{}
	if _, err := RunMany(s, parallelSpecs(t)[:3], machine.Wire, sim.DefaultCosts(), "", p); err != nil {
		t.Fatal(err)
	}
	if p.starts != 1 || p.dones != 1 || p.total != 3*600 || p.last != p.total || p.backwards {
		t.Fatalf("progress: %+v", p)
	}
}

// TestRunManyParallelFirstError: when runs fail, the error is the first
// failing spec's, as in the serial loop.
func TestRunManyParallelFirstError(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image, o.Jobs = 50, tinyImage(6), 2
	s := mustSetup(t, o)
	boom := errors.New("boom")
	wire := func(k *image.Kernel, sw sim.Switches, c *sim.Counters, f *sim.Faults, walk bool) (*machine.Subsystems, error) {
		if sw != 0 {
			return nil, boom
		}
		return machine.Wire(k, sw, c, f, walk)
	}
	specs := []RunSpec{{Name: "none"}, {Name: "series", Switches: sim.PresetSeries.Set}, {Name: "none2"}, {Name: "all", Switches: sim.PresetAll.Set}}
	_, err := RunMany(s, specs, wire, sim.DefaultCosts(), "", nil)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "run series:") {
		t.Fatalf("error %v, want run series: boom", err)
	}
}

// TestRetainedPeakAtAttach: for register_kprobes and register_kprobe the
// retained-bytes peak is the sample at the end of the attach, so runOne
// skips the walk after their teardown (sampleTeardown); with it forced,
// every run's figure is the same. Mixed image probes bring aggregation,
// refusals and rollbacks into the teardown.
func TestRetainedPeakAtAttach(t *testing.T) {
	specs := []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}
	for _, via := range []doors.Via{doors.ViaRegisterKprobes, doors.ViaRegisterKprobe} {
		o := testManyOptions()
		o.N, o.Image, o.Via = 300, tinyImage(7), via
		if via == doors.ViaRegisterKprobe {
			o.ImageProbes, o.Mixed = 200, true
		}
		s := mustSetup(t, o)
		run := func(force bool) []uint64 {
			sampleTeardown = force
			defer func() { sampleTeardown = false }()
			rep, err := RunMany(s, specs, machine.Wire, sim.DefaultCosts(), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			var out []uint64
			for _, r := range rep.Runs {
				out = append(out, r.RetainedBytes)
			}
			return out
		}
		if got, forced := run(false), run(true); !slices.Equal(got, forced) {
			t.Errorf("%s: retained %v at the attach, %v with the teardown sampled too", via, got, forced)
		}
	}
}
