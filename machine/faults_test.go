package machine_test

import (
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace/fprobe"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/module"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
	"github.com/kpsim/kpsim/x86"
)

// One test per fault point: the errno (or the kernel's silent fallback),
// the rollback, and the no-leak invariants after teardown. A new fault
// point without an entry here fails TestEveryFaultPointHasATest.
var faultTests = map[string]func(t *testing.T){
	"kprobe.insn_slot.alloc":    testInsnSlot,
	"kprobe.optinsn_slot.alloc": func(t *testing.T) { testOptinsnSlot(t, "kprobe.optinsn_slot.alloc", "get_optinsn_slot") },
	"kprobe.optinsn_buf.alloc": func(t *testing.T) {
		testOptinsnSlot(t, "kprobe.optinsn_buf.alloc", "arch_prepare_optimized_kprobe: kzalloc")
	},
	"kprobe.aggr.alloc":            testAggrAlloc,
	"kretprobe.rethook.alloc":      testRethookAlloc,
	"kretprobe.instance.alloc":     testKretprobeInstance,
	"trace_kprobe.alloc":           testTraceKprobeAlloc,
	"tracefs.dir":                  testTracefsDir,
	"trace_event_file.alloc":       func(t *testing.T) { testEventWithoutDir(t, "trace_event_file.alloc@1", false) },
	"trace.subsystem.alloc":        func(t *testing.T) { testEventWithoutDir(t, "trace.subsystem.alloc@1", true) },
	"perf.trace_event.alloc":       testPerfAlloc,
	"perf.event.alloc":             testPerfEvent,
	"ftrace.hash.alloc":            testFtraceHash,
	"ftrace.hash.move":             testFtraceHashMove,
	"ftrace.pages.alloc":           testFtracePages,
	"fprobe.rethook.alloc":         testFprobeRethook,
	"bpf.kprobe_multi.alloc":       testKprobeMultiAlloc,
	"jump_label.index.alloc":       func(t *testing.T) { testIndexFallback(t, sim.JumpLabelIndex, "jump_label.index.alloc") },
	"static_call.index.alloc":      func(t *testing.T) { testIndexFallback(t, sim.StaticCallIndex, "static_call.index.alloc") },
	"bug.index.alloc":              func(t *testing.T) { testIndexFallback(t, sim.BugIndex, "bug.index.alloc") },
	"kprobe_blacklist.index.alloc": func(t *testing.T) { testIndexFallback(t, sim.BlacklistIndex, "kprobe_blacklist.index.alloc") },
	"bug.module_index.alloc":       testModuleBugIndex,
	"trace.event_index.alloc":      testTraceEventIndexAlloc,
	"kprobe_blacklist.entry.alloc": testBlacklistEntry,
	"kallsyms.dynamic32.alloc":     testDynamic32,
	"rhashtable.tbl.alloc":         testRhashtable,
	"maple.node.alloc":             testMapleNode,
	"module.elf.alloc":             func(t *testing.T) { testModuleAlloc(t, "module.elf.alloc", "dummy.ko") },
	"module.core.alloc":            func(t *testing.T) { testModuleAlloc(t, "module.core.alloc", "dummy.ko") },
	"module.init.alloc":            func(t *testing.T) { testModuleAlloc(t, "module.init.alloc", "dummy.ko") },
	"module.percpu.alloc":          func(t *testing.T) { testModuleAlloc(t, "module.percpu.alloc", "amd_freq_sensitivity.ko") },
	"module.jump_label.alloc":      testModuleJumpLabel,
	"module.static_call.alloc":     testModuleStaticCall,
}

func TestFaultPoints(t *testing.T) {
	names := make([]string, 0, len(faultTests))
	for n := range faultTests {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t.Run(n, faultTests[n])
	}
}

// TestEveryFaultPointHasATest: every registered point has its test here,
// and every test names a registered point.
func TestEveryFaultPointHasATest(t *testing.T) {
	known := map[string]bool{}
	for _, fi := range sim.FaultPoints() {
		known[fi.Name] = true
		if faultTests[fi.Name] == nil {
			t.Errorf("fault point %s (%s) has no test in machine/faults_test.go", fi.Name, fi.Doc)
		}
		if fi.Doc == "" {
			t.Errorf("fault point %s has no doc line (kpsim list shows it)", fi.Name)
		}
	}
	for n := range faultTests {
		if !known[n] {
			t.Errorf("faultTests has %s, which is no registered fault point", n)
		}
	}
}

// --- the kernel and its probe targets ---------------------------------

var fk struct {
	once sync.Once
	k    *image.Kernel
	err  error
	tg   targets
}

type targets struct {
	int3   []kprobes.Kprobe // second-instruction probes that register as int3 probes
	opt    []kprobes.Kprobe // int3 probes that get jump-optimized on their own
	ftrace []kprobes.Kprobe // function-entry probes on an ftrace site
}

func faultKernel(t *testing.T) (*image.Kernel, targets) {
	t.Helper()
	fk.once.Do(func() {
		cfg := synth.DefaultConfig()
		cfg.Functions, cfg.InitFunctions, cfg.JumpEntries, cfg.JumpKeys = 1500, 60, 600, 150
		cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 150, 30, 400, 40
		cfg.Modules, cfg.ModuleFunctions, cfg.ModuleBugEntries, cfg.SampleFunctions = 1, 40, 20, 0
		fk.k, _, fk.err = synth.Generate(cfg)
		if fk.err == nil {
			fk.tg, fk.err = findTargets(fk.k)
		}
	})
	if fk.err != nil {
		t.Fatal(fk.err)
	}
	return fk.k, fk.tg
}

// findTargets registers candidates one at a time on a plain machine and
// keeps those that behave as the tests need.
func findTargets(k *image.Kernel) (targets, error) {
	var tg targets
	m, err := machine.Boot(k, machine.DefaultConfig())
	if err != nil {
		return tg, err
	}
	try := func(p *kprobes.Kprobe) bool {
		if m.KP.RegisterKprobe(p) != nil {
			return false
		}
		m.KP.Drain()
		return true
	}
	seen := map[string]bool{} // a duplicated name resolves to its first copy
	for _, f := range k.Functions() {
		if f.Module != "" || f.Size < 16 || seen[f.Name] || len(tg.int3) >= 320 && len(tg.ftrace) >= 8 && len(tg.opt) >= 4 {
			continue
		}
		seen[f.Name] = true
		if a, ok := m.Syms.LookupName(nil, f.Name); !ok || a != f.Addr {
			continue
		}
		entry := &kprobes.Kprobe{SymbolName: f.Name}
		if len(tg.ftrace) < 8 && try(entry) {
			if entry.Ftrace() {
				tg.ftrace = append(tg.ftrace, kprobes.Kprobe{SymbolName: f.Name})
			}
			m.KP.UnregisterKprobes([]*kprobes.Kprobe{entry})
			m.KP.Drain()
		}
		in, err := x86.DecodeKernel(nil, k.Text(f.Addr, x86.MaxInsnSize))
		if err != nil || uint64(in.Len) >= f.Size {
			continue
		}
		p := &kprobes.Kprobe{SymbolName: f.Name, Offset: uint32(in.Len)}
		if !try(p) || p.Ftrace() {
			continue
		}
		optimized := p.Parent() != nil && p.Parent().Optimized()
		m.KP.UnregisterKprobes([]*kprobes.Kprobe{p})
		m.KP.Drain()
		if len(tg.int3) < 320 {
			tg.int3 = append(tg.int3, kprobes.Kprobe{SymbolName: f.Name, Offset: uint32(in.Len)})
		}
		if optimized && len(tg.opt) < 4 {
			tg.opt = append(tg.opt, kprobes.Kprobe{SymbolName: f.Name, Offset: uint32(in.Len)})
		}
	}
	if len(tg.int3) < 300 || len(tg.opt) < 2 || len(tg.ftrace) < 4 {
		return tg, fmt.Errorf("fault kernel: %d int3, %d optimizable, %d ftrace targets", len(tg.int3), len(tg.opt), len(tg.ftrace))
	}
	if err := m.CheckTeardown(); err != nil {
		return tg, err
	}
	return tg, nil
}

