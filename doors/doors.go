// Package doors holds the front doors a probe reaches register_kprobe
// through, on one machine: a module's register_kprobe (register_kretprobe)
// and register_kprobes, tracefs kprobe_events with the events' enable
// files, the perf kprobe PMU, and BPF kprobe_multi links. Run many,
// explain and the soak campaign all attach through it, and it holds the
// one constructor of a machine's tracing layer (package trace).
package doors

import (
	"fmt"

	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/trace"
)

// Via is the front door probes are attached through.
type Via string

// The front doors of --via.
const (
	ViaRegisterKprobes Via = "register_kprobes" // one all-or-nothing batch (the sample)
	ViaRegisterKprobe  Via = "register_kprobe"  // one call per probe
	ViaKprobeEvents    Via = "kprobe_events"    // tracefs lines, registered disabled
	ViaPerfKprobe      Via = "perf_kprobe"      // perf_event_open on the kprobe PMU, armed at open
)

// Traced reports whether the door goes through the tracing layer.
func (v Via) Traced() bool { return v == ViaKprobeEvents || v == ViaPerfKprobe }

// EnableMode is how kprobe_events probes are enabled after registration.
type EnableMode string

// The modes of --enable.
const (
	EnableNone  EnableMode = "none"  // leave the events disabled
	EnableEach  EnableMode = "each"  // one write to events/GRP/EVENT/enable per event
	EnableGroup EnableMode = "group" // one write to events/GRP/enable per group
)

// Probe is what a caller asks a front door for: a symbol and offset, or
// an address (Symbol empty), an entry or a return probe.
type Probe struct {
	Symbol string
	Offset uint32
	Addr   uint64
	Return bool
	// Post gives the probe a post handler (register_kprobe doors only).
	Post bool
	// Line is a kprobe_events line as given, written verbatim by the
	// kprobe_events door (the other doors use Symbol and Offset).
	Line string
}

// Location is the probe as kprobe_events and perf name it: the symbol and
// offset, or "" and the address.
func (p Probe) Location() (string, uint64) {
	if p.Symbol != "" {
		return p.Symbol, uint64(p.Offset)
	}
	return "", p.Addr
}

// EventLine is the kprobe_events line that asks for p, naming the event
// GROUP/EVENT when event is set (the kernel names it otherwise).
func (p Probe) EventLine(event string) string {
	if p.Line != "" {
		return p.Line
	}
	kind := "p"
	if p.Return {
		kind = "r"
	}
	if event != "" {
		kind += ":" + event
	}
	sym, off := p.Location()
	loc := sym
	switch {
	case sym == "":
		loc = fmt.Sprintf("0x%x", off)
	case off != 0:
		loc = fmt.Sprintf("%s+%d", sym, off)
	}
	return kind + " " + loc
}

// Kprobe is the struct kprobe a module fills in for p, with its
// struct kretprobe for a return probe.
func (p Probe) Kprobe() (*kprobes.Kprobe, *kprobes.Kretprobe) {
	if p.Return {
		rp := &kprobes.Kretprobe{}
		rp.Kp = kprobes.Kprobe{SymbolName: p.Symbol, Offset: p.Offset, Addr: p.Addr}
		return &rp.Kp, rp
	}
	return &kprobes.Kprobe{SymbolName: p.Symbol, Offset: p.Offset, Addr: p.Addr, HasPostHandler: p.Post}, nil
}

// Doors are the front doors of one machine. The tracing layer is built
// the first time a tracefs or perf door is used, so a machine probed only
// through register_kprobe holds none.
type Doors struct {
	m  *machine.Machine
	tr *trace.Tracing
}

// New returns m's front doors.
func New(m *machine.Machine) *Doors { return &Doors{m: m} }

// NewTracing returns the tracing state (tracefs, dyn_event, perf) of m's
// kernel. It counts into whatever counters m's kprobes count into at each
// call, so a caller that swaps them (kpsim explain counts one probe alone)
// sees the tracing layer's counts with the core's. Its late-init work (the
// trace-event-index build) runs at the machine's late init, or at once if
// that has run.
func NewTracing(m *machine.Machine) *trace.Tracing {
	tr := trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: m.Kernel, Faults: m.Faults}, trace.ConfigFor(m.Kernel))
	m.AtLateInit(tr.LateInit)
	return tr
}

// Tracing returns the machine's tracing layer, built at the first call.
func (d *Doors) Tracing() *trace.Tracing {
	if d.tr == nil {
		d.tr = NewTracing(d.m)
	}
	return d.tr
}

// Machine returns the machine the doors lead into.
func (d *Doors) Machine() *machine.Machine { return d.m }
