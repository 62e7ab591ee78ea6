package kprobes

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestInvariantsCatchCorruption: each invariant CheckInvariants and
// CheckTeardown assert fails when the state is broken the way a missing
// rollback would break it (so the fault tests that rely on them can fail).
func TestInvariantsCatchCorruption(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules, cfg.SampleFunctions = 1200, 10, 0, 0
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 50, 10, 20, 5, 40, 5
	k := fixture.Generate(t, cfg)
	setup := func(t *testing.T, sw sim.Switches) (*Kprobes, []*Kprobe) {
		kp, err := New(Deps{Image: k, Syms: kallsyms.NewSorted(k)}, DefaultConfig(), sw, sim.NewCounters(false))
		if err != nil {
			t.Fatal(err)
		}
		var ps []*Kprobe
		for _, f := range k.Functions() {
			in, err := x86.DecodeKernel(nil, k.Text(f.Addr, x86.MaxInsnSize))
			if err != nil || uint64(in.Len) >= f.Size || len(k.SymbolsByName(f.Name)) != 1 {
				continue
			}
			p := &Kprobe{Addr: f.Addr + uint64(in.Len)}
			if kp.RegisterKprobe(p) == nil {
				ps = append(ps, p)
				// A second probe at the address aggregates.
				if len(ps) < 3 {
					q := &Kprobe{Addr: p.Addr}
					if kp.RegisterKprobe(q) == nil {
						ps = append(ps, q)
					}
				}
			}
			if len(ps) >= 12 {
				break
			}
		}
		kp.Drain()
		if err := kp.CheckInvariants(); err != nil {
			t.Fatalf("a consistent state fails: %v", err)
		}
		return kp, ps
	}
	tree := sim.Switches(0).With(sim.KprobeTree)
	cases := []struct {
		name    string
		sw      sim.Switches
		corrupt func(kp *Kprobes, ps []*Kprobe)
		want    string
	}{
		{"tree misses an entry", tree, func(kp *Kprobes, ps []*Kprobe) { kp.Reg.tree.erase(kp.Reg.Entries()[3], nil) }, "the tree holds"},
		{"count drifts", 0, func(kp *Kprobes, ps []*Kprobe) { kp.Reg.n++ }, "count says"},
		{"leaked insn slot", 0, func(kp *Kprobes, ps []*Kprobe) {
			pg := kp.insnSlots.livePages()[0]
			for s := range pg.used {
				if pg.used[s] == slotClean {
					pg.used[s] = slotUsed
					pg.nused++
					return
				}
			}
		}, "leaked"},
		{"nused drifts", 0, func(kp *Kprobes, ps []*Kprobe) { kp.insnSlots.livePages()[0].nused++ }, "nused"},
		{"child points elsewhere", 0, func(kp *Kprobes, ps []*Kprobe) {
			for _, p := range kp.Reg.Entries() {
				if p.IsAggr() && len(p.children) > 0 {
					p.children[0].parent = nil
					return
				}
			}
		}, "points to parent"},
		{"optimized without a slot", 0, func(kp *Kprobes, ps []*Kprobe) {
			for _, p := range kp.Reg.Entries() {
				if p.IsAggr() {
					if p.optSlot != 0 {
						kp.optSlots.freeInsnSlot(nil, p.optSlot, false)
					}
					p.optSlot, p.Opt.Size = 0, 0
					p.Flags |= KprobeFlagOptimized
					return
				}
			}
		}, "OPTIMIZED"},
		{"queued on no list", 0, func(kp *Kprobes, ps []*Kprobe) {
			for _, p := range kp.Reg.Entries() {
				if p.IsAggr() {
					p.Queue = QueueOptimizing
					return
				}
			}
		}, "on none"},
		{"counter went down", 0, func(kp *Kprobes, ps []*Kprobe) { kp.C.Reset() }, "decreased"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kp, ps := setup(t, tc.sw)
			tc.corrupt(kp, ps)
			if err := kp.CheckInvariants(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("teardown", func(t *testing.T) {
		kp, ps := setup(t, 0)
		kp.UnregisterKprobes(ps)
		kp.Drain()
		if err := kp.CheckTeardown(); err != nil {
			t.Fatal(err)
		}
		// collect_one_slot keeps the only page; a second empty page must
		// have been freed.
		if n := len(kp.insnSlots.livePages()); n != 1 {
			t.Fatalf("%d insn pages after teardown, want the last one kept", n)
		}
		empty := &insnPage{base: 0x1000, used: make([]uint8, kp.insnSlots.perPage)}
		if f := kp.insnSlots.fast; f != nil {
			f.bySeq = append(f.bySeq, empty)
		} else {
			kp.insnSlots.pages = append(kp.insnSlots.pages, empty)
		}
		if err := kp.CheckTeardown(); err == nil || !strings.Contains(err.Error(), "list_is_singular") {
			t.Fatalf("an empty second page: %v", err)
		}
	})
	t.Run("teardown with a probe left", func(t *testing.T) {
		kp, ps := setup(t, 0)
		kp.UnregisterKprobes(ps[1:])
		kp.Drain()
		if err := kp.CheckTeardown(); err == nil {
			t.Fatal("teardown passed with a probe registered")
		}
	})
}