// fresh copies templates into new probes.
func fresh(ts []kprobes.Kprobe) []*kprobes.Kprobe {
	out := make([]*kprobes.Kprobe, len(ts))
	for i := range ts {
		out[i] = &kprobes.Kprobe{SymbolName: ts[i].SymbolName, Offset: ts[i].Offset, Addr: ts[i].Addr, HasPostHandler: ts[i].HasPostHandler}
	}
	return out
}

func boot(t *testing.T, sw sim.Switches, plan string) *machine.Machine {
	t.Helper()
	k, _ := faultKernel(t)
	f, err := sim.ParseFaults(plan)
	if err != nil {
		t.Fatal(err)
	}
	cfg := machine.DefaultConfig()
	cfg.Switches, cfg.Faults = sw, f
	m, err := machine.Boot(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	check(t, m)
	return m
}

func check(t *testing.T, m *machine.Machine) {
	t.Helper()
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// teardown unregisters ps, drains the optimizer and asserts no leak.
func teardown(t *testing.T, m *machine.Machine, ps ...*kprobes.Kprobe) {
	t.Helper()
	if len(ps) > 0 {
		m.KP.UnregisterKprobes(ps)
	}
	m.KP.Drain()
	if err := m.CheckTeardown(); err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, err error, want errno.Errno) {
	t.Helper()
	var e errno.Errno
	if code, _, ok := trace.Refusal(err); ok {
		e = code
	} else if !errors.As(err, &e) {
		e = 0
	}
	if e != want {
		t.Fatalf("got %v, want -%s", err, want.Name())
	}
}

func wantWhy(t *testing.T, p *kprobes.Kprobe, check string) {
	t.Helper()
	if w := p.Why(); !strings.Contains(w.String(), check) {
		t.Fatalf("reason %q, want it to name %s", w, check)
	}
}

func kmallocs(m *machine.Machine) uint64 { return m.C.Total(kprobes.OpKmalloc) }

// --- kprobes -----------------------------------------------------------

// testInsnSlot: get_insn_slot's page allocation fails: register_kprobe
// returns -ENOMEM and leaves nothing behind; in register_kprobes the
// failure of the N-th page (probe 4096/15 = 273, the first probe that
// needs a second kprobe_insn_page) unregisters the 273 before it
// (kernel/kprobes.c:register_kprobes), and collect_one_slot keeps the
// first page, emptied, because it is the only one.
func testInsnSlot(t *testing.T) {
	_, tg := faultKernel(t)
	t.Run("register_kprobe", func(t *testing.T) {
		m := boot(t, 0, "kprobe.insn_slot.alloc@1")
		p := fresh(tg.int3[:1])[0]
		wantErrno(t, m.KP.RegisterKprobe(p), errno.ENOMEM)
		wantWhy(t, p, "get_insn_slot")
		if p.Registered() || m.KP.Reg.Len() != 0 {
			t.Fatal("the failed probe is registered")
		}
		if pages, _, _, _, _, _ := m.KP.SlotPages(); pages != 0 {
			t.Fatalf("%d insn pages after the failed allocation", pages)
		}
		teardown(t, m)
		// The fault was @1: the probe now registers.
		p = fresh(tg.int3[:1])[0]
		if err := m.KP.RegisterKprobe(p); err != nil {
			t.Fatal(err)
		}
		teardown(t, m, p)
	})
	t.Run("register_kprobes_midway", func(t *testing.T) {
		m := boot(t, 0, "kprobe.insn_slot.alloc@2")
		ps := fresh(tg.int3[:300])
		perPage := 4096 / x86.MaxInsnSize
		i, err := m.KP.RegisterKprobes(ps)
		wantErrno(t, err, errno.ENOMEM)
		if i != perPage {
			t.Fatalf("register_kprobes failed at probe %d, want %d (the first of the second page)", i, perPage)
		}
		check(t, m)
		for j, p := range ps {
			if p.Registered() {
				t.Fatalf("probe %d still registered after the rollback", j)
			}
			want := "rolled back"
			switch {
			case j == i:
				want = "get_insn_slot"
			case j > i:
				want = "not attempted"
			}
			wantWhy(t, p, want)
		}
		pages, used, _, _, _, _ := m.KP.SlotPages()
		if pages != 1 || used != 0 {
			t.Fatalf("after the rollback: %d insn pages, %d slots used; want the one page kept empty (list_is_singular)", pages, used)
		}
		teardown(t, m)
	})
}

// testOptinsnSlot: get_optinsn_slot (or the staging buffer's kzalloc
// before it) fails: arch_prepare_optimized_kprobe returns -ENOMEM,
// __prepare_optimized_kprobe leaves the optinsn unprepared,
// try_to_optimize_kprobe frees the optimized_kprobe: the probe registers
// (0) and stays an int3 probe.
func testOptinsnSlot(t *testing.T, point, by string) {
	_, tg := faultKernel(t)
	m := boot(t, 0, point)
	p := fresh(tg.opt[:1])[0]
	if err := m.KP.RegisterKprobe(p); err != nil {
		t.Fatal(err)
	}
	m.KP.Drain()
	check(t, m)
	if p.Parent() != nil {
		t.Fatal("an aggregator was kept for an unprepared optprobe")
	}
	wantWhy(t, p, by)
	if _, _, _, optPages, _, _ := m.KP.SlotPages(); optPages != 0 {
		t.Fatalf("%d optinsn pages after the failed allocation", optPages)
	}
	teardown(t, m, p)
}

// testAggrAlloc: alloc_aggr_kprobe's kzalloc fails. In
// try_to_optimize_kprobe it is silent (the probe stays a plain int3
// probe); in register_aggr_kprobe, for a second probe at the address, it
// is -ENOMEM and the first probe is untouched.
func testAggrAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "kprobe.aggr.alloc")
	ps := fresh([]kprobes.Kprobe{tg.opt[0], tg.opt[0]})
	if err := m.KP.RegisterKprobe(ps[0]); err != nil {
		t.Fatal(err)
	}
	if ps[0].Parent() != nil {
		t.Fatal("the probe was aggregated although alloc_aggr_kprobe failed")
	}
	wantWhy(t, ps[0], "alloc_aggr_kprobe")
	wantErrno(t, m.KP.RegisterKprobe(ps[1]), errno.ENOMEM)
	wantWhy(t, ps[1], "register_aggr_kprobe: alloc_aggr_kprobe")
	if !ps[0].Registered() || ps[1].Registered() || m.KP.Reg.Len() != 1 {
		t.Fatalf("after the failed aggregation: first registered %v, second %v, %d entries", ps[0].Registered(), ps[1].Registered(), m.KP.Reg.Len())
	}
	check(t, m)
	teardown(t, m, ps[0])
}

