package trace_test

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
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
