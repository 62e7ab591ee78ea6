package scenarios

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// smallImage keeps the scenario tests quick: a few thousand functions with
// every kind of table entry.
func smallImage(seed uint64) synth.Config { return fixture.SmallConfig(seed) }

func mustSetup(t testing.TB, o ManyOptions) *ManySetup {
	t.Helper()
	s, err := PrepareMany(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGetKprobeCallsPerRegistration: a fresh int3 probe whose optimization
// succeeds, with nothing else nearby, costs 25 + 6·I_b + 6·I_f + 6·k_c + s
// get_kprobe calls on 6.1 (docs/series.md, P4–P6), where I_b, I_f, k_c and s
// come from the target's own decoded instructions.
func TestGetKprobeCallsPerRegistration(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image = 3, smallImage(1)
	s := mustSetup(t, o)
	c := sim.NewCounters(false)
	w, err := machine.Wire(s.Kernel, 0, c, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	deps := w.Deps
	if err := w.LateInit(); err != nil {
		t.Fatal(err)
	}
	kp, err := kprobes.New(deps, kprobes.DefaultConfig(), 0, c)
	if err != nil {
		t.Fatal(err)
	}
	kp.C = c
	p := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(1)}
	before := c.Total(fixture.Op(t, "kprobe.hash.lookup"))
	if err := kp.RegisterKprobe(p); err != nil {
		t.Fatal(err)
	}
	gk := c.Total(fixture.Op(t, "kprobe.hash.lookup")) - before

	// The target as kallsyms sees it: from its start to the next symbol.
	sym := s.Kernel.SymbolsByName(synth.ProbeTargetName(1))[0]
	next := s.Kernel.SymbolsByName(synth.ProbeTargetName(2))[0]
	var offs []int
	code := s.Kernel.Text(sym.Addr, int(next.Addr-sym.Addr))
	for off := 0; off < len(code); {
		offs = append(offs, off)
		insn, err := x86.Decode(nil, code[off:])
		if err != nil {
			t.Fatal(err)
		}
		off += insn.Len
	}
	probeOff := int(p.Addr - sym.Addr)
	ib := 0
	for _, o := range offs {
		if o < probeOff {
			ib++
		}
	}
	iF := len(offs)
	kc, sz := 0, 0
	for _, o := range offs {
		if o >= probeOff && sz < 5 {
			kc++
			insn, _ := x86.Decode(nil, code[o:])
			sz += insn.Len
		}
	}
	want := uint64(25 + 6*ib + 6*iF + 6*kc + sz)
	if gk != want {
		t.Fatalf("get_kprobe calls = %d, want 25 + 6·%d + 6·%d + 6·%d + %d = %d", gk, ib, iF, kc, sz, want)
	}
	if p.Parent() == nil || !p.Parent().Optimized() {
		t.Fatal("the probe was not queued for optimization")
	}
}

// runSpecs runs every spec and checks that all reach the first's decisions.
func checkSameDecisions(t *testing.T, s *ManySetup, specs []RunSpec, faults string) *ManyReport {
	t.Helper()
	rep, err := RunMany(s, specs, machine.Wire, sim.DefaultCosts(), faults, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := rep.Runs[0]
	for _, r := range rep.Runs[1:] {
		if i, ok := SameDecisions(base, r); !ok {
			t.Fatalf("run %s differs from %s at probe %d: %+v vs %+v", r.Name, base.Name, i, r.Results[i], base.Results[i])
		}
		if r.Digest != base.Digest {
			t.Fatalf("run %s digest %s != %s", r.Name, r.Digest, base.Digest)
		}
	}
	return rep
}

func allSpecs() []RunSpec {
	specs := []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}
	return append(specs, AblationSpecs()...)
}

// noDesigns drops the alternative-design runs: the default-image test keeps
// to the series' switches (CI time; the designs' ablation runs are proved on
// the mixed images and, with failing allocations, by
// TestCompareDesignsSameDecisions).
func noDesigns(specs []RunSpec) []RunSpec {
	var out []RunSpec
	for _, sp := range specs {
		design := false
		for _, s := range sim.DesignSwitches() {
			design = design || sp.Switches.Has(s)
		}
		if !design {
			out = append(out, sp)
		}
	}
	return out
}

// TestAblationSameDecisionsMixed: on randomised images and placements
// (mid-function, aggregated, post handlers, blacklisted, reserved, bug,
// ftrace, module addresses, inside other probes' optimized regions), every
// ablation run reaches the same per-probe results as none — also when the
// late-init index allocations fail.
func TestAblationSameDecisionsMixed(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			o := testManyOptions()
			o.N, o.ImageProbes, o.Mixed, o.Via, o.Seed, o.OptimizeEvery = 150, 450, true, doors.ViaRegisterKprobe, seed, 17
			o.Image = smallImage(seed)
			s := mustSetup(t, o)
			rep := checkSameDecisions(t, s, allSpecs(), "")
			r := rep.Runs[0]
			if r.Optimized == 0 || r.Registered == r.Optimized || len(r.Rejected) < 2 {
				t.Fatalf("placements too tame to test anything: registered %d optimized %d rejected %v", r.Registered, r.Optimized, r.Rejected)
			}
			// With every index allocation failing, the series falls back
			// to the linear scans: same decisions again.
			var faults string
			for _, f := range sim.FaultPoints() {
				if len(f.Name) > 12 && f.Name[len(f.Name)-12:] == ".index.alloc" {
					if faults != "" {
						faults += ","
					}
					faults += f.Name
				}
			}
			if faults == "" {
				t.Fatal("no index allocation fault points registered")
			}
			fr := checkSameDecisions(t, s, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}, faults)
			if fr.Runs[0].Digest != r.Digest {
				t.Fatal("failing index allocations changed the decisions")
			}
		})
	}
}

