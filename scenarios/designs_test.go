package scenarios

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/maple"
	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

// allocFaults is a plan failing, once each, every allocation upstream and
// the designs share (insn and optinsn slots, aggregators), every late-init
// index allocation, and the rhashtable's growth (kept old table, retried).
func allocFaults(t *testing.T) string {
	t.Helper()
	plan := "kprobe.insn_slot.alloc@7,kprobe.optinsn_slot.alloc@3,kprobe.aggr.alloc@5," + rhashtable.FaultTableAlloc.Name() + "@1"
	n := 0
	for _, f := range sim.FaultPoints() {
		if strings.HasSuffix(f.Name, ".index.alloc") {
			plan += "," + f.Name
			n++
		}
	}
	if n < 4 {
		t.Fatalf("only %d index allocation fault points", n)
	}
	return plan
}

// TestCompareDesignsSameDecisions: on a mixed placement (mid-function,
// aggregated, post handlers, blacklisted, reserved, bug, ftrace, module,
// inside optimized regions), every --compare-designs run reaches
// upstream's per-probe results, without faults and with every shared
// allocation failing once and the rhashtable's growth failing.
func TestCompareDesignsSameDecisions(t *testing.T) {
	o := testManyOptions()
	o.N, o.ImageProbes, o.Mixed, o.Via, o.Seed, o.OptimizeEvery = 150, 450, true, doors.ViaRegisterKprobe, 2, 17
	o.Image = smallImage(2)
	s := mustSetup(t, o)
	specs := CompareDesignSpecs()
	rep := checkSameDecisions(t, s, specs, "")
	if r := rep.Runs[0]; r.Optimized == 0 || len(r.Rejected) < 2 {
		t.Fatalf("placements too tame: optimized %d rejected %v", r.Optimized, r.Rejected)
	}
	faulted := checkSameDecisions(t, s, specs, allocFaults(t))
	if faulted.Runs[0].Digest == rep.Runs[0].Digest {
		t.Fatal("the fault plan changed nothing: it tests nothing")
	}
	// What the design table (scenarios/report.DesignTable) prints: a run
	// per design, every digest the first run's.
	if len(rep.Runs) != len(specs) {
		t.Fatalf("%d runs, want one per design (%d)", len(rep.Runs), len(specs))
	}
	for i, run := range rep.Runs {
		if run.Name != specs[i].Name {
			t.Errorf("run %d is %s, want %s", i, run.Name, specs[i].Name)
		}
		if run.Digest != rep.Runs[0].Digest || FirstDifference(rep.Runs[0], run) != "" {
			t.Errorf("design %s: decisions differ from %s: %s", run.Name, rep.Runs[0].Name, FirstDifference(rep.Runs[0], run))
		}
	}
}

// TestDesignOnlyAllocationSaysWhich: an allocation only a design makes
// (a maple node for a split, a bigger rhashtable above 100% load) can fail
// register_kprobe with -ENOMEM where upstream cannot. The report then
// names the first probe that differs, and it is that -ENOMEM.
func TestDesignOnlyAllocationSaysWhich(t *testing.T) {
	o := testManyOptions()
	o.N, o.Via, o.Image = 300, doors.ViaRegisterKprobe, smallImage(3)
	s := mustSetup(t, o)
	for _, tc := range []struct {
		spec  RunSpec
		fault string
	}{
		{RunSpec{"series+kprobe-btree", sim.PresetSeries.Set.With(sim.KprobeBtree)}, maple.FaultNodeAlloc.Name() + "@3"},
		{RunSpec{"kprobe-rhashtable", sim.Switches(0).With(sim.KprobeRhashtable)}, rhashtable.FaultTableAlloc.Name()},
	} {
		rep, err := RunMany(s, []RunSpec{{"none", 0}, tc.spec}, machine.Wire, sim.DefaultCosts(), tc.fault, nil)
		if err != nil {
			t.Fatal(err)
		}
		line := FirstDifference(rep.Runs[0], rep.Runs[1])
		if !strings.Contains(line, "-ENOMEM") || !strings.Contains(line, tc.spec.Name) {
			t.Fatalf("%s with %s: %q", tc.spec.Name, tc.fault, line)
		}
		if rep.Runs[1].Rejected["ENOMEM"] == 0 || rep.Runs[0].Rejected["ENOMEM"] != 0 {
			t.Fatalf("%s: rejections %v vs upstream %v", tc.spec.Name, rep.Runs[1].Rejected, rep.Runs[0].Rejected)
		}
	}
}

// TestDesignMemoryReported: each design's index memory reaches the report.
func TestDesignMemoryReported(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image = 500, smallImage(4)
	s := mustSetup(t, o)
	rep, err := RunMany(s, CompareDesignSpecs(), machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		ss := r.Switches
		want := map[string]bool{
			"kprobe.table.bytes":      !ss.Has(sim.KprobeRhashtable),
			"kprobe.rhashtable.bytes": ss.Has(sim.KprobeRhashtable),
			"kprobe.tree.bytes":       ss.Has(sim.KprobeTree) && !ss.Has(sim.KprobeBtree),
			"kprobe.btree.bytes":      ss.Has(sim.KprobeBtree),
		}
		for k, w := range want {
			if _, ok := r.KernelMem[k]; ok != w {
				t.Errorf("%s: %s reported %v, want %v", r.Name, k, ok, w)
			}
		}
		if ss.Has(sim.KprobeHashBits) && r.KernelMem["kprobe.table.bytes"] != 8<<ss.HashBits() {
			t.Errorf("%s: table bytes %d", r.Name, r.KernelMem["kprobe.table.bytes"])
		}
		if ss.Has(sim.ReservationBtree) && r.KernelMem["jump_label.index.bytes"]%maple.NodeBytes != 0 {
			t.Errorf("%s: jump-label B-tree bytes %d not whole nodes", r.Name, r.KernelMem["jump_label.index.bytes"])
		}
	}
}
