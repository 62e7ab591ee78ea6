package libbpf

import (
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/sim"
)

// readIntFile models parse_uint_from_file / parse_uint_from_file's format
// read: fopen, one fscanf, fclose.
func (l *Lib) readIntFile(c *sim.Counters, path string, parse func(string) (int, bool)) (int, error) {
	c.Inc(OpFopen)
	var text strings.Builder
	if err := l.Sys.ReadFile(c, path, func(line []byte) { text.Write(line) }); err != nil {
		return 0, err
	}
	c.Inc(OpFscanfName)
	v, ok := parse(strings.TrimSpace(text.String()))
	if !ok {
		return 0, EINVAL
	}
	return v, nil
}

// AttachKprobe models bpf_program__attach_kprobe_opts in its default mode
// on a kernel with the kprobe PMU: determine_kprobe_perf_type reads the
// PMU's type file (every attach), determine_kprobe_retprobe_bit its
// format/retprobe file for a kretprobe ("config:0"), perf_event_open_probe
// opens the event (pid -1, cpu 0), bpf_program__attach_perf_event_opts
// makes a BPF_PERF_EVENT link and enables the event.
func (l *Lib) AttachKprobe(c *sim.Counters, prog *bpf.Prog, fn string, offset uint64, retprobe bool) (*Link, error) {
	prev := c.Enter(PhaseAttachPerf)
	defer c.Enter(prev)
	typ, err := l.readIntFile(c, KprobePMUType, func(s string) (int, bool) {
		v, err := strconv.Atoi(s)
		return v, err == nil
	})
	if err != nil {
		l.warn("failed to determine kprobe perf type: " + err.Error())
		return nil, err
	}
	if retprobe {
		if _, err := l.readIntFile(c, KprobePMURetprobe, func(s string) (int, bool) {
			v, err := strconv.Atoi(strings.TrimPrefix(s, "config:"))
			return v, err == nil
		}); err != nil {
			l.warn("failed to determine kprobe retprobe bit: " + err.Error())
			return nil, err
		}
	}
	pfd, err := l.Sys.PerfEventOpenKprobe(c, typ, fn, offset, retprobe)
	if err != nil {
		l.warn("prog '" + prog.Name + "': failed to create kprobe '" + fn + "' perf event: " + err.Error())
		return nil, err
	}
	p := *prog
	p.ExpectedAttachType = bpf.AttachPerfEvent
	fd, err := l.Sys.LinkCreatePerfEvent(c, &p, pfd)
	if err != nil {
		return nil, err
	}
	return &Link{FD: fd, PerfFD: pfd, Path: "perf-kprobe", Cnt: 1}, nil
}
