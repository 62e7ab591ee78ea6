package bpf

import (
	"fmt"
	"strconv"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/sim"
)

// The files of the kernel that libbpf reads (libbpf's constants).
const (
	PathProcKallsyms        = "/proc/kallsyms"
	PathFilterFunctions     = "/sys/kernel/tracing/available_filter_functions"
	PathFilterFunctionsAddr = "/sys/kernel/tracing/available_filter_functions_addrs"
	PathKprobePMUType       = "/sys/bus/event_source/devices/kprobe/type"
	PathKprobePMURetprobe   = "/sys/bus/event_source/devices/kprobe/format/retprobe"
)

// KprobePMUType is the dynamic PMU type perf_tp_register gives the kprobe
// PMU on a kernel without other dynamic PMUs registered first (the
// software, tracepoint and breakpoint PMUs take 1, 2, 5; "kprobe" and
// "uprobe" follow). Only its stability matters to the model.
const KprobePMUType = 6

// ProcKallsymsReader produces /proc/kallsyms (kallsyms.Compressed).
type ProcKallsymsReader interface {
	ProcKallsyms(cn *sim.Counters, fn func(line []byte)) (lines int, bytes int64)
}

// PerfKprobe opens and attaches kprobe perf events: the perf kprobe PMU's
// perf_event_open (perf_kprobe_init → create_local_trace_kprobe) and
// bpf_perf_link_attach.
type PerfKprobe interface {
	PerfKprobeOpen(c *sim.Counters, name string, offset uint64, retprobe bool) (fd int, err error)
	PerfLinkAttach(c *sim.Counters, perfFD int) error
}

// System is the kernel as user space sees it: the files libbpf reads and
// the bpf(2) / perf_event_open(2) syscalls. It implements libbpf.Sys.
type System struct {
	K    *Kernel
	Proc ProcKallsymsReader
	// FilterFunctionsAddrs: tracefs has available_filter_functions_addrs
	// (v6.5+: 6.12.117 and 7.3, not 6.1.192; gen.go).
	FilterFunctionsAddrs bool
	// Perf is the perf kprobe PMU; nil means no kprobe PMU (the type file
	// is absent).
	Perf PerfKprobe

	nextFD int
}

// NewSystem returns the user-visible side of k.
func NewSystem(k *Kernel, proc ProcKallsymsReader, perf PerfKprobe) *System {
	return &System{K: k, Proc: proc, FilterFunctionsAddrs: k.facts().filterFunctionsAddrs, Perf: perf, nextFD: 3}
}

func (s *System) fd() int { s.nextFD++; return s.nextFD - 1 }

// Access is access(path, R_OK).
func (s *System) Access(c *sim.Counters, path string) bool {
	c.Inc(OpSyscall)
	switch path {
	case PathProcKallsyms, PathFilterFunctions:
		return true
	case PathFilterFunctionsAddr:
		return s.FilterFunctionsAddrs
	case PathKprobePMUType, PathKprobePMURetprobe:
		return s.Perf != nil
	}
	return false
}

// ReadFile reads a whole file; the kernel's side is counted by the models
// of its seq_file (kallsyms s_show, ftrace t_show).
func (s *System) ReadFile(c *sim.Counters, path string, fn func(line []byte)) error {
	switch path {
	case PathProcKallsyms:
		s.Proc.ProcKallsyms(c, fn)
		return nil
	case PathFilterFunctions, PathFilterFunctionsAddr:
		if path == PathFilterFunctionsAddr && !s.FilterFunctionsAddrs {
			return errno.ENOENT
		}
		_, _, err := s.K.Ftrace.AvailableFilterFunctions(c, path == PathFilterFunctionsAddr, fn)
		return err
	case PathKprobePMUType:
		if s.Perf == nil {
			return errno.ENOENT
		}
		c.Add(OpSyscall, 2)
		fn([]byte(strconv.Itoa(KprobePMUType) + "\n"))
		return nil
	case PathKprobePMURetprobe:
		if s.Perf == nil {
			return errno.ENOENT
		}
		c.Add(OpSyscall, 2)
		fn([]byte("config:0\n"))
		return nil
	}
	return errno.ENOENT
}

// LinkCreateKprobeMulti is bpf(BPF_LINK_CREATE) → link_create →
// bpf_kprobe_multi_link_attach.
func (s *System) LinkCreateKprobeMulti(c *sim.Counters, prog *Prog, attr KprobeMultiAttr) (int, error) {
	if _, err := s.K.KprobeMultiLinkAttach(c, prog, attr); err != nil {
		return -1, err
	}
	return s.fd(), nil
}

// PerfEventOpenKprobe is perf_event_open on the kprobe PMU.
func (s *System) PerfEventOpenKprobe(c *sim.Counters, pmuType int, name string, offset uint64, retprobe bool) (int, error) {
	c.Inc(OpSyscall)
	if s.Perf == nil || pmuType != KprobePMUType {
		return -1, errno.ENOENT // perf_init_event: no PMU of that type
	}
	return s.Perf.PerfKprobeOpen(c, name, offset, retprobe)
}

// LinkCreatePerfEvent is bpf(BPF_LINK_CREATE, BPF_PERF_EVENT) →
// bpf_perf_link_attach, then ioctl(PERF_EVENT_IOC_ENABLE).
func (s *System) LinkCreatePerfEvent(c *sim.Counters, prog *Prog, perfFD int) (int, error) {
	c.Inc(OpSyscall)
	if s.Perf == nil {
		return -1, errno.EINVAL
	}
	if err := s.Perf.PerfLinkAttach(c, perfFD); err != nil {
		return -1, err
	}
	c.Inc(OpKmalloc)
	c.Inc(OpLinkPrime)
	c.Inc(OpSyscall) // the ENABLE ioctl
	return s.fd(), nil
}

// String describes the system for reports.
func (s *System) String() string {
	return fmt.Sprintf("generation %s, CONFIG_FPROBE=%v, available_filter_functions_addrs=%v, kprobe PMU=%v",
		s.K.Generation(), s.K.Kconfig.FPROBE, s.FilterFunctionsAddrs, s.Perf != nil)
}
