package machine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

// TestFaultSweep injects each kprobes-level fault at each of its first
// hits (and at every hit) into one mixed workload — aggregation, post
// handlers, ftrace probes, kretprobes, disable/enable, optimizer runs,
// unregistration and re-registration — under upstream and the series,
// and asserts the invariants after every step and the no-leak teardown at
// the end. Whatever a failure returns, the state must stay consistent.
func TestFaultSweep(t *testing.T) {
	points := []struct {
		name string
		sw   sim.Switches
	}{
		{"kprobe.insn_slot.alloc", 0},
		{"kprobe.optinsn_slot.alloc", 0},
		{"kprobe.optinsn_buf.alloc", 0},
		{"kprobe.aggr.alloc", 0},
		{"kretprobe.rethook.alloc", 0},
		{"kretprobe.instance.alloc", 0},
		{"ftrace.hash.alloc", 0},
		{"ftrace.hash.move", 0},
		{"maple.node.alloc", sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree)},
		{"rhashtable.tbl.alloc", sim.Switches(0).With(sim.KprobeRhashtable)},
	}
	hits := []string{"", "@1", "@2", "@3", "@5", "@8", "@13"}
	sets := func(sw sim.Switches) []sim.Switches { return []sim.Switches{sw, sw | sim.PresetSeries.Set} }
	if testing.Short() || race.Enabled {
		// Under -race (CI) one plan per point, with the series on; the
		// plain run covers the rest.
		hits = []string{"@2"}
		sets = func(sw sim.Switches) []sim.Switches { return []sim.Switches{sw | sim.PresetSeries.Set} }
	}
	for _, pt := range points {
		for _, sw := range sets(pt.sw) {
			for _, at := range hits {
				plan := pt.name + at
				t.Run(fmt.Sprintf("%s/%s", plan, sw.Name()), func(t *testing.T) {
					m := boot(t, sw, plan)
					mixedWorkload(t, m)
				})
			}
		}
	}
}

// mixedWorkload drives m through every registration path and checks the
// invariants after each step; failures are allowed, inconsistency is not.
func mixedWorkload(t *testing.T, m *machine.Machine) {
	t.Helper()
	_, tg := faultKernel(t)
	kp := m.KP
	step := func(what string) {
		t.Helper()
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
	}
	var live, all []*kprobes.Kprobe
	var rps []*kprobes.Kretprobe
	reg := func(p *kprobes.Kprobe) {
		all = append(all, p)
		if kp.RegisterKprobe(p) == nil {
			live = append(live, p)
		}
		step("register_kprobe " + p.SymbolName)
	}
	// Plain int3 probes, optimizable ones twice (the second aggregates),
	// one with a post handler, ftrace probes with and without.
	for _, p := range fresh(tg.int3[:12]) {
		reg(p)
	}
	for _, p := range fresh(append(tg.opt[:2:2], tg.opt[:2]...)) {
		reg(p)
	}
	post := fresh(tg.opt[1:2])[0]
	post.HasPostHandler = true
	reg(post)
	for i, p := range fresh(tg.ftrace[:4]) {
		p.HasPostHandler = i%2 == 1
		reg(p)
	}
	kp.RunOptimizer()
	step("optimizer")
	// A batch, and kretprobes on other entries.
	batch := fresh(tg.int3[12:40])
	all = append(all, batch...)
	if n, err := kp.RegisterKprobes(batch); err == nil {
		live = append(live, batch...)
	} else {
		for _, p := range batch {
			if p.Registered() {
				t.Fatalf("register_kprobes failed at %d (%v) and left a probe registered", n, err)
			}
		}
	}
	step("register_kprobes")
	for _, p := range fresh(tg.ftrace[4:8]) {
		rp := &kprobes.Kretprobe{Kp: *p, MaxActive: 3}
		if kp.RegisterKretprobe(rp) == nil {
			rps = append(rps, rp)
		} else if rp.Instances() != 0 {
			t.Fatalf("a failed kretprobe kept %d instances", rp.Instances())
		}
		step("register_kretprobe")
	}
	// Disable and re-enable some, drain, unregister half, re-register.
	for i, p := range live {
		if i%3 == 0 {
			_ = kp.DisableKprobe(p)
			step("disable_kprobe")
		}
	}
	kp.Drain()
	step("drain")
	for i, p := range live {
		if i%3 == 0 {
			_ = kp.EnableKprobe(p)
			step("enable_kprobe")
		}
	}
	half := live[:len(live)/2]
	kp.UnregisterKprobes(half)
	step("unregister_kprobes")
	kp.RunOptimizer()
	step("optimizer")
	rest := live[len(live)/2:]
	live = nil
	for _, p := range half {
		q := &kprobes.Kprobe{SymbolName: p.SymbolName, Offset: p.Offset, HasPostHandler: p.HasPostHandler}
		reg(q)
	}
	live = append(live, rest...)
	kp.Drain()
	step("drain")
	kp.UnregisterKprobes(live)
	kp.UnregisterKretprobes(rps)
	for _, rp := range rps {
		if rp.Instances() != 0 {
			t.Fatalf("an unregistered kretprobe kept %d instances", rp.Instances())
		}
	}
	// A probe whose disarm failed is still registered (unregister_kprobes
	// skips it: __unregister_kprobe_top failed); unregister it again.
	var left []*kprobes.Kprobe
	for _, p := range all {
		if p.Registered() {
			left = append(left, p)
		}
	}
	kp.UnregisterKprobes(left)
	kp.Drain()
	wantTeardown(t, m)
}

