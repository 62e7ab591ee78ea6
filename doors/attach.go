package doors

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/trace"
)

// Attachment is one probe as a front door left it: the structs it made
// and its outcome.
type Attachment struct {
	Kp *kprobes.Kprobe
	Rp *kprobes.Kretprobe
	TK *trace.TraceKprobe
	PE *trace.PerfEvent
	// Code is 0, the positive errno, or -1 for a probe never attempted
	// (a rolled-back batch, a line after a failed write).
	Code   int
	Reason string
	Addr   uint64
}

// codeOf splits a registration error into the errno a caller sees and a
// model failure (a kernel BUG or a model fault) that stops the run.
func codeOf(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var e kprobes.Errno
	if errors.As(err, &e) {
		return int(e), nil
	}
	return 0, err
}

// Register registers t with register_kprobe (register_kretprobe for a
// return probe), as a module does. A refusal is the attachment's Code
// and Reason; the error is a model failure.
func (d *Doors) Register(t Probe) (Attachment, error) {
	kp := d.m.KP
	p, rp := t.Kprobe()
	a := Attachment{Kp: p, Rp: rp}
	var err error
	if rp != nil {
		err = kp.RegisterKretprobe(rp)
	} else {
		err = kp.RegisterKprobe(p)
	}
	code, ferr := codeOf(err)
	if ferr != nil {
		return a, ferr
	}
	a.Code, a.Addr = code, p.Addr
	if code != 0 {
		a.Reason = p.Why().String()
	}
	return a, nil
}

// RegisterBatch models the kprobes_many sample's register_kprobes with
// the deferred optimizer still running on its schedule: between(i) runs
// after the i-th probe registered; the first failure unregisters every
// probe before it (beforeRollback runs first: the batch at its largest)
// and marks the whole batch not attempted but the failed probe. at gets
// one attachment per probe; the error is a model failure.
func (d *Doors) RegisterBatch(ts []Probe, at []Attachment, between func(i int), beforeRollback func()) error {
	kp := d.m.KP
	probes := make([]*kprobes.Kprobe, len(ts))
	for i, t := range ts {
		probes[i], _ = t.Kprobe()
		at[i].Kp = probes[i]
	}
	failAt, failErr := -1, error(nil)
	for i := 0; i < len(probes) && failAt < 0; i++ {
		if err := kp.RegisterKprobe(probes[i]); err != nil {
			failAt, failErr = i, err
			break
		}
		between(i)
	}
	if failAt < 0 {
		return nil
	}
	code, err := codeOf(failErr)
	if err != nil {
		return err
	}
	beforeRollback()
	kp.UnregisterKprobes(probes[:failAt])
	why := fmt.Sprintf("register_kprobes: rolled back: probe %d failed with %s", failAt, kprobes.Errno(code).Name())
	for i := range at {
		at[i].Code, at[i].Reason, at[i].Addr = -1, why, probes[i].Addr
	}
	at[failAt].Code = code
	at[failAt].Reason = probes[failAt].Why().String()
	return nil
}

// OpenKprobeEvents opens tracefs kprobe_events for writing.
func (d *Doors) OpenKprobeEvents() { d.Tracing().OpenKprobeEvents() }

// WriteKprobeEvents is one write() of text to kprobe_events.
func (d *Doors) WriteKprobeEvents(text string) ([]trace.Outcome, error) {
	return d.Tracing().WriteKprobeEvents(text)
}

