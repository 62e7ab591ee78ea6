package trace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/kprobes"
)

// OpenKprobeEvents models opening kprobe_events for writing (without
// O_TRUNC): the user's open + close, counted once per file session.
func (t *Tracing) OpenKprobeEvents() {
	prev := t.counters().Enter(PhaseParse)
	t.counters().Inc(opOpen)
	t.counters().Enter(prev)
}

// WriteKprobeEvents models kernel/trace/trace.c:trace_parse_run_command for
// one write() of buf to kprobe_events:
// probes_write → trace_parse_run_command with
// create_or_delete_trace_kprobe per line. The buffer is copied in chunks
// of WRITE_BUFSIZE-1 bytes; a line cut by a chunk's end is copied again
// with the next chunk, and one longer than the buffer is -EINVAL. The first
// line that fails ends the write with its errno; the lines before it stay
// applied and the lines after it are never read (their Outcome is not
// Attempted). It returns one Outcome per line of buf and the write's
// result (nil or the errno).
func (t *Tracing) WriteKprobeEvents(buf string) ([]Outcome, error) {
	c := t.counters()
	prev := c.Enter(PhaseParse)
	defer c.Enter(prev)
	c.Inc(opSyscall)
	c.Inc(opKmalloc) // the 4096-byte kernel buffer
	defer c.Inc(opKmalloc)

	lines := splitLines(buf)
	out := make([]Outcome, len(lines))
	for i, l := range lines {
		out[i].Line = l
	}
	count := len(buf)
	done := 0
	li := 0
	for done < count {
		size := min(count-done, WriteBufSize-1)
		c.Inc(opCopyUser)
		c.Add(opLineByte, uint64(size))
		chunk := buf[done : done+size]
		first := true
		for len(chunk) > 0 {
			nl := strings.IndexByte(chunk, '\n')
			var line string
			var used int
			if nl >= 0 {
				line, used = chunk[:nl], nl+1
			} else {
				if done+len(chunk) < count {
					if !first {
						break // re-copy from this partial line
					}
					out[li].Attempted = true
					out[li].Code = errno.EINVAL
					out[li].Reason = Reason{Check: "trace_parse_run_command", Detail: fmt.Sprintf("line is longer than %d bytes", WriteBufSize-2)}
					return out, errno.EINVAL
				}
				line, used = chunk, len(chunk)
			}
			c.Add(opLineByte, uint64(used)) // strchr for '\n'
			done += used
			chunk = chunk[used:]
			first = false
			if i := strings.IndexByte(line, '#'); i >= 0 {
				c.Add(opLineByte, uint64(i))
				line = line[:i]
			} else {
				c.Add(opLineByte, uint64(len(line)))
			}
			o := &out[li]
			li++
			o.Attempted = true
			tk, perr := t.createOrDelete(line)
			o.TK = tk
			if tk != nil {
				o.Addr = tk.Kp.Addr
				if tk.pending {
					o.Reason = Reason{Check: "register_trace_kprobe", Detail: "module not loaded: the probe is registered when it loads"}
				}
			}
			if perr != nil {
				o.Code, o.Reason, o.Addr = perr.code, perr.reason, perr.addr
				return out, perr.code
			}
		}
	}
	return out, nil
}

