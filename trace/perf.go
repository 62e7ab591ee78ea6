package trace

import (
	"fmt"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/kprobes"
)

// PerfEvent is one perf event opened on the kprobe PMU.
type PerfEvent struct {
	TK *TraceKprobe
}

// PerfKprobeOpen models kernel/trace/trace_event_perf.c:perf_kprobe_init as
// perf_event_open(2) reaches it with attr.type = the kprobe
// PMU's type, config1 = func (or 0), config2 = the offset (or the address
// when func is empty), config bit 0 = retprobe:
// perf_init_event's idr_find, perf_kprobe_event_init (perfmon_capable),
// perf_kprobe_init (the name copied into a 512-byte buffer),
// create_local_trace_kprobe (the uniqueness check, a trace_kprobe on no
// list, registered disabled), then perf_trace_event_init →
// perf_trace_event_reg, which arms the probe inside the open
// (kprobe_register(TRACE_REG_PERF_REGISTER) → enable_trace_kprobe).
func (t *Tracing) PerfKprobeOpen(fn string, addrOrOffset uint64, retprobe bool) (*PerfEvent, error) {
	c := t.counters()
	prev := c.Enter(PhasePerfOpen)
	defer c.Enter(prev)
	c.Inc(opSyscall)
	c.Inc(opKmalloc) // perf_event_alloc: kmem_cache_alloc_node of the event
	if t.d.Faults.Fail(FaultPerfEvent) {
		// kernel/events/core.c:perf_event_alloc returns ERR_PTR(-ENOMEM)
		// before the PMU is asked: no trace_kprobe, nothing to undo.
		return nil, refuse(errno.ENOMEM, "perf_event_alloc", "kmem_cache_alloc_node of the perf_event failed")
	}
	c.Inc(opKmalloc) // and its context bits
	c.Inc(opIDR)
	c.Inc(opConst) // perfmon_capable
	if fn != "" {
		if perr := t.g.perfCopyFunc(t, fn); perr != nil {
			return nil, perr
		}
	}
	t.note("perf_event_open", fmt.Sprintf("type=kprobe, config1=%q, config2=%#x, retprobe=%v", fn, addrOrOffset, retprobe), "")
	done := t.nest()
	defer done()
	tk, perr := t.createLocalTraceKprobe(fn, addrOrOffset, retprobe)
	if fn != "" {
		c.Inc(opKmalloc) // kfree(func)
	}
	if perr != nil {
		c.Add(opKmalloc, 2) // the perf event freed
		return nil, perr
	}
	// perf_trace_event_init → perf_trace_event_perm (no raw sample) and
	// perf_trace_event_reg.
	c.Inc(opConst)
	ev := tk.ev
	if perr := t.perfTraceEventAlloc(); perr != nil {
		t.destroyLocalTraceKprobe(tk)
		c.Add(opKmalloc, 2) // the perf event freed
		return nil, perr
	}
	t.note("perf_trace_event_reg", "", "kprobe_register(TRACE_REG_PERF_REGISTER): the probe is armed inside the open")
	if perr := t.enableTraceKprobe(ev, false); perr != nil {
		t.perfTraceEventRegFail()
		t.destroyLocalTraceKprobe(tk)
		c.Add(opKmalloc, 2)
		perr.reason.Check = "perf_trace_event_reg: " + perr.reason.Check
		return nil, perr
	}
	t.perfTotalRef++ // total_ref_count++: only once the probe is armed
	return &PerfEvent{TK: tk}, nil
}

// perfTraceEventRegFail models the "fail:" tail of
// kernel/trace/trace_event_perf.c:perf_trace_event_reg when
// class->reg(TRACE_REG_PERF_REGISTER) fails (6.1.192, 6.12.117, 7.3): the
// perf_trace_buf buffers are freed if no perf trace event is live
// (total_ref_count was never raised for this one) and the event's per-CPU
// list with its last reference. There is no
// tracepoint_synchronize_unregister on this path: that wait is
// perf_trace_event_unreg's, for an event that was registered.
func (t *Tracing) perfTraceEventRegFail() {
	c := t.counters()
	if t.perfTotalRef == 0 {
		c.Add(opPercpu, perfNrContexts)
	}
	c.Inc(opPercpu)
}

// perfKprobeInitFunc models the name copy of
// kernel/trace/trace_event_perf.c:perf_kprobe_init (6.1.192): kzalloc of
// KSYM_NAME_LEN and strncpy_from_user; a name with no NUL in 512 bytes is
// -E2BIG (the buffer and the perf event freed).
func (t *Tracing) perfKprobeInitFunc(fn string) *probeErr {
	c := t.counters()
	c.Inc(opKmalloc) // kzalloc(KSYM_NAME_LEN)
	c.Inc(opCopyUser)
	c.Add(opLineByte, uint64(min(len(fn)+1, KsymNameLen)))
	if len(fn) >= KsymNameLen {
		c.Add(opKmalloc, 3)
		return refuse(errno.E2BIG, "perf_kprobe_init", "function name has no NUL in 512 bytes")
	}
	return nil
}

// perfKprobeInitFunc612 models the name copy of
// kernel/trace/trace_event_perf.c:perf_kprobe_init (6.12.117, 7.3):
// strndup_user(func, KSYM_NAME_LEN): strnlen_user (a user access over the
// name and its NUL, at most 513 bytes), then memdup_user of strlen+1 (a
// kmalloc of that size and a copy_from_user). Too long is -EINVAL from
// strndup_user, returned as -E2BIG before anything is allocated (only the
// perf event is freed).
func (t *Tracing) perfKprobeInitFunc612(fn string) *probeErr {
	c := t.counters()
	c.Inc(opCopyUser) // strnlen_user
	c.Add(opLineByte, uint64(min(len(fn)+1, KsymNameLen+1)))
	if len(fn)+1 > KsymNameLen {
		c.Add(opKmalloc, 2)
		return refuse(errno.E2BIG, "perf_kprobe_init", "strndup_user (6.12+): function name longer than KSYM_NAME_LEN: -EINVAL, returned as -E2BIG")
	}
	c.Inc(opKmalloc) // memdup_user
	c.Inc(opCopyUser)
	c.Add(opLineByte, uint64(len(fn)+1))
	return nil
}