// testRethookAlloc: register_kretprobe's rethook_alloc fails: -ENOMEM
// after one kzalloc, nothing registered, nothing to free.
func testRethookAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "kretprobe.rethook.alloc")
	rp := &kprobes.Kretprobe{Kp: *fresh(tg.ftrace[:1])[0], MaxActive: 4}
	before := kmallocs(m)
	wantErrno(t, m.KP.RegisterKretprobe(rp), errno.ENOMEM)
	wantWhy(t, &rp.Kp, "rethook_alloc")
	if d := kmallocs(m) - before; d != 1 || rp.Instances() != 0 || m.KP.Reg.Len() != 0 {
		t.Fatalf("kmallocs %d (want 1), instances %d, entries %d", d, rp.Instances(), m.KP.Reg.Len())
	}
	teardown(t, m)
}

// testKretprobeInstance: the 3rd kretprobe_instance kzalloc fails:
// rethook_free frees the 2 nodes and the rethook (1 + 3 allocations, 3
// frees), -ENOMEM. In register_kretprobes the i-th failure unregisters
// the first i (kernel/kprobes.c:register_kretprobes).
func testKretprobeInstance(t *testing.T) {
	_, tg := faultKernel(t)
	t.Run("register_kretprobe", func(t *testing.T) {
		m := boot(t, 0, "kretprobe.instance.alloc@3")
		rp := &kprobes.Kretprobe{Kp: *fresh(tg.ftrace[:1])[0], MaxActive: 4}
		before := kmallocs(m)
		wantErrno(t, m.KP.RegisterKretprobe(rp), errno.ENOMEM)
		if d := kmallocs(m) - before; d != 1+3+3 || rp.Instances() != 0 || m.KP.Reg.Len() != 0 {
			t.Fatalf("kmallocs %d (want 7), instances %d, entries %d", d, rp.Instances(), m.KP.Reg.Len())
		}
		teardown(t, m)
	})
	t.Run("register_kretprobes_midway", func(t *testing.T) {
		m := boot(t, 0, "kretprobe.instance.alloc@5") // 2 instances each: the third kretprobe's first
		var rps []*kprobes.Kretprobe
		for _, p := range fresh(tg.ftrace[:4]) {
			rps = append(rps, &kprobes.Kretprobe{Kp: *p, MaxActive: 2})
		}
		i, err := m.KP.RegisterKretprobes(rps)
		wantErrno(t, err, errno.ENOMEM)
		if i != 2 {
			t.Fatalf("register_kretprobes failed at %d, want 2", i)
		}
		for j, rp := range rps {
			if rp.Kp.Registered() || rp.Instances() != 0 {
				t.Fatalf("kretprobe %d: registered %v, %d instances after the rollback", j, rp.Kp.Registered(), rp.Instances())
			}
		}
		wantWhy(t, &rps[0].Kp, "rolled back")
		wantWhy(t, &rps[3].Kp, "not attempted")
		teardown(t, m)
		// An empty batch is -EINVAL.
		if _, err := m.KP.RegisterKretprobes(nil); !errors.Is(err, errno.EINVAL) {
			t.Fatalf("empty batch: %v", err)
		}
	})
}

// --- the event layer ---------------------------------------------------

func tracing(m *machine.Machine) *trace.Tracing {
	return trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: m.Kernel, C: m.C, Faults: m.Faults}, trace.ConfigFor(m.Kernel))
}

func checkTrace(t *testing.T, m *machine.Machine, tr *trace.Tracing, final bool) {
	t.Helper()
	check(t, m)
	if err := tr.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if final {
		m.KP.Drain()
		if err := tr.CheckTeardown(); err != nil {
			t.Fatal(err)
		}
		if err := m.CheckTeardown(); err != nil {
			t.Fatal(err)
		}
	}
}

func eventLines(ts []kprobes.Kprobe, ret bool) string {
	var b strings.Builder
	for i, p := range ts {
		kind := "p"
		if ret {
			kind = "r"
		}
		fmt.Fprintf(&b, "%s:kpsim/ev%d %s+%d\n", kind, i, p.SymbolName, p.Offset)
	}
	return b.String()
}

func deleteAll(t *testing.T, tr *trace.Tracing) {
	t.Helper()
	var b strings.Builder
	for _, ev := range tr.Events() {
		fmt.Fprintf(&b, "-:%s/%s\n", ev.Group, ev.Name)
	}
	if b.Len() > 0 {
		if _, err := tr.WriteKprobeEvents(b.String()); err != nil {
			t.Fatal(err)
		}
	}
}

// testTraceKprobeAlloc: alloc_trace_kprobe fails: the write returns
// -ENOMEM for that line; a kprobe_events write is not all or nothing (the
// lines before stay, trace_parse_run_command stops at the failing line).
func testTraceKprobeAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	for _, ret := range []bool{false, true} {
		t.Run(fmt.Sprintf("return=%v", ret), func(t *testing.T) {
			m := boot(t, 0, "trace_kprobe.alloc@2")
			tr := tracing(m)
			out, err := tr.WriteKprobeEvents(eventLines(tg.ftrace[:3], ret))
			wantErrno(t, err, errno.ENOMEM)
			if !out[0].Attempted || out[0].Code != 0 || out[1].Code != errno.ENOMEM || out[2].Attempted {
				t.Fatalf("outcomes %+v", out)
			}
			if tr.NumEvents() != 1 || m.KP.Reg.Len() != 1 {
				t.Fatalf("%d events, %d kprobes: want the first line's only", tr.NumEvents(), m.KP.Reg.Len())
			}
			checkTrace(t, m, tr, false)
			deleteAll(t, tr)
			checkTrace(t, m, tr, true)
		})
	}
}

// testTracefsDir: tracefs_create_dir fails: __add_event_to_tracers
// ignores it, the event exists without its directory; deleting it works
// and removes no directory.
func testTracefsDir(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "tracefs.dir")
	tr := tracing(m)
	if _, err := tr.WriteKprobeEvents(eventLines(tg.ftrace[:2], false)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range tr.Events() {
		if ev.HasDir() {
			t.Fatalf("event %s/%s has a directory", ev.Group, ev.Name)
		}
		wantErrno(t, tr.EnableEvent(ev, true), errno.ENOENT) // no enable file
	}
	checkTrace(t, m, tr, false)
	deleteAll(t, tr)
	checkTrace(t, m, tr, true)
}