// splitLines returns the lines of buf as trace_parse_run_command sees
// them: split at '\n', a final line without newline included.
func splitLines(buf string) []string {
	if buf == "" {
		return nil
	}
	ls := strings.Split(buf, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// createOrDelete models create_or_delete_trace_kprobe.
func (t *Tracing) createOrDelete(line string) (*TraceKprobe, *probeErr) {
	if strings.HasPrefix(line, "-") {
		return nil, t.dynEventRelease(line)
	}
	return t.create(line)
}

// dynEventRelease models kernel/trace/trace_dynevent.c:dyn_event_release for the kprobe
// type: "-:[GRP/]EVENT [ARGS]" walks the whole dyn_event_list (no early
// exit), matches every kprobe entry by name (and group, and with args the
// command head), releases each match (unregister_trace_kprobe, then
// free_trace_kprobe), stops at the first failure, -ENOENT when nothing
// matched; then tracing_reset_all_online_cpus.
func (t *Tracing) dynEventRelease(line string) *probeErr {
	c := t.counters()
	const fn = "dyn_event_release"
	prev := c.Enter(PhaseDelete)
	defer c.Enter(prev)
	argv := t.argvSplit(line)
	defer c.Add(opKmalloc, 2)
	if len(argv) == 0 || !strings.HasPrefix(argv[0], "-:") {
		return refuse(errno.EINVAL, fn, "a delete command is -:[GRP/]EVENT")
	}
	spec := argv[0][2:]
	group, event := "", spec
	if i := strings.IndexByte(spec, '/'); i >= 0 {
		group, event = spec[:i], spec[i+1:]
	}
	if group == "" && event == "" {
		return refuse(errno.EINVAL, fn, "no event name")
	}
	// The walk: D entries; a name compare per kprobe entry (unless the
	// event is empty), a group compare when given and the name matched.
	c.Add(opDynVisit, uint64(t.DynEvents()))
	var matches []*TraceKprobe
	switch {
	case group != "" && event != "":
		if e := t.events[eventKey{group, event}]; e != nil {
			matches = append(matches, e.probes...)
		}
	case event != "":
		es := append([]*Event(nil), t.byName[event]...)
		sortEvents(es)
		for _, e := range es {
			matches = append(matches, e.probes...)
		}
	default:
		for _, e := range t.Events() {
			if e.Group == group {
				matches = append(matches, e.probes...)
			}
		}
	}
	slices.SortFunc(matches, func(a, b *TraceKprobe) int { return a.seq - b.seq })
	if event != "" {
		c.Add(opStrcmp, uint64(t.dyn.len()))
	}
	if group != "" {
		c.Add(opStrcmp, uint64(max(len(matches), 1)))
	}
	if len(argv) > 1 {
		// trace_kprobe_match_command_head: format SYM+OFF into a buffer and
		// compare, then each NAME=COMM arg.
		c.Add(opStrcmp, uint64(len(matches)*len(argv)))
		var keep []*TraceKprobe
		for _, tk := range matches {
			if tk.commandHeadMatches(argv[1:], t.g.matchHeadBuf) {
				keep = append(keep, tk)
			}
		}
		matches = keep
	}
	if len(matches) == 0 {
		return refuse(errno.ENOENT, fn, fmt.Sprintf("no event matches %q", spec))
	}
	reset := false
	for _, tk := range matches {
		wasEnabled := tk.ev.wasEnabled
		if perr := t.unregisterTraceKprobe(tk); perr != nil {
			t.tracingResetAll(reset)
			return perr
		}
		t.freeTraceKprobe(tk)
		reset = reset || wasEnabled
	}
	t.tracingResetAll(reset)
	return nil
}

// commandHeadMatches models kernel/trace/trace_kprobe.c:
// trace_kprobe_match_command_head. buf is genFacts.matchHeadBuf: in
// 6.1.192 and 6.12.117 the head is snprintf'd into a 64-byte buffer, so a
// head over 63 characters is cut and never equals what the user wrote;
// 7.3 (buf 0) compares the symbol and the offset directly.
func (tk *TraceKprobe) commandHeadMatches(args []string, buf int) bool {
	cut := func(s string) string {
		if buf > 0 && len(s) > buf-1 {
			return s[:buf-1]
		}
		return s
	}
	head := tk.describe()
	if tk.Symbol != "" {
		head = fmt.Sprintf("%s+%d", tk.Symbol, tk.Offset)
	}
	if args[0] != cut(head) && !(tk.Offset == 0 && args[0] == cut(tk.Symbol)) {
		return false
	}
	rest := args[1:]
	if len(rest) > len(tk.Args) {
		return false
	}
	for i, a := range rest {
		if a != tk.Args[i] {
			return false
		}
	}
	return true
}

// unregisterTraceKprobe models kernel/trace/trace_kprobe.c:unregister_trace_kprobe.
func (t *Tracing) unregisterTraceKprobe(tk *TraceKprobe) *probeErr {
	ev := tk.ev
	if len(ev.probes) == 1 {
		if ev.Enabled() {
			return refuse(errno.EBUSY, "unregister_trace_kprobe", "the event is enabled")
		}
		t.counters().Inc(opConst) // trace_event_dyn_busy: no perf tracepoint reference in these runs
		if perr := t.unregisterKprobeEvent(ev); perr != nil {
			return refuse(errno.EBUSY, "unregister_trace_kprobe", perr.reason.Detail)
		}
		t.removeEvent(ev)
		if t.idx != nil {
			t.indexRemove(t.idx.dyn, ev) // trace-event-index: the event's last probe
		}
	}
	t.__unregisterTraceKprobe(tk)
	t.dynEventRemove(tk)
	// trace_probe_unlink: the last probe frees the trace_probe_event.
	for i, o := range ev.probes {
		if o == tk {
			ev.probes = append(ev.probes[:i], ev.probes[i+1:]...)
			break
		}
	}
	if len(ev.probes) == 0 {
		t.counters().Add(opKmalloc, 4) // name, group, print_fmt, the event
	}
	return nil
}

// __unregisterTraceKprobe models __unregister_trace_kprobe:
// unregister_k(ret)probe (one synchronize_rcu each), the kprobe reset for
// reuse and a symbol probe's address cleared.
func (t *Tracing) __unregisterTraceKprobe(tk *TraceKprobe) {
	if !tk.Registered() {
		return
	}
	if tk.Return {
		t.d.KP.UnregisterKretprobes([]*kprobes.Kretprobe{tk.Rp})
	} else {
		t.d.KP.UnregisterKprobes([]*kprobes.Kprobe{tk.Kp})
	}
	if tk.Symbol != "" {
		tk.Kp.Addr = 0
	}
}

// tracingResetAll models kernel/trace/trace.c:
// tracing_reset_all_online_cpus_unlocked for the one instance: if a
// deleted event had ever been enabled (event_remove / probe_remove_event_call
// set tr->clear_trace), tracing_reset_online_cpus resets the instance's
// array_buffer and then, under CONFIG_TRACER_MAX_TRACE (6.1.192, 6.12.117;
// CONFIG_TRACER_SNAPSHOT and snapshot_buffer in 7.3; both =y in Debian's
// configs), its max_buffer, which allocate_trace_buffers always allocates
// (one page per CPU unless a boot snapshot was asked for), so it is reset
// too.
func (t *Tracing) tracingResetAll(clear bool) {
	if !clear {
		return
	}
	for range traceBuffersPerInstance {
		t.tracingResetOnlineCPUs()
	}
}

// traceBuffersPerInstance: the buffers tracing_reset_all_online_cpus_unlocked
// resets per instance: tr->array_buffer and tr->max_buffer (6.1.192,
// 6.12.117: #ifdef CONFIG_TRACER_MAX_TRACE) / tr->snapshot_buffer (7.3:
// #ifdef CONFIG_TRACER_SNAPSHOT).
const traceBuffersPerInstance = 2

// tracingResetOnlineCPUs models kernel/trace/trace.c:tracing_reset_online_cpus
// of one buffer: ring_buffer_record_disable, synchronize_rcu ("Make sure
// all commits have finished"), then ring_buffer_reset_online_cpus.
func (t *Tracing) tracingResetOnlineCPUs() {
	c := t.counters()
	c.Inc(opSyncRCU)
	t.ringBufferResetOnlineCPUs()
}

// ringBufferResetOnlineCPUs models kernel/trace/ring_buffer.c:
// ring_buffer_reset_online_cpus (6.1.192, 6.12.117, 7.3): every online
// CPU buffer's record_disabled raised, a synchronize_rcu of its own, then
// reset_disabled_cpu_buffer on each CPU buffer.
func (t *Tracing) ringBufferResetOnlineCPUs() {
	c := t.counters()
	c.Inc(opSyncRCU)
	c.Add(opRBReset, uint64(t.d.KP.Cfg.CPUs))
}
