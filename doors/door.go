package doors

import (
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/trace"
)

// Door is one front door taking one probe at a time. Register records
// its own steps to the kprobes core's Trail when it is set (the tracing
// layer nests the core's steps under them) and returns the kprobe it
// registered, or nil with the error and the Reason of a refusal made
// before register_kprobe was reached.
type Door interface {
	Name() string
	Register(t Probe) (*kprobes.Kprobe, kprobes.Reason, error)
}

// Door returns the door named via (register_kprobe's for register_kprobe
// and register_kprobes); enable makes the kprobe_events door write 1 to
// the event's enable file after the line.
func (d *Doors) Door(via Via, enable bool) Door {
	switch via {
	case ViaKprobeEvents:
		return eventsDoor{d: d, enable: enable}
	case ViaPerfKprobe:
		return perfDoor{d: d}
	}
	return directDoor{d: d}
}

// directDoor calls register_kprobe with the probe's symbol_name+offset
// or addr, as a module would.
type directDoor struct{ d *Doors }

func (directDoor) Name() string { return string(ViaRegisterKprobe) }

func (x directDoor) Register(t Probe) (*kprobes.Kprobe, kprobes.Reason, error) {
	p := &kprobes.Kprobe{SymbolName: t.Symbol, Offset: t.Offset, Addr: t.Addr, HasPostHandler: t.Post}
	err := x.d.m.KP.RegisterKprobe(p)
	return p, p.Why(), err
}

// eventsDoor writes the probe's kprobe_events line (one write), and with
// enable writes 1 to the event's enable file.
type eventsDoor struct {
	d      *Doors
	enable bool
}

func (eventsDoor) Name() string { return string(ViaKprobeEvents) }

func (x eventsDoor) Register(t Probe) (*kprobes.Kprobe, kprobes.Reason, error) {
	outs, err := x.d.WriteKprobeEvents(t.EventLine("") + "\n")
	o := outs[0]
	if err != nil {
		return nil, o.Reason, err
	}
	if o.TK == nil || o.TK.Pending() {
		return nil, o.Reason, errno.ENOENT
	}
	if x.enable {
		if err := x.d.EnableEvent(o.TK.Event(), true); err != nil {
			_, r, _ := trace.Refusal(err)
			return o.TK.Kp, r, err
		}
	}
	return o.TK.Kp, o.TK.Kp.Why(), nil
}

// perfDoor opens the probe with perf_event_open on the kprobe PMU.
type perfDoor struct{ d *Doors }

func (perfDoor) Name() string { return string(ViaPerfKprobe) }

func (x perfDoor) Register(t Probe) (*kprobes.Kprobe, kprobes.Reason, error) {
	pe, err := x.d.PerfOpen(t)
	if err != nil {
		code, r, _ := trace.Refusal(err)
		return nil, r, code
	}
	return pe.TK.Kp, pe.TK.Kp.Why(), nil
}
