package scenarios

import (
	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

// PerfKprobes puts the perf kprobe PMU of package trace (perf_event_open
// on the kprobe PMU: perf_kprobe_init, create_local_trace_kprobe,
// register_kprobe / register_kretprobe, armed inside the open) behind
// bpf.PerfKprobe, with bpf_perf_link_attach on top.
type PerfKprobes struct {
	tr     *trace.Tracing
	nextFD int
	open   map[int]*trace.PerfEvent
}

// NewPerfKprobes builds the tracing subsystem of a booted machine.
func NewPerfKprobes(m *machine.Machine) *PerfKprobes {
	tr := trace.New(trace.Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: m.Kernel, C: m.C, Faults: m.Faults}, trace.ConfigFor(m.Kernel))
	m.AtLateInit(tr.LateInit)
	return &PerfKprobes{tr: tr, nextFD: 1000, open: map[int]*trace.PerfEvent{}}
}

// PerfKprobeOpen is trace.Tracing.PerfKprobeOpen with an fd.
func (p *PerfKprobes) PerfKprobeOpen(_ *sim.Counters, name string, offset uint64, retprobe bool) (int, error) {
	pe, err := p.tr.PerfKprobeOpen(name, offset, retprobe)
	if err != nil {
		if code, reason, _, ok := trace.RefusalAt(err); ok {
			return -1, &Refusal{Code: code, Reason: reason.String()}
		}
		return -1, err
	}
	p.nextFD++
	p.open[p.nextFD] = pe
	return p.nextFD, nil
}

// PerfLinkAttach is bpf_perf_link_attach: perf_event_set_bpf_prog adds
// the program to the trace_kprobe call's prog array (bpf_prog_array_copy,
// one allocation).
func (p *PerfKprobes) PerfLinkAttach(c *sim.Counters, fd int) error {
	if p.open[fd] == nil {
		return errno.EINVAL
	}
	c.Inc(bpf.OpKmalloc)
	return nil
}

// Registered returns how many perf events are open.
func (p *PerfKprobes) Registered() int { return len(p.open) }

// Refusal is a front door's refusal as the attach path reports it: the
// errno user space sees and the kernel-side reason.
type Refusal struct {
	Code   errno.Errno
	Reason string
}

func (r *Refusal) Error() string { return r.Code.Error() + " (" + r.Reason + ")" }

// Unwrap gives the errno to errors.Is / errors.As.
func (r *Refusal) Unwrap() error { return r.Code }