// testEventWithoutDir: the first event of the write gets no directory and
// the write still succeeds; ev0's own enable file does not exist
// (-ENOENT), ev1 has both, and deleting both leaves nothing behind.
//
// trace_event_file.alloc: trace_create_new_event fails for the first
// event: __add_event_to_tracers ignores it, the event is registered
// without a file, so the group's enable file (a walk of tr->events) skips
// it.
//
// trace.subsystem.alloc: the first event of a new group cannot get its
// group directory: event_create_dir -ENOMEM, ignored; the event has its
// file on tr->events, so the group's enable reaches it. The group's next
// event creates the group directory; deleting both leaves no group behind
// (the first one was never counted in it).
func testEventWithoutDir(t *testing.T, plan string, groupEnablesEv0 bool) {
	_, tg := faultKernel(t)
	m := boot(t, 0, plan)
	tr := tracing(m)
	if _, err := tr.WriteKprobeEvents(eventLines(tg.ftrace[:2], false)); err != nil {
		t.Fatal(err)
	}
	ev0, ev1 := tr.LookupEvent("kpsim", "ev0"), tr.LookupEvent("kpsim", "ev1")
	if ev0 == nil || ev1 == nil || ev0.HasDir() || !ev1.HasDir() {
		t.Fatal("want ev0 without a directory, ev1 with one")
	}
	wantErrno(t, tr.EnableEvent(ev0, true), errno.ENOENT)
	if err := tr.EnableGroup("kpsim", true, nil); err != nil {
		t.Fatal(err)
	}
	if ev0.Enabled() != groupEnablesEv0 || !ev1.Enabled() {
		t.Fatalf("after events/kpsim/enable: ev0 enabled %v (want %v), ev1 %v", ev0.Enabled(), groupEnablesEv0, ev1.Enabled())
	}
	checkTrace(t, m, tr, false)
	if err := tr.EnableGroup("kpsim", false, nil); err != nil {
		t.Fatal(err)
	}
	deleteAll(t, tr)
	checkTrace(t, m, tr, true)
}

// testPerfAlloc: perf_trace_event_reg's alloc_percpu fails (the event's
// hlist heads @1, the first perf_trace_buf @2): perf_event_open returns
// -ENOMEM and perf_kprobe_init destroys the local trace_kprobe (its kprobe
// unregistered). A later open succeeds.
func testPerfAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	for _, at := range []string{"@1", "@2"} {
		t.Run(at, func(t *testing.T) {
			m := boot(t, 0, "perf.trace_event.alloc"+at)
			tr := tracing(m)
			_, err := tr.PerfKprobeOpen(tg.ftrace[0].SymbolName, 0, false)
			wantErrno(t, err, errno.ENOMEM)
			if m.KP.Reg.Len() != 0 {
				t.Fatalf("%d kprobes left after the failed open", m.KP.Reg.Len())
			}
			checkTrace(t, m, tr, true)
			reopenPerf(t, m, tr, tg.ftrace[0].SymbolName)
		})
	}
}

// reopenPerf: after a failed perf_event_open, the next open of sym works
// and its close leaves no trace.
func reopenPerf(t *testing.T, m *machine.Machine, tr *trace.Tracing, sym string) {
	t.Helper()
	pe, err := tr.PerfKprobeOpen(sym, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	tr.PerfKprobeClose(pe)
	checkTrace(t, m, tr, true)
}

// testPerfEvent: perf_event_alloc fails: perf_event_open -ENOMEM with no
// trace_kprobe made and no kprobe registered; the next open works.
func testPerfEvent(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "perf.event.alloc@1")
	tr := tracing(m)
	before := kmallocs(m)
	_, err := tr.PerfKprobeOpen(tg.ftrace[0].SymbolName, 0, false)
	wantErrno(t, err, errno.ENOMEM)
	if d := kmallocs(m) - before; d != 1 || m.KP.Reg.Len() != 0 {
		t.Fatalf("failed open: %d kmallocs (want the one that failed), %d kprobes", d, m.KP.Reg.Len())
	}
	checkTrace(t, m, tr, true)
	reopenPerf(t, m, tr, tg.ftrace[0].SymbolName)
}

// --- ftrace ------------------------------------------------------------

// testFtraceHash: ftrace_set_hash's allocation fails. Arming a kprobe on
// ftrace: arm_kprobe_ftrace → -ENOMEM, register_kprobe unhashes the probe
// and returns it; no ftrace ops is left registered or filtered. An
// fprobe: ftrace_set_filter_ips -ENOMEM, the ops released.
func testFtraceHash(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "ftrace.hash.alloc")
	for _, post := range []bool{false, true} {
		p := fresh(tg.ftrace[:1])[0]
		p.HasPostHandler = post
		wantErrno(t, m.KP.RegisterKprobe(p), errno.ENOMEM)
		wantWhy(t, p, "__arm_kprobe_ftrace")
		if p.Registered() {
			t.Fatal("registered after the arm failure")
		}
		check(t, m)
	}
	env := &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: 8, Faults: m.Faults}
	fp := &fprobe.Fprobe{Name: "t", EntryHandler: true}
	addrs := []uint64{m.Ftrace.Location(nil, symAddr(t, m, tg.ftrace[0].SymbolName))}
	wantErrno(t, env.RegisterFprobeIPs(m.C, fp, addrs), errno.ENOMEM)
	teardown(t, m)

	// In the disarm: __disarm_kprobe_ftrace has already decremented
	// kprobe_ftrace_enabled (and unregistered the ops for its last user)
	// when ftrace_set_filter_ip fails; it WARNs and returns the error,
	// __disable_kprobe restores the flag and fails, unregister_kprobes
	// skips the probe: it stays registered, its ip in the filter, the
	// user count one short, for good. The teardown check reports it.
	m = boot(t, 0, "ftrace.hash.alloc@2")
	p := fresh(tg.ftrace[:1])[0]
	if err := m.KP.RegisterKprobe(p); err != nil {
		t.Fatal(err)
	}
	if n := m.KP.UnregisterKprobes([]*kprobes.Kprobe{p}); n != 0 || !p.Registered() || p.Disabled() {
		t.Fatalf("unregister after the failed disarm: %d unregistered, registered %v, disabled %v", n, p.Registered(), p.Disabled())
	}
	o := m.Ftrace.KprobeOps(false)
	if o.DisarmWarnings() != 1 || o.Users() != 0 || len(o.Filter()) != 1 || o.Enabled() {
		t.Fatalf("after the WARN: %d warnings, %d users, filter %#x, registered %v", o.DisarmWarnings(), o.Users(), o.Filter(), o.Enabled())
	}
	check(t, m)
	m.KP.UnregisterKprobes([]*kprobes.Kprobe{p})
	if err := m.CheckTeardown(); err == nil || !strings.Contains(err.Error(), "WARNed") {
		t.Fatalf("teardown after the WARN: %v", err)
	}
}