// TestBatchRollback: register_kprobes is all or nothing.
func TestBatchRollback(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image, o.Placement, o.Offset = 20, smallImage(4), PlaceOffset, 1 // +1 is inside the ENDBR: -EILSEQ
	s := mustSetup(t, o)
	rep := checkSameDecisions(t, s, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}}, "")
	r := rep.Runs[0]
	if r.Registered != 0 || r.Rejected["EILSEQ"] != 1 {
		t.Fatalf("registered %d rejected %v: want the first probe to fail with EILSEQ and nothing registered", r.Registered, r.Rejected)
	}
}

// TestOptimizedRegionSemantics: post handlers are never optimized; a probe
// inside an optimized region force-unoptimizes it (6.1.192 rule).
func TestOptimizedRegionSemantics(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image = 4, smallImage(5)
	o.Image.IBT = true // the offsets below are the IBT layout
	s := mustSetup(t, o)
	for _, sw := range []sim.Switches{0, sim.PresetAll.Set} {
		c := sim.NewCounters(false)
		w, _ := machine.Wire(s.Kernel, sw, c, nil, false)
		_ = w.LateInit()
		kp, _ := kprobes.New(w.Deps, kprobes.DefaultConfig(), sw, c)
		// Target layout (IBT): +0 endbr64, +4 mov X(%rip),%eax (6 bytes),
		// +10 add $1,%eax (3), +13 mov %eax,X(%rip) (6), +19 ret, +20 int3.
		// A probe at +10 copies two instructions: its jump covers +13.
		a := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(0), Offset: 10}
		post := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(1), HasPostHandler: true}
		for _, p := range []*kprobes.Kprobe{a, post} {
			if err := kp.RegisterKprobe(p); err != nil {
				t.Fatal(err)
			}
		}
		kp.Drain()
		if !a.Parent().Optimized() {
			t.Fatalf("%v: entry probe not optimized", sw.Names())
		}
		if post.Parent() != nil && post.Parent().Optimized() {
			t.Fatalf("%v: a probe with a post handler was optimized", sw.Names())
		}
		// A probe at +13, inside a's jump, force-unoptimizes a.
		inside := &kprobes.Kprobe{Addr: a.Addr + 3}
		if err := kp.RegisterKprobe(inside); err != nil {
			t.Fatalf("%v: probe inside the optimized region: %v", sw.Names(), err)
		}
		if a.Parent().Optimized() {
			t.Fatalf("%v: the covering optprobe was not unoptimized", sw.Names())
		}
		// Unregistering the inner probe does NOT re-optimize a in 6.1:
		// __disable_kprobe sets DISABLED only after disarm_kprobe returns,
		// so __disarm_kprobe's re-optimization attempt meets the blocker
		// still armed in arch_check_optimized_kprobe (-EEXIST).
		kp.UnregisterKprobes([]*kprobes.Kprobe{inside})
		kp.Drain()
		if a.Parent().Optimized() {
			t.Fatalf("%v: the optprobe was re-optimized while its blocker was still armed", sw.Names())
		}
	}
}

// TestAblationSameDecisionsDefaultImage: the default image at N = 2,000
// (what `kpsim run many --ablation --n 2000` shows), plus 500 mixed probes
// on the image's own functions registered one by one.
func TestAblationSameDecisionsDefaultImage(t *testing.T) {
	if testing.Short() {
		t.Skip("26 runs on the default image")
	}
	o := testManyOptions()
	o.N = 2000
	s := mustSetup(t, o)
	rep := checkSameDecisions(t, s, noDesigns(allSpecs()), "")
	if r := rep.Runs[0]; r.Registered != 2000 || r.Optimized != 2000 {
		t.Fatalf("default batch: registered %d optimized %d, want 2000 and 2000", r.Registered, r.Optimized)
	}
	o.ImageProbes, o.Mixed, o.Via = 500, true, doors.ViaRegisterKprobe
	s = mustSetupOn(t, s, o)
	checkSameDecisions(t, s, noDesigns(allSpecs()), "")
}

// mustSetupOn reuses s's image (which already holds the targets).
func mustSetupOn(t testing.TB, s *ManySetup, o ManyOptions) *ManySetup {
	t.Helper()
	s2, err := PrepareManyOn(s.Kernel, o)
	if err != nil {
		t.Fatal(err)
	}
	return s2
}

// TestAllFunctionsSameDecisions: a probe on every function of an image,
// registered one by one, reaches the same decisions in every mode, and
// the refusals are the kernel's (blacklisted, reserved, ftrace...).
func TestAllFunctionsSameDecisions(t *testing.T) {
	cfg := smallImage(9)
	cfg.Functions = 2500
	k := fixture.Generate(t, cfg)
	o := testManyOptions()
	o.Targets, o.Via = TargetsAllFunctions, doors.ViaRegisterKprobe
	s := mustPrepareFor(t, k, o)
	if len(s.Targets) < 2500 {
		t.Fatalf("%d probes for an image of 2500+ functions", len(s.Targets))
	}
	rep := checkSameDecisions(t, s, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}, {"all", sim.PresetAll.Set}}, "")
	r := rep.Runs[0]
	if r.Rejected["EINVAL"] == 0 || r.Registered == 0 {
		t.Fatalf("registered %d, rejected %v", r.Registered, r.Rejected)
	}
}
