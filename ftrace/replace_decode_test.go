package ftrace

import (
	"testing"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestReplaceCodeDecodesEachSite: ftrace_replace_code queues each changed
// call site with text_poke_queue (7.3: smp_text_poke_batch_add), whose
// text_poke_loc_init runs insn_decode_kernel on the new instruction once
// (arch/x86/kernel/alternative.c, 6.1.192, 6.12.117, 7.3): one
// x86.decode.insn per ftrace.replace.site, as optprobes count for their
// JMP32, whether one kprobe is armed at +0 or an ops filters many sites.
func TestReplaceCodeDecodesEachSite(t *testing.T) {
	for _, n := range []int{1, 3, 40} {
		ft := newDefault(t)
		sites := tracedSites(ft, n)
		o := ft.NewOps("decode")
		if err := ft.SetFilterIPs(nil, o, sites); err != nil {
			t.Fatal(err)
		}
		c := sim.NewCounters(false)
		if err := ft.RegisterFunction(c, o); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Total(x86.OpDecode), c.Total(OpReplaceSite); got != want || want != uint64(n) {
			t.Errorf("register with %d sites: %d decodes for %d patched sites, want %d", n, got, want, n)
		}
	}
	// One kprobe on ftrace armed at +0: one site, one decode.
	ft := newDefault(t)
	c := sim.NewCounters(false)
	if err := ft.ArmKprobeFtrace(c, tracedSites(ft, 1)[0], false); err != nil {
		t.Fatal(err)
	}
	if got := c.Total(x86.OpDecode); got != 1 {
		t.Errorf("arm_kprobe_ftrace: %d decodes, want 1", got)
	}
}