// testFtraceHashMove: ftrace_hash_move's allocation fails. Arming:
// register_kprobe -ENOMEM, nothing filtered; an fprobe: -ENOMEM. In the
// disarm of one of two armed probes (the third ftrace_set_filter_ip): the
// WARN of __disarm_kprobe_ftrace, as with ftrace.hash.alloc.
func testFtraceHashMove(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "ftrace.hash.move")
	p := fresh(tg.ftrace[:1])[0]
	wantErrno(t, m.KP.RegisterKprobe(p), errno.ENOMEM)
	if p.Registered() || len(m.Ftrace.KprobeOps(false).Filter()) != 0 {
		t.Fatal("the failed arm left the probe registered or filtered")
	}
	env := &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: 8, Faults: m.Faults}
	addrs := []uint64{m.Ftrace.Location(nil, symAddr(t, m, tg.ftrace[1].SymbolName))}
	wantErrno(t, env.RegisterFprobeIPs(m.C, &fprobe.Fprobe{Name: "t", EntryHandler: true}, addrs), errno.ENOMEM)
	teardown(t, m)

	m = boot(t, 0, "ftrace.hash.move@3")
	ps := fresh(tg.ftrace[:2])
	for _, p := range ps {
		if err := m.KP.RegisterKprobe(p); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.KP.UnregisterKprobes(ps[:1]); n != 0 || !ps[0].Registered() {
		t.Fatalf("unregister after the failed disarm: %d unregistered, registered %v", n, ps[0].Registered())
	}
	if w := m.Ftrace.KprobeOps(false).DisarmWarnings(); w != 1 {
		t.Fatalf("%d disarm WARNs, want 1", w)
	}
	check(t, m)
}

func symAddr(t *testing.T, m *machine.Machine, name string) uint64 {
	t.Helper()
	a, ok := m.Syms.LookupName(nil, name)
	if !ok {
		t.Fatalf("no symbol %s", name)
	}
	return a
}

// testFtracePages: ftrace_allocate_pages fails for the module's records at
// its ftrace_module_init: ignored, the module has no ftrace records, so a
// probe at one of its function entries is a plain int3 probe where the
// kernel without the fault makes it an ftrace probe. The loader's side of
// the same call leaves the .ko's "call __fentry__" sites untouched.
func testFtracePages(t *testing.T) {
	k, _ := faultKernel(t)
	mod := k.Modules[0]
	var site uint64
	for _, a := range mod.McountLocs {
		if mod.Text.Contains(a) {
			site = a
			break
		}
	}
	if site == 0 {
		t.Fatal("the module has no traced core function")
	}
	ok, bad := boot(t, 0, ""), boot(t, 0, "ftrace.pages.alloc")
	if ok.Ftrace.Location(nil, site) != site || bad.Ftrace.Location(nil, site) != 0 {
		t.Fatalf("ftrace_location(%#x): %#x without the fault, %#x with it", site, ok.Ftrace.Location(nil, site), bad.Ftrace.Location(nil, site))
	}
	p, q := &kprobes.Kprobe{Addr: site}, &kprobes.Kprobe{Addr: site}
	if err := ok.KP.RegisterKprobe(p); err != nil || !p.Ftrace() {
		t.Fatalf("without the fault: %v, ftrace %v", err, p.Ftrace())
	}
	if err := bad.KP.RegisterKprobe(q); err == nil && q.Ftrace() {
		t.Fatal("with the fault the probe is still on ftrace")
	}
	teardown(t, ok, p)
	teardown(t, bad, q)

	// The loader: dummy.ko keeps its call __fentry__ sites.
	fk := fakeKernelFor(t, "dummy.ko")
	f, _ := sim.ParseFaults("ftrace.pages.alloc")
	lm, err := module.NewLoader(fk, module.Options{Faults: f}).LoadFile("dummy.ko", readKO(t, "dummy.ko"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range lm.Module.McountLocs {
		if lm.Module.Text.Contains(a) && fk.Text(a, 1)[0] != 0xe8 {
			t.Fatalf("mcount site %#x is %x, want the call __fentry__ left", a, fk.Text(a, 5))
		}
	}
}

// testFprobeRethook: fprobe_init_rethook fails: register_fprobe_ips
// returns -ENOMEM after fprobe_fail_cleanup; the fprobe registers once the
// fault is past.
func testFprobeRethook(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "fprobe.rethook.alloc@1")
	env := &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: 8, Faults: m.Faults}
	fp := &fprobe.Fprobe{Name: "t", EntryHandler: true, ExitHandler: true}
	var addrs []uint64
	for _, p := range tg.ftrace[:3] {
		addrs = append(addrs, symAddr(t, m, p.SymbolName))
	}
	wantErrno(t, env.RegisterFprobeIPs(m.C, fp, addrs), errno.ENOMEM)
	check(t, m)
	if err := env.RegisterFprobeIPs(m.C, fp, addrs); err != nil {
		t.Fatal(err)
	}
	if err := env.UnregisterFprobe(m.C, fp); err != nil {
		t.Fatal(err)
	}
	teardown(t, m)

	// Through the BPF door (a kretprobe.multi link of 6.1): the link
	// create fails with -ENOMEM, bpf_link_cleanup drops the module
	// references, no link and no ftrace user is left; the next attach
	// works.
	m = boot(t, 0, "fprobe.rethook.alloc@1")
	bk := &bpf.Kernel{Gen: image.Gen61, Kconfig: bpf.Kconfig{FPROBE: true}, Ftrace: m.Ftrace,
		Fprobe: &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: 8, Faults: m.Faults}, Syms: m.Syms, Modules: m.Kernel.Modules}
	prog := &bpf.Prog{Name: "t", ExpectedAttachType: bpf.AttachKprobeMulti}
	var syms []string
	for _, p := range tg.ftrace[:3] {
		syms = append(syms, p.SymbolName)
	}
	attr := bpf.KprobeMultiAttr{Flags: bpf.FKprobeMultiReturn, Syms: syms, Cnt: uint32(len(syms))}
	_, err := bk.KprobeMultiLinkAttach(m.C, prog, attr)
	wantErrno(t, err, errno.ENOMEM)
	if len(bk.Links()) != 0 {
		t.Fatal("a link was left after the failed attach")
	}
	check(t, m)
	attr.Syms = append([]string(nil), syms...)
	l, err := bk.KprobeMultiLinkAttach(m.C, prog, attr)
	if err != nil {
		t.Fatal(err)
	}
	if err := bk.ReleaseLink(m.C, l); err != nil {
		t.Fatal(err)
	}
	teardown(t, m)
}

