package trace_test

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
)

// TestDeleteOnceEnabledResetsBothBuffers: deleting an event that was ever
// enabled makes dyn_event_release call tracing_reset_all_online_cpus,
// which resets the instance's array_buffer and its max (7.3: snapshot)
// buffer, each with tracing_reset_online_cpus' synchronize_rcu and
// ring_buffer_reset_online_cpus' own, and every CPU buffer reset in the
// latter: 4 grace periods and 2 × CPUs resets, beside unregister_kprobe's
// grace period. A never-enabled event resets nothing.
func TestDeleteOnceEnabledResetsBothBuffers(t *testing.T) {
	for _, g := range gens {
		for _, enabled := range []bool{false, true} {
			_, m, tr := genMachine(t, g, nil)
			out, err := tr.WriteKprobeEvents(fmt.Sprintf("p:kprobes/ev %s\n", synth.ProbeTargetName(1)))
			if err != nil {
				t.Fatalf("%v: %v (%s)", g, err, out[0].Reason)
			}
			ev := out[0].TK.Event()
			if enabled {
				if err := tr.EnableEvent(ev, true); err != nil {
					t.Fatal(err)
				}
				if err := tr.EnableEvent(ev, false); err != nil {
					t.Fatal(err)
				}
				m.KP.Drain()
			}
			code, _, counts := write(t, m, tr, "-:kprobes/ev")
			if code != 0 {
				t.Fatalf("%v: delete: %v", g, code)
			}
			cpus := uint64(m.KP.Cfg.CPUs)
			wantRCU, wantReset := uint64(1), uint64(0) // unregister_kprobe's
			if enabled {
				wantRCU, wantReset = 1+4, 2*cpus
			}
			if got := counts[op(t, "synchronize_rcu")]; got != wantRCU {
				t.Errorf("%v enabled=%v: %d grace periods, want %d", g, enabled, got, wantRCU)
			}
			if got := counts[op(t, "ring_buffer.reset_cpu")]; got != wantReset {
				t.Errorf("%v enabled=%v: %d CPU buffer resets, want %d", g, enabled, got, wantReset)
			}
		}
	}
}

// TestPerfOpenArmFailureNoTracepointSync: when arming fails inside
// perf_event_open (kprobe_register(TRACE_REG_PERF_REGISTER) → enable_kprobe
// → arm_kprobe_ftrace's ftrace_set_filter_ip -ENOMEM), perf_trace_event_reg
// takes its "fail:" path (buffers and list freed, no
// tracepoint_synchronize_unregister) and perf_kprobe_init destroys the
// local trace_kprobe: unregister_kprobe's one grace period, nothing else.
// The alloc_percpu / free_percpu pairs balance as on a successful open and
// close.
func TestPerfOpenArmFailureNoTracepointSync(t *testing.T) {
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		fn := synth.ProbeTargetName(2) // traced: armed through ftrace at +0
		m.Faults.Set(ftrace.FaultHashAlloc, 0)
		snap := m.C.Snapshot()
		pe, err := tr.PerfKprobeOpen(fn, 0, false)
		if pe != nil || errnoOf(err) != errno.ENOMEM {
			t.Fatalf("%v: perf open with a failing arm: %v, want ENOMEM", g, err)
		}
		counts := m.C.Since(snap)
		if got := counts[op(t, "synchronize_rcu")]; got != 1 {
			t.Errorf("%v: %d grace periods, want 1 (unregister_kprobe's)", g, got)
		}
		if got := counts[op(t, "percpu.alloc")]; got != 2*(1+1+4) {
			t.Errorf("%v: %d alloc_percpu/free_percpu, want %d", g, got, 2*(1+1+4))
		}
		if m.KP.Reg.Len() != 0 {
			t.Fatalf("%v: %d kprobes left", g, m.KP.Reg.Len())
		}
	}
}

// TestKprobeEventOnStaticEvent: p:sched/sched_switch is refused -EEXIST
// (trace_probe_register_event_call: find_trace_event_call finds vmlinux's
// static sched/sched_switch), in every generation; nothing is left.
func TestKprobeEventOnStaticEvent(t *testing.T) {
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		code, o, _ := write(t, m, tr, "p:sched/sched_switch "+synth.ProbeTargetName(1))
		if code != errno.EEXIST {
			t.Errorf("%v: p:sched/sched_switch: %v (%s), want EEXIST", g, code, o.Reason)
		}
		if tr.NumEvents() != 0 || m.KP.Reg.Len() != 0 {
			t.Errorf("%v: %d events, %d kprobes left", g, tr.NumEvents(), m.KP.Reg.Len())
		}
	}
}

// TestKprobeEventInStaticSystem: p:sched/mine joins the static system
// sched (event_subsystem_dir finds it on tr->systems): only the event's
// directory is made (6.1: 1 + 6 tracefs entries; 6.12, 7.3: one
// eventfs_inode), no group directory.
func TestKprobeEventInStaticSystem(t *testing.T) {
	for _, g := range gens {
		_, m, tr := genMachine(t, g, nil)
		code, o, counts := write(t, m, tr, "p:sched/mine "+synth.ProbeTargetName(1))
		if code != 0 {
			t.Fatalf("%v: %v (%s)", g, code, o.Reason)
		}
		dentries, eis := uint64(7), uint64(0)
		if g != image.Gen61 {
			dentries, eis = 0, 1
		}
		if counts[op(t, "tracefs.create")] != dentries || counts[op(t, "eventfs.create_dir")] != eis {
			t.Errorf("%v: %d tracefs entries, %d eventfs_inodes made, want %d and %d", g,
				counts[op(t, "tracefs.create")], counts[op(t, "eventfs.create_dir")], dentries, eis)
		}
	}
}

// TestModuleEventsCounted: the small image's two synthetic modules bring
// 7 trace events each (trace.SyntheticModuleEvents) to ftrace_events
// beside vmlinux's 1,506 (Debian 6.1's _ftrace_events), so
// find_trace_event_call walks 1,520 entries for a new event.
func TestModuleEventsCounted(t *testing.T) {
	for _, g := range gens {
		k, m, tr := genMachine(t, g, nil)
		if len(k.Modules) != 2 {
			t.Fatalf("small image has %d modules", len(k.Modules))
		}
		if tr.NumTraceEvents() != 1520 {
			t.Errorf("%v: %d trace events, want 1506 + 2 x 7", g, tr.NumTraceEvents())
		}
		code, o, counts := write(t, m, tr, "p:newgrp/ev "+synth.ProbeTargetName(1))
		if code != 0 {
			t.Fatalf("%v: %v (%s)", g, code, o.Reason)
		}
		if got := counts[op(t, "trace.ftrace_events.visit")]; got != 1520 {
			t.Errorf("%v: find_trace_event_call visited %d, want 1520", g, got)
		}
	}
}