// WriteEvents writes lines to kprobe_events in one write() (a newline
// inside a line becomes a space) and fills at[j] with line j's outcome;
// a failed line loses the rest of its write.
func (d *Doors) WriteEvents(lines []string, at []Attachment) error {
	var b strings.Builder
	for _, line := range lines {
		if strings.ContainsAny(line, "\n") {
			line = strings.ReplaceAll(line, "\n", " ")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	outs, werr := d.WriteKprobeEvents(b.String())
	if len(outs) != len(lines) {
		return fmt.Errorf("kprobe_events: %d outcomes for %d lines", len(outs), len(lines))
	}
	failed := -1
	for j, o := range outs {
		a := &at[j]
		a.TK = o.TK
		switch {
		case !o.Attempted:
			a.Code = -1
			a.Reason = fmt.Sprintf("trace_parse_run_command: not reached: line %d of this write failed with %s", failed+1, errnoName(werr))
		case o.Code != 0:
			a.Code, a.Reason, a.Addr = int(o.Code), o.Reason.String(), o.Addr
			failed = j
		default:
			a.Addr = o.Addr
			if o.TK != nil {
				a.Kp = o.TK.Kp
			}
			if !o.Reason.IsZero() {
				a.Reason = o.Reason.String()
			}
		}
	}
	return nil
}

func errnoName(err error) string {
	if e, ok := err.(errno.Errno); ok {
		return e.Name()
	}
	if err == nil {
		return "0"
	}
	return err.Error()
}

// EnableEvent writes 1 (or 0) to the event's enable file.
func (d *Doors) EnableEvent(ev *trace.Event, enable bool) error {
	return d.Tracing().EnableEvent(ev, enable)
}

// EnableEvents enables (or disables) the events of the accepted lines in
// at: one write per event's enable file (EnableEach), or one per group's
// (EnableGroup). A refused enable refuses every line of its event. When
// enabling, step(n) runs after the n-th event is enabled.
func (d *Doors) EnableEvents(at []Attachment, mode EnableMode, enable bool, step func(n int)) {
	tr := d.Tracing()
	seen := map[*trace.Event]bool{}
	byEvent := map[*trace.Event][]int{}
	var order []*trace.Event
	for i, a := range at {
		if a.Code != 0 || a.TK == nil {
			continue
		}
		ev := a.TK.Event()
		byEvent[ev] = append(byEvent[ev], i)
		if !seen[ev] {
			seen[ev] = true
			order = append(order, ev)
		}
	}
	failed := func(ev *trace.Event, err error) {
		code, reason, ok := trace.Refusal(err)
		if !ok {
			return
		}
		for _, i := range byEvent[ev] {
			at[i].Code, at[i].Reason = int(code), "enable: "+reason.String()
		}
	}
	switch mode {
	case EnableEach:
		for n, ev := range order {
			if err := tr.EnableEvent(ev, enable); err != nil && enable {
				failed(ev, err)
			}
			if enable {
				step(n)
			}
		}
	case EnableGroup:
		var groups []string
		gs := map[string]bool{}
		for _, ev := range order {
			if !gs[ev.Group] {
				gs[ev.Group] = true
				groups = append(groups, ev.Group)
			}
		}
		for _, g := range groups {
			var f func(*trace.Event, error)
			if enable {
				f = failed
			}
			_ = tr.EnableGroup(g, enable, f)
		}
		if enable {
			for n := range order {
				step(n)
			}
		}
	}
}

// PerfOpen is perf_event_open on the kprobe PMU for t, armed at open.
func (d *Doors) PerfOpen(t Probe) (*trace.PerfEvent, error) {
	sym, off := t.Location()
	return d.Tracing().PerfKprobeOpen(sym, off, t.Return)
}

// PerfClose closes a perf kprobe event.
func (d *Doors) PerfClose(pe *trace.PerfEvent) { d.Tracing().PerfKprobeClose(pe) }

// PerfAttach opens t's perf kprobe event. A refusal is the attachment's
// Code and Reason; the error is a model failure.
func (d *Doors) PerfAttach(t Probe) (Attachment, error) {
	var a Attachment
	pe, err := d.PerfOpen(t)
	if err != nil {
		code, reason, addr, ok := trace.RefusalAt(err)
		if !ok {
			return a, err
		}
		a.Code, a.Reason, a.Addr = int(code), reason.String(), addr
		return a, nil
	}
	a.PE, a.TK, a.Kp, a.Addr = pe, pe.TK, pe.TK.Kp, pe.TK.Kp.Addr
	return a, nil
}

// Detach undoes an attach the way its front door does: one
// unregister_kprobes (unregister_kretprobes) batch; disabling (when
// enabled with mode) and deleting every event with -: lines,
// linesPerWrite a write; closing every perf event.
func (d *Doors) Detach(via Via, at []Attachment, mode EnableMode, linesPerWrite int) error {
	kp := d.m.KP
	switch via {
	case ViaRegisterKprobes, ViaRegisterKprobe:
		var ps []*kprobes.Kprobe
		var rps []*kprobes.Kretprobe
		for _, a := range at {
			if a.Code != 0 || a.Kp == nil {
				continue
			}
			if a.Rp != nil {
				rps = append(rps, a.Rp)
			} else {
				ps = append(ps, a.Kp)
			}
		}
		if len(ps) > 0 {
			kp.UnregisterKprobes(ps)
		}
		if len(rps) > 0 {
			kp.UnregisterKretprobes(rps)
		}
	case ViaKprobeEvents:
		if mode != EnableNone {
			d.EnableEvents(at, mode, false, nil)
		}
		tr := d.Tracing()
		evs := tr.Events()
		k := linesPerWrite
		for lo := 0; lo < len(evs); lo += k {
			var b strings.Builder
			for _, ev := range evs[lo:min(lo+k, len(evs))] {
				fmt.Fprintf(&b, "-:%s/%s\n", ev.Group, ev.Name)
			}
			if _, err := tr.WriteKprobeEvents(b.String()); err != nil {
				return fmt.Errorf("deleting the events: %v", err)
			}
		}
	case ViaPerfKprobe:
		for _, a := range at {
			if a.PE != nil {
				d.PerfClose(a.PE)
			}
		}
	}
	return nil
}
