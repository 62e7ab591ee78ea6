package trace_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

func smallImage(t testing.TB) *image.Kernel {
	t.Helper()
	cfg := synth.DefaultConfig()
	cfg.Seed = 7
	cfg.Functions, cfg.InitFunctions = 3000, 100
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys = 1500, 300, 300, 40
	cfg.BugEntries, cfg.Blacklist, cfg.Modules, cfg.ModuleFunctions = 800, 60, 2, 60
	cfg.ProbeTargets, cfg.ProbeTargetsTraced = 200, true
	k := fixture.Generate(t, cfg)
	return k
}

func boot(t testing.TB, k *image.Kernel, sw sim.Switches) (*machine.Machine, *trace.Tracing) {
	t.Helper()
	cfg := machine.DefaultConfig()
	cfg.Switches = sw
	m, err := machine.Boot(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: k, C: m.C, Faults: m.Faults}, trace.ConfigFor(k))
	return m, tr
}

// names returns a unique traceable function, a name with two vmlinux
// copies, and a missing name.
func names(t testing.TB, k *image.Kernel) (uniq, dup string, copies int) {
	count := k.NameCounts()
	for _, s := range k.Functions() {
		if s.Module != "" || s.Size == 0 {
			continue
		}
		if count[s.Name] >= 2 && dup == "" {
			dup, copies = s.Name, count[s.Name]
		}
	}
	uniq = synth.ProbeTargetName(0)
	if dup == "" {
		t.Fatalf("image lacks a unique (%q) or a duplicated (%q) function", uniq, dup)
	}
	return
}

func TestKprobeEventsDuplicateAndMissing(t *testing.T) {
	k := smallImage(t)
	_, tr := boot(t, k, 0)
	uniq, dup, copies := names(t, k)
	cases := []struct {
		line   string
		code   errno.Errno
		reason string
	}{
		{"p " + uniq, 0, ""},
		{"p " + dup, errno.EADDRNOTAVAIL, fmt.Sprintf("trace_kprobe: symbol is not unique (%d copies)", copies)},
		{"p no_such_function_xyz", errno.ENOENT, "trace_kprobe: symbol \"no_such_function_xyz\" not found"},
		{"p " + uniq, errno.EEXIST, "append_trace_kprobe: the same probe is already on this event"},
		{"x " + uniq, errno.EINVAL, "create_or_delete_trace_kprobe"},
		{"p:bad.grp/ev " + uniq, errno.EINVAL, "traceprobe_parse_event_name"},
		{"p:g/e.v " + uniq, errno.EINVAL, "traceprobe_parse_event_name"},
		{"p5 " + uniq, errno.EINVAL, "__trace_kprobe_create: maxactive is only for return probes"},
		{"p " + uniq + "-4", errno.EINVAL, "__trace_kprobe_create: bad probe offset"},
	}
	for _, tc := range cases {
		out, err := tr.WriteKprobeEvents(tc.line + "\n")
		if len(out) != 1 || !out[0].Attempted {
			t.Fatalf("%q: outcomes %+v", tc.line, out)
		}
		if out[0].Code != tc.code {
			t.Errorf("%q: code %v, want %v (%s)", tc.line, out[0].Code, tc.code, out[0].Reason)
		}
		if (err == nil) != (tc.code == 0) {
			t.Errorf("%q: write returned %v", tc.line, err)
		}
		if !strings.HasPrefix(out[0].Reason.String(), tc.reason) {
			t.Errorf("%q: reason %q, want prefix %q", tc.line, out[0].Reason, tc.reason)
		}
	}
	if ev := tr.LookupEvent("kprobes", "p_"+uniq+"_0"); ev == nil {
		t.Fatalf("no event p_%s_0", uniq)
	}
}

func TestWriteStopsAtFirstFailure(t *testing.T) {
	k := smallImage(t)
	_, tr := boot(t, k, 0)
	var b strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&b, "p %s\n", synth.ProbeTargetName(i))
	}
	b.WriteString("p no_such_function_xyz\n")
	for i := 5; i < 10; i++ {
		fmt.Fprintf(&b, "p %s\n", synth.ProbeTargetName(i))
	}
	out, err := tr.WriteKprobeEvents(b.String())
	if err != errno.ENOENT {
		t.Fatalf("write: %v, want ENOENT", err)
	}
	for i, o := range out {
		switch {
		case i < 5 && (!o.Attempted || o.Code != 0):
			t.Errorf("line %d: %+v, want accepted", i, o)
		case i == 5 && o.Code != errno.ENOENT:
			t.Errorf("line %d: %+v, want ENOENT", i, o)
		case i > 5 && o.Attempted:
			t.Errorf("line %d attempted after the failure", i)
		}
	}
	if tr.NumEvents() != 5 {
		t.Fatalf("%d events, want 5", tr.NumEvents())
	}
}

