package scenarios

import (
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/trace"
)

// NewTracing returns the tracing state (tracefs, perf) of m's kernel. It
// counts into whatever counters m's kprobes count into at each call.
func NewTracing(m *machine.Machine) *trace.Tracing {
	tr := trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: m.Kernel, Faults: m.Faults}, trace.ConfigFor(m.Kernel))
	m.AtLateInit(tr.LateInit)
	return tr
}

// EventsDoor registers a target by writing its kprobe_events line (one
// write), and with Enable writes 1 to the event's enable file.
type EventsDoor struct {
	T      *trace.Tracing
	Enable bool
}

// Name implements FrontDoor.
func (EventsDoor) Name() string { return "kprobe_events" }

// Register implements FrontDoor.
func (d EventsDoor) Register(kp *kprobes.Kprobes, t Target) (*kprobes.Kprobe, kprobes.Reason, error) {
	outs, err := d.T.WriteKprobeEvents(t.EventLine() + "\n")
	o := outs[0]
	if err != nil {
		return nil, o.Reason, err
	}
	if o.TK == nil || o.TK.Pending() {
		return nil, o.Reason, errno.ENOENT
	}
	if d.Enable {
		if err := d.T.EnableEvent(o.TK.Event(), true); err != nil {
			_, r, _ := trace.Refusal(err)
			return o.TK.Kp, r, err
		}
	}
	return o.TK.Kp, o.TK.Kp.Why(), nil
}

// PerfDoor registers a target with perf_event_open on the kprobe PMU.
type PerfDoor struct{ T *trace.Tracing }

// Name implements FrontDoor.
func (PerfDoor) Name() string { return "perf_kprobe" }

// Register implements FrontDoor.
func (d PerfDoor) Register(kp *kprobes.Kprobes, t Target) (*kprobes.Kprobe, kprobes.Reason, error) {
	var pe *trace.PerfEvent
	var err error
	if t.Symbol != "" {
		pe, err = d.T.PerfKprobeOpen(t.Symbol, uint64(t.Offset), t.Return)
	} else {
		pe, err = d.T.PerfKprobeOpen("", t.Addr, t.Return)
	}
	if err != nil {
		code, r, _ := trace.Refusal(err)
		return nil, r, code
	}
	return pe.TK.Kp, pe.TK.Kp.Why(), nil
}

// DoorFor returns the front door named via on m (register_kprobe's door
// for register_kprobe and register_kprobes).
func DoorFor(m *machine.Machine, via Via, enable bool) FrontDoor {
	switch via {
	case ViaKprobeEvents:
		return EventsDoor{T: NewTracing(m), Enable: enable}
	case ViaPerfKprobe:
		return PerfDoor{T: NewTracing(m)}
	}
	return DirectDoor{}
}
