package trace

import (
	"fmt"
	"github.com/kpsim/kpsim/alternative"

	"github.com/kpsim/kpsim/errno"
)

// tracingUpdateBuffers models kernel/trace/trace.c:tracing_update_buffers: the first
// enable expands the ring buffer to trace_buf_size on every CPU.
func (t *Tracing) tracingUpdateBuffers() {
	c := t.counters()
	c.Inc(opConst)
	if t.bufferExpanded {
		return
	}
	t.bufferExpanded = true
	pages := (traceBufSizeDefault + bufPageSize - 1) / bufPageSize
	c.Add(opRBPage, uint64(pages*t.d.KP.Cfg.CPUs))
}

// tracepointToggle models registering (or unregistering) the
// sched_switch / sched_wakeup / sched_wakeup_new probes of cmdline
// recording: each tracepoint's first probe flips its static key, a
// text_poke_bp batch on its site (3 pokes, 3 syncs).
func (t *Tracing) tracepointToggle() {
	c := t.counters()
	c.Add(opTPReg, schedTracepoints)
	c.Add(opTextPoke, 3*schedTracepoints)
	alternative.SyncRounds(c, 3*schedTracepoints, t.d.KP.Cfg.CPUs)
}

// ftraceEventEnableDisable models kernel/trace/trace_events.c:__ftrace_event_enable_disable
// for a kprobe event's file with TRACE_ITER_RECORD_CMD set (the default
// trace flags): enabling starts cmdline recording and calls
// kprobe_register(TRACE_REG_REGISTER) → enable_trace_kprobe; disabling
// the reverse. A second enable of an enabled file does nothing.
func (t *Tracing) ftraceEventEnableDisable(ev *Event, enable bool) *probeErr {
	c := t.counters()
	c.Inc(opConst)
	if enable {
		if ev.traceOn {
			return nil
		}
		t.cmdlineRef++
		if t.cmdlineRef == 1 {
			t.tracepointToggle()
		}
		if perr := t.enableTraceKprobe(ev, true); perr != nil {
			if t.cmdlineRef--; t.cmdlineRef == 0 {
				t.tracepointToggle()
			}
			return perr
		}
		ev.wasEnabled = true
		return nil
	}
	if !ev.traceOn {
		return nil
	}
	t.disableTraceKprobe(ev, true)
	if t.cmdlineRef--; t.cmdlineRef == 0 {
		t.tracepointToggle()
	}
	return nil
}

// enableTraceKprobe models kernel/trace/trace_kprobe.c:enable_trace_kprobe: the file
// link (tracefs) or TP_FLAG_PROFILE (perf); if the event was not enabled,
// enable_k(ret)probe on every probe that is registered and not gone, rolling
// back on the first failure.
func (t *Tracing) enableTraceKprobe(ev *Event, file bool) *probeErr {
	c := t.counters()
	enabled := ev.Enabled()
	if file {
		c.Inc(opKmalloc) // trace_probe_add_file: the event_file_link
		ev.traceOn = true
	} else {
		ev.profile = true
	}
	if enabled {
		return nil
	}
	var failed *probeErr
	var done []*TraceKprobe
	for _, tk := range ev.probes {
		if !tk.Registered() || tk.Kp.Gone() {
			continue
		}
		err := t.d.KP.EnableKprobe(tk.Kp)
		t.note("enable_kprobe", tk.describe(), errResult(err, "0: armed ("+tk.Kp.State().String()+")"))
		if err != nil {
			failed = kprobeRefusal(tk.Kp, err, tk.Return)
			if failed == nil {
				panic(fmt.Sprintf("trace: enable_kprobe %s: %v", tk.describe(), err))
			}
			failed.reason.Check = "enable_kprobe: " + failed.reason.Check
			break
		}
		done = append(done, tk)
	}
	if failed != nil {
		for _, tk := range done {
			_ = t.d.KP.DisableKprobe(tk.Kp)
		}
		if file {
			c.Inc(opKmalloc)
			ev.traceOn = false
		} else {
			ev.profile = false
		}
		return failed
	}
	return nil
}