// wantTeardown: the machine's teardown check passes, unless
// ftrace_set_filter_ip failed inside __disarm_kprobe_ftrace: then the
// kernel's kprobe_ftrace_enabled is off for good, and teardown must say so.
func wantTeardown(t *testing.T, m *machine.Machine) {
	t.Helper()
	err := m.CheckTeardown()
	if warned(m) {
		if err == nil {
			t.Fatal("teardown passed although __disarm_kprobe_ftrace WARNed")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
}

func warned(m *machine.Machine) bool {
	return m.Ftrace.KprobeOps(false).DisarmWarnings()+m.Ftrace.KprobeOps(true).DisarmWarnings() > 0
}

// TestFaultSweepEventLayer: each event-layer and kprobes point at its
// first hits through tracefs writes (probes, return probes, an appended
// probe on an existing event), enabling per event and per group, perf
// opens, and deletion; the tracing and machine invariants hold after every
// step and nothing is left at the end.
func TestFaultSweepEventLayer(t *testing.T) {
	points := []string{"trace_kprobe.alloc", "tracefs.dir", "trace_event_file.alloc", "trace.subsystem.alloc", "perf.trace_event.alloc", "perf.event.alloc",
		"kretprobe.instance.alloc", "ftrace.hash.alloc", "kprobe.insn_slot.alloc", "kprobe.aggr.alloc"}
	hits := []string{"", "@1", "@2", "@4", "@7"}
	if testing.Short() || race.Enabled {
		hits = []string{"@2"}
	}
	for _, pt := range points {
		for _, at := range hits {
			plan := pt + at
			t.Run(plan, func(t *testing.T) {
				m := boot(t, 0, plan)
				eventWorkload(t, m)
			})
		}
	}
}

func eventWorkload(t *testing.T, m *machine.Machine) {
	t.Helper()
	_, tg := faultKernel(t)
	tr := tracing(m)
	step := func(what string) {
		t.Helper()
		if err := m.CheckInvariants(); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
		if err := tr.CheckInvariants(); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
	}
	var b strings.Builder
	for i, p := range tg.ftrace[:3] {
		fmt.Fprintf(&b, "p:kpsim/e%d %s\n", i, p.SymbolName)
	}
	fmt.Fprintf(&b, "r:kpsim/r0 %s\n", tg.ftrace[3].SymbolName)
	for i, p := range tg.int3[:3] {
		fmt.Fprintf(&b, "p:other/i%d %s+%d\n", i, p.SymbolName, p.Offset)
	}
	// A second probe on e0 joins the event (append_trace_kprobe).
	fmt.Fprintf(&b, "p:kpsim/e0 %s+%d\n", tg.int3[5].SymbolName, tg.int3[5].Offset)
	_, _ = tr.WriteKprobeEvents(b.String())
	step("kprobe_events write")
	for _, ev := range tr.Events() {
		_ = tr.EnableEvent(ev, true)
		step("enable " + ev.Name)
	}
	_ = tr.EnableGroup("other", false, nil)
	step("disable group other")
	_ = tr.EnableGroup("other", true, nil)
	step("enable group other")
	var pes []*trace.PerfEvent
	for _, p := range tg.ftrace[4:6] {
		if pe, err := tr.PerfKprobeOpen(p.SymbolName, 0, false); err == nil {
			pes = append(pes, pe)
		}
		step("perf_event_open")
	}
	m.KP.Drain()
	step("drain")
	for _, ev := range tr.Events() {
		_ = tr.EnableEvent(ev, false)
		step("disable " + ev.Name)
	}
	for _, pe := range pes {
		tr.PerfKprobeClose(pe)
		step("perf close")
	}
	deleteAll(t, tr)
	step("delete")
	m.KP.Drain()
	if err := tr.CheckTeardown(); err != nil {
		t.Fatal(err)
	}
	wantTeardown(t, m)
}