// perfTraceEventAlloc models the allocations of
// kernel/trace/trace_event_perf.c:perf_trace_event_reg for an event's first
// perf user (a perf-local kprobe event has exactly one): alloc_percpu of
// the per-CPU hlist heads, then, when no perf trace event is live
// (total_ref_count == 0), alloc_percpu of each perf_trace_buf[i]. A NULL
// is "goto fail": the buffers (all PERF_NR_CONTEXTS free_percpu'd, NULL
// ones are no-ops) and the list are freed and perf_trace_init returns
// -ENOMEM, after which perf_kprobe_init destroys the local trace_kprobe.
func (t *Tracing) perfTraceEventAlloc() *probeErr {
	c := t.counters()
	c.Inc(opPercpu) // the event's per-CPU hlist heads
	if t.d.Faults.Fail(FaultPerfAlloc) {
		return refuse(errno.ENOMEM, "perf_trace_event_reg: alloc_percpu", "the event's per-CPU hlist heads")
	}
	c.Add(opCPUList, uint64(t.d.KP.Cfg.CPUs))
	if t.perfTotalRef == 0 {
		for i := 0; i < perfNrContexts; i++ {
			c.Inc(opPercpu) // perf_trace_buf[i]
			if t.d.Faults.Fail(FaultPerfAlloc) {
				c.Add(opPercpu, uint64(i)+1) // the buffers allocated so far and the list
				return refuse(errno.ENOMEM, "perf_trace_event_reg: alloc_percpu", fmt.Sprintf("perf_trace_buf[%d]", i))
			}
		}
	}
	return nil
}

// perfTraceEventUnreg models the shared tail of perf_trace_event_unreg:
// tracepoint_synchronize_unregister (an SRCU and an RCU grace period), the
// per-CPU list heads freed, the perf buffers with the last user.
func (t *Tracing) perfTraceEventUnreg() {
	c := t.counters()
	c.Add(opSyncRCU, 2)
	c.Inc(opPercpu)
	t.perfTotalRef--
	if t.perfTotalRef == 0 {
		c.Add(opPercpu, perfNrContexts)
	}
}

// PerfKprobeClose models kernel/trace/trace_event_perf.c:perf_kprobe_destroy,
// closing the event: under
// event_mutex (perf_trace_event_unreg: kprobe_register(PERF_UNREGISTER)
// → disable_trace_kprobe, then tracepoint_synchronize_unregister), then
// destroy_local_trace_kprobe (unregister_kprobe, with its own
// synchronize_rcu, and free_trace_kprobe).
func (t *Tracing) PerfKprobeClose(pe *PerfEvent) {
	c := t.counters()
	prev := c.Enter(PhasePerfClose)
	defer c.Enter(prev)
	c.Inc(opSyscall)
	t.disableTraceKprobe(pe.TK.ev, false)
	t.perfTraceEventUnreg()
	t.destroyLocalTraceKprobe(pe.TK)
	c.Add(opKmalloc, 2) // the perf event (freed after RCU: queued)
}

func (t *Tracing) destroyLocalTraceKprobe(tk *TraceKprobe) {
	t.__unregisterTraceKprobe(tk)
	t.freeTraceKprobe(tk)
}

// createLocalTraceKprobe models kernel/trace/trace_kprobe.c:create_local_trace_kprobe:
// the uniqueness check for a plain name, a trace_kprobe named after the
// function (or DUMMY_EVENT) in group kprobes that is put on no list (no
// dyn_event, no ftrace_events entry, no id, no tracefs), and
// __register_trace_kprobe. -ENOENT is returned as is (no pending).
func (t *Tracing) createLocalTraceKprobe(fn string, addrOrOffset uint64, retprobe bool) (*TraceKprobe, *probeErr) {
	c := t.counters()
	check := t.uniqueSymbol
	if t.g.validateProbeSymbol {
		check = t.validateProbeSymbol // 6.12+: MOD:SYM too; the errno is kept
	}
	if perr := check(fn, "create_local_trace_kprobe", PhasePerfOpen); perr != nil {
		return nil, perr
	}
	name := fn
	if fn == "" {
		name = "DUMMY_EVENT"
	}
	if perr := t.allocTraceKprobe(fn); perr != nil {
		return nil, perr
	}
	tk := &TraceKprobe{Symbol: fn, Return: retprobe}
	if retprobe {
		tk.Rp = &kprobes.Kretprobe{}
		tk.Kp = &tk.Rp.Kp
	} else {
		tk.Kp = &kprobes.Kprobe{}
	}
	if fn != "" {
		tk.Offset = addrOrOffset
		tk.Kp.SymbolName, tk.Kp.Offset = fn, uint32(addrOrOffset)
	} else {
		tk.Addr = addrOrOffset
		tk.Kp.Addr = addrOrOffset
	}
	tk.ev = &Event{Group: KprobeEventSystem, Name: name, local: true, isReturn: retprobe, probes: []*TraceKprobe{tk}}
	c.Add(opConst, 2) // init_trace_event_call, traceprobe_set_print_fmt's passes
	c.Inc(opKmalloc)  // print_fmt
	if perr := t.__registerTraceKprobe(tk); perr != nil {
		t.freeTraceKprobe(tk)
		return nil, perr
	}
	return tk, nil
}
