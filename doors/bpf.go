package doors

import (
	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/ftrace/fprobe"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/trace"
)

// BPF returns the BPF layer behind the kprobe_multi front door
// (bpf_kprobe_multi_link_attach) of the machine's kernel generation (the
// image's: bpf, ftrace and fprobe each follow it), with or without
// CONFIG_FPROBE, on possibleCPUs possible CPUs.
func (d *Doors) BPF(fprobeOn bool, possibleCPUs int) *bpf.Kernel {
	m := d.m
	return &bpf.Kernel{Gen: m.Kernel.Config.Gen.Effective(), Kconfig: bpf.Kconfig{FPROBE: fprobeOn}, Ftrace: m.Ftrace,
		Fprobe: &fprobe.Env{Ftrace: m.Ftrace, PossibleCPUs: possibleCPUs, Faults: m.Faults}, Syms: m.Syms,
		Modules: m.Kernel.Modules, Lookup: ftrace.LookupModeOf(m.Switches)}
}

// PerfKprobes puts the perf kprobe PMU (perf_event_open on the kprobe
// PMU: perf_kprobe_init, create_local_trace_kprobe, register_kprobe /
// register_kretprobe, armed inside the open) behind bpf.PerfKprobe, with
// bpf_perf_link_attach on top.
type PerfKprobes struct {
	d      *Doors
	nextFD int
	open   map[int]*trace.PerfEvent
}

// PerfKprobes returns the perf kprobe door as the BPF layer calls it.
func (d *Doors) PerfKprobes() *PerfKprobes {
	d.Tracing()
	return &PerfKprobes{d: d, nextFD: 1000, open: map[int]*trace.PerfEvent{}}
}

// PerfKprobeOpen is trace.Tracing.PerfKprobeOpen with an fd.
func (p *PerfKprobes) PerfKprobeOpen(_ *sim.Counters, name string, offset uint64, retprobe bool) (int, error) {
	pe, err := p.d.Tracing().PerfKprobeOpen(name, offset, retprobe)
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