// testKprobeMultiAlloc: each allocation of bpf_kprobe_multi_link_attach
// in turn (@1 addrs, @2 cookies, @3 and @4 copy_user_syms' arrays, @5 the
// link) fails: -ENOMEM, no link, no fprobe on ftrace; @6 is past them all
// and the attach works.
func testKprobeMultiAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	var syms []string
	for _, p := range tg.ftrace[:3] {
		syms = append(syms, p.SymbolName)
	}
	for n := 1; n <= 6; n++ {
		m := boot(t, 0, fmt.Sprintf("bpf.kprobe_multi.alloc@%d", n))
		bk := &bpf.Kernel{Gen: image.Gen61, Kconfig: bpf.Kconfig{FPROBE: true}, Ftrace: m.Ftrace,
			Fprobe: &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: 8}, Syms: m.Syms, Modules: m.Kernel.Modules, Faults: m.Faults}
		attr := bpf.KprobeMultiAttr{Syms: append([]string(nil), syms...), Cookies: []uint64{1, 2, 3}, Cnt: uint32(len(syms))}
		l, err := bk.KprobeMultiLinkAttach(m.C, &bpf.Prog{Name: "t", ExpectedAttachType: bpf.AttachKprobeMulti}, attr)
		if n <= 5 {
			wantErrno(t, err, errno.ENOMEM)
			if len(bk.Links()) != 0 {
				t.Fatalf("@%d: a link was left", n)
			}
			teardown(t, m)
			continue
		}
		if err != nil {
			t.Fatalf("@%d: %v", n, err)
		}
		if err := bk.ReleaseLink(m.C, l); err != nil {
			t.Fatal(err)
		}
		teardown(t, m)
	}
}

// --- late-init indexes ---------------------------------------------------

// probePoints are addresses around every kind of reserved site, plus the
// int3 targets: each registered alone and unregistered at once.
func probePoints(k *image.Kernel, tg targets) []uint64 {
	var out []uint64
	add := func(a uint64) { out = append(out, a-1, a, a+1) }
	for i := 0; i < len(k.JumpEntries) && i < 12; i++ {
		add(k.JumpEntries[i].Code)
	}
	for i := 0; i < len(k.StaticCallSites) && i < 12; i++ {
		add(k.StaticCallSites[i].Addr)
	}
	for i := 0; i < len(k.BugEntries) && i < 12; i++ {
		add(k.BugEntries[i].Addr)
	}
	for i := 0; i < len(k.Blacklist) && i < 12; i++ {
		add(k.Blacklist[i])
	}
	for _, m := range k.Modules {
		for i := 0; i < len(m.BugEntries) && i < 12; i++ {
			add(m.BugEntries[i].Addr)
		}
	}
	for _, p := range tg.int3[:10] {
		add(k.SymbolsByName(p.SymbolName)[0].Addr + uint64(p.Offset))
	}
	return out
}

// decisions registers each point alone: its errno and reason.
func decisions(t *testing.T, m *machine.Machine, pts []uint64) []string {
	t.Helper()
	out := make([]string, len(pts))
	for i, a := range pts {
		p := &kprobes.Kprobe{Addr: a}
		err := m.KP.RegisterKprobe(p)
		out[i] = fmt.Sprintf("%v %s", err, p.Why())
		if err == nil {
			m.KP.UnregisterKprobes([]*kprobes.Kprobe{p})
			m.KP.Drain()
		}
	}
	check(t, m)
	return out
}

// testTraceEventIndexAlloc: trace-event-index's late-init allocation
// fails: no index, find_trace_kprobe and find_trace_event_call walk the
// lists as upstream does, and every line decides as upstream and as the
// indexed kernel (accepted lines, then -EEXIST for a probe already on its
// event, which ends the write).
func testTraceEventIndexAlloc(t *testing.T) {
	_, tg := faultKernel(t)
	set := sim.Switches(0).With(sim.TraceEventIndex)
	walk, ok := sim.LookupOp("trace.ftrace_events.visit")
	if !ok {
		t.Fatal("no op trace.ftrace_events.visit")
	}
	writes := []string{eventLines(tg.ftrace[:3], false), eventLines(tg.ftrace[:1], false) + eventLines(tg.ftrace[3:4], false)}
	type run struct {
		m  *machine.Machine
		tr *trace.Tracing
	}
	runs := map[string]run{}
	for name, f := range map[string]struct {
		sw   sim.Switches
		plan string
	}{"upstream": {0, ""}, "indexed": {set, ""}, "fallback": {set, "trace.event_index.alloc"}} {
		m := boot(t, f.sw, f.plan)
		tr := tracing(m)
		m.AtLateInit(tr.LateInit)
		runs[name] = run{m, tr}
	}
	if runs["upstream"].tr.Indexed() || !runs["indexed"].tr.Indexed() || runs["fallback"].tr.Indexed() {
		t.Fatal("want the index built only without the fault")
	}
	for i, w := range writes {
		outs := map[string]string{}
		for name, r := range runs {
			o, err := r.tr.WriteKprobeEvents(w)
			if want := []error{nil, errno.EEXIST}[i]; err != want {
				t.Fatalf("%s: write %d: %v, want %v", name, i, err, want)
			}
			var b strings.Builder
			for _, x := range o {
				fmt.Fprintf(&b, "%q %v %v %#x %s\n", x.Line, x.Attempted, x.Code, x.Addr, x.Reason)
			}
			outs[name] = b.String()
			checkTrace(t, r.m, r.tr, false)
		}
		if outs["indexed"] != outs["upstream"] || outs["fallback"] != outs["upstream"] {
			t.Fatalf("write %d: upstream %s\nindexed %s\nfallback %s", i, outs["upstream"], outs["indexed"], outs["fallback"])
		}
	}
	if got, want := runs["fallback"].m.C.Total(walk), runs["upstream"].m.C.Total(walk); got != want || want == 0 {
		t.Fatalf("fallback walked %d ftrace_events entries, upstream %d: want the same walks", got, want)
	}
	if n := runs["indexed"].m.C.Total(walk); n != 0 {
		t.Fatalf("indexed kernel walked %d ftrace_events entries", n)
	}
	for _, r := range runs {
		deleteAll(t, r.tr)
		checkTrace(t, r.m, r.tr, true)
	}
}

// testIndexFallback: the late-init index allocation fails: no index, and
// every decision is the linear path's, identical to the indexed kernel's
// and to upstream's.
func testIndexFallback(t *testing.T, sw sim.Switch, point string) {
	for _, set := range []sim.Switches{sim.Switches(0).With(sw), sim.Switches(0).With(sw).With(sim.ReservationBtree)} {
		t.Run(set.Name(), func(t *testing.T) { testIndexFallbackIn(t, sw, set, point) })
	}
}

// testIndexFallbackIn: the sorted-array index, and with reservation-btree
// the B-tree form, built or not (the same allocation point guards both).
func testIndexFallbackIn(t *testing.T, sw sim.Switch, set sim.Switches, point string) {
	k, tg := faultKernel(t)
	idx, bad, lin := boot(t, set, ""), boot(t, set, point), boot(t, 0, "")
	indexed := func(m *machine.Machine) bool {
		switch sw {
		case sim.JumpLabelIndex:
			return m.JumpLabel.Indexed()
		case sim.StaticCallIndex:
			return m.StaticCall.Indexed()
		case sim.BugIndex:
			return m.Bugs.Indexed()
		}
		return m.Blacklist.Indexed()
	}
	if !indexed(idx) || indexed(bad) {
		t.Fatalf("indexed without the fault %v, with it %v", indexed(idx), indexed(bad))
	}
	pts := probePoints(k, tg)
	want := decisions(t, lin, pts)
	for name, m := range map[string]*machine.Machine{"indexed": idx, "fallback": bad} {
		got := decisions(t, m, pts)
		for i := range pts {
			if got[i] != want[i] {
				t.Fatalf("%s at %#x: %s; upstream: %s", name, pts[i], got[i], want[i])
			}
		}
		teardown(t, m)
	}
}