// TestWalksGrowWithEvents: find_trace_kprobe walks all of dyn_event_list
// (D entries) and find_trace_event_call all of ftrace_events (T_s + D) for
// every new event, so the i-th line visits i and T_s + i entries; deleting
// the oldest event walks the whole dyn_event_list and reaches its file at
// depth E on tr->events, three times. A perf kprobe event touches no list.
func TestWalksGrowWithEvents(t *testing.T) {
	k := smallImage(t)
	m, tr := boot(t, k, 0)
	dyn, ev, files := fixture.Op(t, "trace.dyn_event.visit"), fixture.Op(t, "trace.ftrace_events.visit"), fixture.Op(t, "trace.tr_events.visit")
	ts := trace.ConfigFor(k).StaticEvents
	if want := trace.DebianStaticEvents + trace.SyntheticModuleEvents*len(k.Modules); ts != want {
		t.Fatalf("synthetic image: %d static events, want Debian's vmlinux and %d per module: %d", ts, trace.SyntheticModuleEvents, want)
	}
	const E = 40
	for i := 0; i < E; i++ {
		d0, e0 := m.C.Total(dyn), m.C.Total(ev)
		out, err := tr.WriteKprobeEvents("p " + synth.ProbeTargetName(i) + "\n")
		if err != nil {
			t.Fatalf("line %d: %v (%s)", i, err, out[0].Reason)
		}
		if got := m.C.Total(dyn) - d0; got != uint64(i) {
			t.Fatalf("line %d: %d dyn_event_list visits, want %d", i, got, i)
		}
		if got := m.C.Total(ev) - e0; got != uint64(ts+i) {
			t.Fatalf("line %d: %d ftrace_events visits, want %d", i, got, ts+i)
		}
	}
	if tr.NumEvents() != E || tr.NumTraceEvents() != ts+E {
		t.Fatalf("E %d T %d", tr.NumEvents(), tr.NumTraceEvents())
	}
	d0, e0 := m.C.Total(dyn), m.C.Total(ev)
	for i := E; i < E+10; i++ {
		pe, err := tr.PerfKprobeOpen(synth.ProbeTargetName(i), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if pe.TK.Kp.State().String() != "ftrace" {
			t.Fatalf("perf kprobe on a traced entry: state %s, want armed on ftrace at open", pe.TK.Kp.State())
		}
	}
	if m.C.Total(dyn) != d0 || m.C.Total(ev) != e0 || tr.NumEvents() != E {
		t.Fatalf("perf_kprobe walked the event lists: dyn +%d, ftrace_events +%d", m.C.Total(dyn)-d0, m.C.Total(ev)-e0)
	}
	// Delete the oldest: the whole dyn_event_list, and its file is the
	// deepest of tr->events (head-inserted), walked three times.
	d0, f0 := m.C.Total(dyn), m.C.Total(files)
	if out, err := tr.WriteKprobeEvents("-:kprobes/p_" + synth.ProbeTargetName(0) + "_0\n"); err != nil {
		t.Fatalf("delete: %v (%s)", err, out[0].Reason)
	}
	if got := m.C.Total(dyn) - d0; got != E {
		t.Fatalf("delete: %d dyn_event_list visits, want %d", got, E)
	}
	if got := m.C.Total(files) - f0; got != 3*E {
		t.Fatalf("delete: %d tr->events visits, want 3·%d", got, E)
	}
	// The newest is at depth 1.
	f0 = m.C.Total(files)
	if _, err := tr.WriteKprobeEvents(fmt.Sprintf("-:kprobes/p_%s_0\n", synth.ProbeTargetName(E-1))); err != nil {
		t.Fatal(err)
	}
	if got := m.C.Total(files) - f0; got != 3 {
		t.Fatalf("delete newest: %d tr->events visits, want 3", got)
	}
	if _, err := tr.WriteKprobeEvents("-:kprobes/no_such_event\n"); err != errno.ENOENT {
		t.Fatalf("deleting a missing event: %v, want ENOENT", err)
	}
}

// twoCopies renames one other function to the name of a probe target, so
// the name has exactly two vmlinux copies; it returns the name and both
// addresses (the lower first).
func twoCopies(t testing.TB, k *image.Kernel) (string, uint64, uint64) {
	name := synth.ProbeTargetName(3)
	var target uint64
	for _, s := range k.Symbols {
		if s.Name == name {
			target = s.Addr
		}
	}
	traced := map[uint64]bool{}
	for _, a := range k.McountLocs {
		traced[a] = true
	}
	for i, s := range k.Symbols {
		if s.IsText() && s.Size > 0 && s.Module == "" && s.Addr < target && traced[s.Addr] && strings.HasPrefix(s.Name, "ext4_") {
			k.Symbols[i].Name = name
			return name, s.Addr, target
		}
	}
	t.Fatal("no function to rename")
	return "", 0, 0
}

// TestDuplicateNames: tracefs refuses a name with two copies
// (EADDRNOTAVAIL) and a missing one (ENOENT) before allocating anything;
// register_kprobe by the same name takes the lowest-address copy (6.1).
func TestDuplicateNames(t *testing.T) {
	k := smallImage(t)
	name, low, _ := twoCopies(t, k)
	m, tr := boot(t, k, 0)
	kmalloc := fixture.Op(t, "kmalloc")
	for _, tc := range []struct {
		line string
		code errno.Errno
		why  string
	}{
		{"p " + name, errno.EADDRNOTAVAIL, "trace_kprobe: symbol is not unique (2 copies)"},
		{"p no_such_function_xyz", errno.ENOENT, `trace_kprobe: symbol "no_such_function_xyz" not found`},
	} {
		out, err := tr.WriteKprobeEvents(tc.line)
		if err != tc.code || out[0].Reason.String() != tc.why {
			t.Fatalf("%q: %v %q, want %v %q", tc.line, err, out[0].Reason, tc.code, tc.why)
		}
		// Refused before alloc_trace_kprobe: only argv_split's, the symbol
		// copy's and error_log's allocations (and their frees).
		_ = kmalloc
	}
	pe, err := tr.PerfKprobeOpen(name, 0, false)
	if pe != nil || err == nil {
		t.Fatalf("perf kprobe on a duplicated name: %v, want EADDRNOTAVAIL", err)
	}
	if code, _, _ := trace.Refusal(err); code != errno.EADDRNOTAVAIL {
		t.Fatalf("perf kprobe on a duplicated name: %v, want EADDRNOTAVAIL", err)
	}
	p := &kprobes.Kprobe{SymbolName: name}
	if err := m.KP.RegisterKprobe(p); err != nil {
		t.Fatalf("register_kprobe(%s): %v (%s)", name, err, p.Why())
	}
	if p.Addr != low {
		t.Fatalf("register_kprobe(%s) resolved %#x, want the lowest copy %#x", name, p.Addr, low)
	}
	// MOD:SYM and address probes skip the uniqueness check.
	if out, err := tr.WriteKprobeEvents(fmt.Sprintf("p:kprobes/byaddr 0x%x\n", low)); err != nil {
		t.Fatalf("address probe: %v (%s)", err, out[0].Reason)
	}
}

// TestEnableQueuesOptimization: a kprobe_events probe is registered
// disabled (prepared, not armed, not optimized); enabling arms it and
// queues the optprobe; the optimizer writes the jump.
func TestEnableQueuesOptimization(t *testing.T) {
	k := smallImage(t)
	m, tr := boot(t, k, 0)
	line := fmt.Sprintf("p %s+5\n", synth.ProbeTargetName(1)) // past the __fentry__ call
	out, err := tr.WriteKprobeEvents(line)
	if err != nil {
		t.Fatalf("%v (%s)", err, out[0].Reason)
	}
	p := out[0].TK.Kp
	if p.State() != kprobes.StateDisabled {
		t.Fatalf("after registration: %s, want disabled", p.State())
	}
	ev := out[0].TK.Event()
	if err := tr.EnableEvent(ev, true); err != nil {
		t.Fatal(err)
	}
	if p.State() != kprobes.StateOptimized || !m.KP.KickPending() {
		t.Fatalf("after enable: %s (optimizer kicked %v), want optimized and queued", p.State(), m.KP.KickPending())
	}
	m.KP.Drain()
	if err := tr.EnableEvent(ev, false); err != nil {
		t.Fatal(err)
	}
	m.KP.Drain()
	if p.State() != kprobes.StateDisabled {
		t.Fatalf("after disable: %s", p.State())
	}
	// An enabled event cannot be deleted; a disabled one can, with one
	// grace period for its kprobe.
	if err := tr.EnableEvent(ev, true); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.WriteKprobeEvents("-:" + ev.Group + "/" + ev.Name); err != errno.EBUSY {
		t.Fatalf("deleting an enabled event: %v, want EBUSY", err)
	}
	_ = tr.EnableEvent(ev, false)
	rcu := fixture.Op(t, "synchronize_rcu")
	r0 := m.C.Total(rcu)
	if _, err := tr.WriteKprobeEvents("-:" + ev.Group + "/" + ev.Name); err != nil {
		t.Fatal(err)
	}
	// unregister_kprobe's grace period and tracing_reset_all_online_cpus'
	// four (the event had been enabled: tracing_reset_online_cpus and
	// ring_buffer_reset_online_cpus, on the array and the max buffer).
	if got := m.C.Total(rcu) - r0; got != 5 {
		t.Fatalf("delete: %d grace periods, want 5", got)
	}
	if p.Registered() || tr.NumEvents() != 0 {
		t.Fatal("the probe or the event survived deletion")
	}
}