// disableTraceKprobe models kernel/trace/trace_kprobe.c:disable_trace_kprobe: the last
// user disables every registered probe (disable_kprobe); the file link is
// freed with kvfree_rcu_mightsleep (queued, no wait).
func (t *Tracing) disableTraceKprobe(ev *Event, file bool) {
	c := t.counters()
	if file {
		ev.traceOn = false
	} else {
		ev.profile = false
	}
	if !ev.Enabled() {
		for _, tk := range ev.probes {
			if tk.Registered() {
				_ = t.d.KP.DisableKprobe(tk.Kp)
			}
		}
	}
	if file {
		c.Inc(opKmalloc)
	}
}

// enableWrite models what every write to an enable file does first: the
// user's open and write, kstrtoul_from_user and, for "1",
// tracing_update_buffers, counted in the enable (or disable) phase until
// the returned func restores the caller's.
func (t *Tracing) enableWrite(enable bool) (restore func()) {
	c := t.counters()
	ph := PhaseEnable
	if !enable {
		ph = PhaseDisable
	}
	prev := c.Enter(ph)
	c.Inc(opOpen)
	c.Inc(opSyscall)
	c.Inc(opConst) // kstrtoul_from_user
	if enable {
		t.tracingUpdateBuffers()
	}
	return func() { c.Enter(prev) }
}

// EnableEvent models kernel/trace/trace_events.c:event_enable_write, a write
// of "1" (or "0") to events/GROUP/NAME/enable:
// the user's open, the write, event_enable_write (kstrtoul,
// tracing_update_buffers, event_mutex) and ftrace_event_enable_disable.
func (t *Tracing) EnableEvent(ev *Event, enable bool) error {
	defer t.enableWrite(enable)()
	if t.events[eventKey{ev.Group, ev.Name}] != ev {
		return errno.ENODEV // the file was freed
	}
	if !ev.hasDir {
		// No events/GROUP/NAME/enable (no file, or no directory after a
		// tracefs or subsystem failure): the open fails.
		return errno.ENOENT
	}
	v := "0"
	if enable {
		v = "1"
	}
	t.note("event_enable_write", "events/"+ev.Group+"/"+ev.Name+"/enable", v)
	done := t.nest()
	defer done()
	if perr := t.ftraceEventEnableDisable(ev, enable); perr != nil {
		return perr
	}
	return nil
}

// EnableGroup models kernel/trace/trace_events.c:system_enable_write, a
// write of "1" (or "0") to events/GROUP/enable:
// system_enable_write → __ftrace_set_clr_event_nolock walks every file of
// tr->events (static and dynamic), compares each one's system, and
// enables the group's files one by one (no batching). The first error is
// returned, but the walk goes on; a group without events is -EINVAL.
// Per-event failures are reported through fail.
func (t *Tracing) EnableGroup(group string, enable bool, fail func(ev *Event, err error)) error {
	defer t.enableWrite(enable)()
	c := t.counters()
	n := uint64(t.cfg.StaticEvents + t.files.len()) // tr->events
	c.Add(opFileVisit, n)
	c.Add(opStrcmp, n)
	var first error
	found := false
	// tr->events is newest first.
	evs := t.Events()
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.Group != group || ev.noFile {
			continue
		}
		found = true
		if perr := t.ftraceEventEnableDisable(ev, enable); perr != nil {
			if first == nil {
				first = perr
			}
			if fail != nil {
				fail(ev, perr)
			}
		}
	}
	if !found {
		return errno.EINVAL
	}
	return first
}

// Refusal returns the errno and reason of an error from this package.
func Refusal(err error) (errno.Errno, Reason, bool) {
	code, reason, _, ok := RefusalAt(err)
	return code, reason, ok
}

// RefusalAt is Refusal with the address the kprobe had resolved to (0 when
// the refusal came before resolution).
func RefusalAt(err error) (errno.Errno, Reason, uint64, bool) {
	if pe, ok := err.(*probeErr); ok {
		return pe.code, pe.reason, pe.addr, true
	}
	if e, ok := err.(errno.Errno); ok {
		return e, Reason{}, 0, true
	}
	return 0, Reason{}, 0, false
}