// testModuleBugIndex: module_bug_finalize's index allocation fails: the
// module's bug table is walked linearly, with the same answers.
func testModuleBugIndex(t *testing.T) {
	k, tg := faultKernel(t)
	set := sim.Switches(0).With(sim.ModuleBugIndex)
	idx, bad, lin := boot(t, set, ""), boot(t, set, "bug.module_index.alloc"), boot(t, 0, "")
	mod := k.Modules[0]
	if len(mod.BugEntries) == 0 {
		t.Fatal("the module has no bug entries")
	}
	if !idx.Bugs.ModuleIndexed(mod) || bad.Bugs.ModuleIndexed(mod) {
		t.Fatalf("module indexed without the fault %v, with it %v", idx.Bugs.ModuleIndexed(mod), bad.Bugs.ModuleIndexed(mod))
	}
	pts := probePoints(k, tg)
	want := decisions(t, lin, pts)
	for _, m := range []*machine.Machine{idx, bad} {
		got := decisions(t, m, pts)
		if !slices.Equal(got, want) {
			t.Fatal("module bug decisions differ from upstream's")
		}
		teardown(t, m)
	}
}

// testBlacklistEntry: kprobe_add_ksym_blacklist's kmalloc fails at boot:
// populate_kprobe_blacklist stops with -ENOMEM ("kprobes not restricted"),
// and a NOKPROBE_SYMBOL function the kernel refuses without the fault is
// no longer refused by within_kprobe_blacklist.
func testBlacklistEntry(t *testing.T) {
	k, _ := faultKernel(t)
	ok, bad := boot(t, 0, ""), boot(t, 0, "kprobe_blacklist.entry.alloc@1")
	if err := bad.Blacklist.PopulateError(); !errors.Is(err, errno.ENOMEM) {
		t.Fatalf("populate error %v, want -ENOMEM", err)
	}
	for _, e := range bad.Blacklist.Entries() {
		if e.Module == nil {
			// Module entries come later, from add_module_kprobe_blacklist.
			t.Fatalf("vmlinux blacklist entry %+v after the first kmalloc failed", e)
		}
	}
	changed := 0
	for _, a := range k.Blacklist {
		p, q := &kprobes.Kprobe{Addr: a}, &kprobes.Kprobe{Addr: a}
		perr, qerr := ok.KP.RegisterKprobe(p), bad.KP.RegisterKprobe(q)
		if perr != nil && strings.Contains(p.Why().String(), "within_kprobe_blacklist") {
			if qerr != nil && strings.Contains(q.Why().String(), "within_kprobe_blacklist") {
				t.Fatalf("%#x: still refused by the blacklist with the list empty", a)
			}
			changed++
		}
		for m, r := range map[*machine.Machine]*kprobes.Kprobe{ok: p, bad: q} {
			if r.Registered() {
				m.KP.UnregisterKprobes([]*kprobes.Kprobe{r})
			}
		}
	}
	if changed == 0 {
		t.Fatal("no blacklisted function to compare")
	}
	teardown(t, ok)
	teardown(t, bad)
}

// testDynamic32: the dynamic32 kallsyms offset table's allocation fails:
// the lookups walk the markers and answer the same.
func testDynamic32(t *testing.T) {
	k, _ := faultKernel(t)
	tables, err := machine.KallsymsTables(k)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := sim.ParseFaults("kallsyms.dynamic32.alloc")
	good, err := kallsyms.NewCompressed(tables, kallsyms.Dynamic32Variant, kallsyms.CompressedOptions{Modules: k.Modules})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := kallsyms.NewCompressed(tables, kallsyms.Dynamic32Variant, kallsyms.CompressedOptions{Modules: k.Modules, Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	fns := k.Functions()
	for i := 0; i < len(fns); i += 37 {
		s := fns[i]
		a1, ok1 := good.LookupName(nil, s.Name)
		a2, ok2 := bad.LookupName(nil, s.Name)
		z1, o1, k1 := good.LookupSizeOffset(nil, s.Addr+1)
		z2, o2, k2 := bad.LookupSizeOffset(nil, s.Addr+1)
		if a1 != a2 || ok1 != ok2 || z1 != z2 || o1 != o2 || k1 != k2 {
			t.Fatalf("%s: the fallback answers differently", s.Name)
		}
	}
	if built, _ := good.DynamicBuilt(); !built {
		t.Fatal("dynamic32 table not built without the fault")
	}
	if built, _ := bad.DynamicBuilt(); built {
		t.Fatal("dynamic32 table built although its allocation failed")
	}
}

// registerUntil registers targets one at a time and returns the probes
// registered and the first error's probe (nil if none failed).
func registerUntil(t *testing.T, m *machine.Machine, ts []kprobes.Kprobe) (ok []*kprobes.Kprobe, failed *kprobes.Kprobe, err error) {
	t.Helper()
	for _, p := range fresh(ts) {
		if err = m.KP.RegisterKprobe(p); err != nil {
			check(t, m)
			return ok, p, err
		}
		ok = append(ok, p)
	}
	check(t, m)
	return ok, nil, nil
}

// testRhashtable: kprobe-rhashtable: the table allocation of an insert's
// rehash fails: register_kprobe returns -ENOMEM and gives the prepared
// insn slot back (the invariants would see a leaked slot).
func testRhashtable(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, sim.Switches(0).With(sim.KprobeRhashtable), "rhashtable.tbl.alloc")
	ok, failed, err := registerUntil(t, m, tg.int3)
	if failed == nil {
		t.Fatalf("%d probes registered without one table allocation", len(ok))
	}
	wantErrno(t, err, errno.ENOMEM)
	if failed.Registered() {
		t.Fatal("the failed probe is registered")
	}
	teardown(t, m, ok...)
}

// testMapleNode: kprobe-btree: a node split's allocation fails:
// register_kprobe returns -ENOMEM before touching the hash table.
func testMapleNode(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree), "maple.node.alloc")
	ok, failed, err := registerUntil(t, m, tg.int3)
	if failed == nil {
		t.Fatalf("%d probes registered without one node split", len(ok))
	}
	wantErrno(t, err, errno.ENOMEM)
	if failed.Registered() || m.KP.Reg.Len() != len(ok) {
		t.Fatalf("after the failed insert: %d entries for %d probes", m.KP.Reg.Len(), len(ok))
	}
	teardown(t, m, ok...)
}

// --- module load ---------------------------------------------------------

// The .ko files in ../module/testdata are Debian's linux-image-6.1.0-57-amd64
// (6.1.192-3) modules, unchanged (GPL-2.0): dummy.ko (a static call into
// vmlinux), amd_freq_sensitivity.ko (a .data..percpu section) and
// test_static_keys.ko (jump entries on vmlinux-side keys of
// test_static_key_base).

