package scenarios

import (
	"math"
	"testing"
	"time"

	"github.com/google/btree"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// The registration work against its floor. The floor is the
// least any registration of these probes must do: decode each target
// function's instructions once (can_optimize and the boundary check must
// at least do that) and the tree work (insert each probe into an
// address-ordered tree, then delete it again), nothing else.
// BenchmarkRegister* is the registration work itself: RunMany on a
// prepared setup, i.e. machine boot, attach, the optimizer and teardown,
// with image generation and the kallsyms tables built before the timer.
//
// ns/op of BenchmarkRegisterNone50k over ns/op of BenchmarkFloor50k is the
// ratio to the floor (measure both in one `go test -bench` run; benchstat
// compares before/after). BenchmarkGrowth{None,Series} measures 20k and
// 80k registration and the floor inside one benchmark and reports the
// goals directly: exponent = log(t80k/t20k)/log 4 (goal <= 1.1) and
// x-floor-20k, x-floor-80k (goal <= 3), from wall time and, prefixed
// cpu-, from process CPU time. Every benchmark here also reports
// cpu-ns/op; on a machine shared with other work, compare those.

// floorSetup is a prepared default-image setup of n generated probes and
// the target functions' extents.
type floorSetup struct {
	s     *ManySetup
	funcs []floorFunc
}

type floorFunc struct {
	addr uint64
	size int
}

var floorSetups = map[int]*floorSetup{}

// prepareFloor builds (once per n in a test binary) the default image with
// n generated targets, its kallsyms tables and the targets' extents.
func prepareFloor(b *testing.B, n int) *floorSetup {
	b.Helper()
	if fs := floorSetups[n]; fs != nil {
		return fs
	}
	o := DefaultManyOptions()
	o.N = n
	s, err := PrepareMany(o)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := machine.KallsymsTables(s.Kernel); err != nil {
		b.Fatal(err)
	}
	byName := map[string]image.Symbol{}
	for _, sym := range s.Kernel.Symbols {
		if _, dup := byName[sym.Name]; !dup && sym.IsText() {
			byName[sym.Name] = sym
		}
	}
	fs := &floorSetup{s: s}
	for _, t := range s.Targets {
		sym, ok := byName[t.Symbol]
		if !ok {
			b.Fatalf("target %s: no such function", t.Symbol)
		}
		fs.funcs = append(fs.funcs, floorFunc{addr: sym.Addr + uint64(t.Offset), size: int(sym.Size) - int(t.Offset)})
	}
	floorSetups[n] = fs
	return fs
}

// floorOnce is one pass of the floor: decode every target function once,
// insert every probe address into a B-tree, delete them again. It returns
// the instructions decoded, so the work cannot be optimised away.
func floorOnce(b *testing.B, fs *floorSetup) int {
	k := fs.s.Kernel
	insns := 0
	for _, f := range fs.funcs {
		for off := 0; off < f.size; {
			insn, err := x86.DecodeKernel(nil, k.Text(f.addr+uint64(off), x86.MaxInsnSize))
			if err != nil {
				b.Fatalf("%#x: %v", f.addr+uint64(off), err)
			}
			off += insn.Len
			insns++
		}
	}
	tr := btree.NewOrderedG[uint64](32)
	for _, f := range fs.funcs {
		tr.ReplaceOrInsert(f.addr)
	}
	for _, f := range fs.funcs {
		tr.Delete(f.addr)
	}
	return insns
}

// registerOnce is one run of the registration work (RunMany, one spec).
func registerOnce(b *testing.B, fs *floorSetup, sw sim.Switches) *RunResult {
	rep, err := RunMany(fs.s, []RunSpec{{sw.Name(), sw}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	return rep.Runs[0]
}

func benchFloor(b *testing.B, n int) {
	fs := prepareFloor(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	insns := 0
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		insns = floorOnce(b, fs)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(insns), "insns")
}

func BenchmarkFloor20k(b *testing.B) { benchFloor(b, 20000) }
func BenchmarkFloor50k(b *testing.B) { benchFloor(b, 50000) }
func BenchmarkFloor80k(b *testing.B) { benchFloor(b, 80000) }

func benchRegister(b *testing.B, n int, sw sim.Switches) {
	fs := prepareFloor(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	var r *RunResult
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		r = registerOnce(b, fs, sw)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(r.TotalOps), "kernel-ops")
}

func BenchmarkRegisterNone20k(b *testing.B)   { benchRegister(b, 20000, 0) }
func BenchmarkRegisterNone50k(b *testing.B)   { benchRegister(b, 50000, 0) }
func BenchmarkRegisterNone80k(b *testing.B)   { benchRegister(b, 80000, 0) }
func BenchmarkRegisterSeries20k(b *testing.B) { benchRegister(b, 20000, sim.PresetSeries.Set) }
func BenchmarkRegisterSeries50k(b *testing.B) { benchRegister(b, 50000, sim.PresetSeries.Set) }
func BenchmarkRegisterSeries80k(b *testing.B) { benchRegister(b, 80000, sim.PresetSeries.Set) }

// benchGrowth times, per iteration, the registration at 20k and 80k and
// the floor at both, and reports the goals' figures from the sums: from
// wall time (exponent, x-floor-20k, x-floor-80k) and from process CPU time
// (cpu-exponent, cpu-x-floor-20k, cpu-x-floor-80k; steadier on a shared
// machine).
func benchGrowth(b *testing.B, sw sim.Switches) {
	small, large := prepareFloor(b, 20000), prepareFloor(b, 80000)
	b.ResetTimer()
	var wall, cpu [4]time.Duration // register 20k, 80k, floor 20k, 80k
	for i := 0; i < b.N; i++ {
		for j, f := range []func(){
			func() { registerOnce(b, small, sw) },
			func() { registerOnce(b, large, sw) },
			func() { floorOnce(b, small) },
			func() { floorOnce(b, large) },
		} {
			w0, c0 := time.Now(), processCPU()
			f()
			wall[j] += time.Since(w0)
			cpu[j] += processCPU() - c0
		}
	}
	report := func(prefix string, t [4]time.Duration) {
		if t[0] <= 0 || t[2] <= 0 || t[3] <= 0 {
			return
		}
		b.ReportMetric(math.Log(float64(t[1])/float64(t[0]))/math.Log(4), prefix+"exponent")
		b.ReportMetric(float64(t[0])/float64(t[2]), prefix+"x-floor-20k")
		b.ReportMetric(float64(t[1])/float64(t[3]), prefix+"x-floor-80k")
	}
	report("", wall)
	report("cpu-", cpu)
	b.ReportMetric(float64(wall[0])/float64(b.N)/1e6, "ms-20k")
	b.ReportMetric(float64(wall[1])/float64(b.N)/1e6, "ms-80k")
}

func BenchmarkGrowthNone(b *testing.B)   { benchGrowth(b, 0) }
func BenchmarkGrowthSeries(b *testing.B) { benchGrowth(b, sim.PresetSeries.Set) }

// BenchmarkAblation20k is `run many --ablation` at 20k on a prepared
// setup: none, series, all and every ablation spec, one after another on
// one image (the image and its kallsyms tables built before the timer).
func BenchmarkAblation20k(b *testing.B) {
	fs := prepareFloor(b, 20000)
	specs := append([]RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}, AblationSpecs()...)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	var ops uint64
	for i := 0; i < b.N; i++ {
		rep, err := RunMany(fs.s, specs, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		ops = 0
		for _, r := range rep.Runs {
			ops += uint64(r.TotalOps)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(ops), "kernel-ops")
	b.ReportMetric(float64(len(specs)), "runs")
}
