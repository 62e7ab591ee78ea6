package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestBatchFaultMidway: the run-many door's register_kprobes with the
// second kprobe_insn_page allocation failing: the probe that needs it
// (the 274th: 4096/15 = 273 slots per page) fails with -ENOMEM and the 273
// before it are rolled back (kernel/kprobes.c:register_kprobes), under
// upstream and the series alike; the 26 after it are never attempted.
func TestBatchFaultMidway(t *testing.T) {
	o := testManyOptions()
	o.N, o.Image = 300, smallImage(4)
	o.Image.Functions, o.Image.InitFunctions, o.Image.JumpEntries, o.Image.JumpKeys = 1200, 40, 400, 100
	o.Image.StaticCallSites, o.Image.StaticCallKeys, o.Image.BugEntries, o.Image.Modules = 100, 20, 300, 0
	s := mustSetup(t, o)
	rep := checkSameDecisions(t, s, []RunSpec{{"none", 0}, {"series", sim.PresetSeries.Set}}, "kprobe.insn_slot.alloc@2")
	r := rep.Runs[0]
	if r.Registered != 0 || r.Rejected["ENOMEM"] != 1 || r.Reasons["arch_prepare_kprobe: get_insn_slot"] != 1 || r.Reasons["register_kprobes"] != o.N-1 {
		t.Fatalf("registered %d, rejected %v, reasons %v: want one -ENOMEM and every other probe rolled back or not attempted", r.Registered, r.Rejected, r.Reasons)
	}
}