func readKO(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "module", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeKernelFor is a vmlinux model defining every symbol the module
// leaves undefined: text for calls, data for the rest (static keys and
// static-call keys among them), and the static-call trampolines of the
// keys it uses.
func fakeKernelFor(t *testing.T, ko string) *image.Kernel {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(readKO(t, ko)))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var undef []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && s.Name != "" {
			undef = append(undef, s.Name)
		}
	}
	k := &image.Kernel{Name: "fake", Config: image.Config{BugVerbose: true, ReturnsPatched: true, RetThunk: true}}
	text := &image.Region{Name: ".text", Kind: image.CoreText, Start: 0xffffffff81000000, Bytes: make([]byte, 0x10000)}
	k.Regions = []*image.Region{text}
	var ti, di uint64
	addText := func(n string) {
		k.Symbols = append(k.Symbols, image.Symbol{Name: n, Addr: text.Start + ti*64, Size: 64, Type: 'T'})
		ti++
	}
	addData := func(n string) {
		k.Symbols = append(k.Symbols, image.Symbol{Name: n, Addr: 0xffffffff82000000 + di*64, Size: 64, Type: 'D'})
		di++
	}
	defer func() { slices.SortFunc(k.Symbols, func(a, b image.Symbol) int { return cmp.Compare(a.Addr, b.Addr) }) }()
	for _, n := range undef {
		switch {
		case strings.HasPrefix(n, "__SCT__"):
			addText(n)
			addData("__SCK__" + strings.TrimPrefix(n, "__SCT__"))
		case strings.HasPrefix(n, "base_") || n == "__per_cpu_offset" || n == "boot_cpu_data" || n == "pv_ops":
			addData(n)
		default:
			addText(n)
		}
	}
	return k
}

func loadKO(t *testing.T, k *image.Kernel, ko, plan string) (*module.Loaded, error) {
	t.Helper()
	f, err := sim.ParseFaults(plan)
	if err != nil {
		t.Fatal(err)
	}
	return module.NewLoader(k, module.Options{Faults: f}).LoadFile(ko, readKO(t, ko))
}

// wantLoadENOMEM: the load fails with -ENOMEM and the image is as before.
func wantLoadENOMEM(t *testing.T, k *image.Kernel, lm *module.Loaded, err error) {
	t.Helper()
	if !errors.Is(err, errno.ENOMEM) || lm != nil {
		t.Fatalf("load: %v, want -ENOMEM", err)
	}
	if len(k.Modules) != 0 {
		t.Fatalf("%d modules in the image after the failed load", len(k.Modules))
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
}

// testModuleAlloc: load_module's allocations (copy_module_from_user's
// __vmalloc, move_module's two module_allocs, percpu_modalloc) fail with
// -ENOMEM, the module is not in the image, and the next load works.
func testModuleAlloc(t *testing.T, point, ko string) {
	k := fakeKernelFor(t, ko)
	lm, err := loadKO(t, k, ko, point)
	wantLoadENOMEM(t, k, lm, err)
	if lm, err = loadKO(t, k, ko, ""); err != nil || lm.Module.State != image.ModuleLive {
		t.Fatalf("load without the fault: %v", err)
	}
}

// testModuleJumpLabel: jump_label_add_module's kzalloc fails for a
// vmlinux-side key (jlm @1, jlm2 of a key's first module user @2): the
// COMING notifier returns -ENOMEM, the load fails and leaves nothing.
func testModuleJumpLabel(t *testing.T) {
	for _, at := range []string{"@1", "@2"} {
		k := fakeKernelFor(t, "test_static_keys.ko")
		lm, err := loadKO(t, k, "test_static_keys.ko", "module.jump_label.alloc"+at)
		wantLoadENOMEM(t, k, lm, err)
	}
	k := fakeKernelFor(t, "test_static_keys.ko")
	lm, err := loadKO(t, k, "test_static_keys.ko", "")
	if err != nil || len(lm.Module.JumpEntries) == 0 {
		t.Fatalf("load without the fault: %v", err)
	}
}

// testModuleStaticCall: __static_call_init's kzalloc fails: the first
// static_call_mod of a key @1, the second one converting a key that still
// holds its vmlinux sites @2: -ENOMEM, the load fails.
func testModuleStaticCall(t *testing.T) {
	for _, at := range []string{"@1", "@2"} {
		k := fakeKernelFor(t, "dummy.ko")
		// cond_resched has call sites in vmlinux: static_call_init stored
		// them in the key, so the module's use converts it.
		key := k.SymbolsByName("__SCK__cond_resched")[0].Addr
		k.StaticCallSites = []image.StaticCallSite{{Addr: k.Regions[0].Start + 0x8000, Key: key}}
		lm, err := loadKO(t, k, "dummy.ko", "module.static_call.alloc"+at)
		wantLoadENOMEM(t, k, lm, err)
	}
}

// TestFtraceAggrPostHandlerWarn: a 6.1.192 path that reaches
// __disarm_kprobe_ftrace's WARN without any fault. A kprobe on an ftrace
// site is armed on kprobe_ftrace_ops; a second one with a post_handler at
// the address makes an aggregator whose post_handler add_new_kprobe sets
// without re-arming (kernel/kprobes.c:1264); disarming the aggregator then
// picks kprobe_ipmodify_ops from ap->post_handler (disarm_kprobe_ftrace,
// 1133): kprobe_ipmodify_enabled goes to -1, ftrace_set_filter_ip(remove)
// is -ENOENT (the ip is in the other ops' filter), the WARN fires,
// __disable_kprobe fails and unregister_kprobes leaves the probe
// registered. Found by the soak campaign with the invariants after every
// step; the invariants report it as ErrAfterKernelWarn.
func TestFtraceAggrPostHandlerWarn(t *testing.T) {
	_, tg := faultKernel(t)
	m := boot(t, 0, "")
	ps := fresh([]kprobes.Kprobe{tg.ftrace[0], tg.ftrace[0]})
	ps[1].HasPostHandler = true
	for _, p := range ps {
		if err := m.KP.RegisterKprobe(p); err != nil {
			t.Fatal(err)
		}
	}
	check(t, m)
	if n := m.KP.UnregisterKprobes(ps); n != 1 || !ps[1].Registered() {
		t.Fatalf("unregister_kprobes: %d unregistered, the post-handler probe registered %v; want 1 and true", n, ps[1].Registered())
	}
	ipm := m.Ftrace.KprobeOps(true)
	if ipm.DisarmWarnings() != 1 || ipm.Users() != -1 || len(m.Ftrace.KprobeOps(false).Filter()) != 1 {
		t.Fatalf("ipmodify ops: %d WARNs, %d users; kprobe_ftrace_ops filter %#x", ipm.DisarmWarnings(), ipm.Users(), m.Ftrace.KprobeOps(false).Filter())
	}
	if err := m.CheckTeardown(); !errors.Is(err, machine.ErrAfterKernelWarn) {
		t.Fatalf("teardown: %v, want ErrAfterKernelWarn", err)
	}
}
