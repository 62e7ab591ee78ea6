// Package libbpf models the user-space half of BPF kprobe attachment in
// libbpf (tools/lib/bpf/libbpf.c), version 1.8 as in libbpf/libbpf at
// f7081a6b (libbpf_version.h: 1.8), which holds Andrey Grodzovsky's
// "libbpf: Optimize kprobe.session attachment for exact function names"
// (e08da301, 2026-03-02). With switch libbpf-exact-syms off the model is
// the same libbpf without that commit: every kprobe.multi / kprobe.session
// pattern is resolved in user space and no error code is rewritten.
//
// What libbpf does, and what is modelled:
//
//   - SEC() parsing (section_defs "kprobe+", "kretprobe+", "kprobe.multi+",
//     "kretprobe.multi+", "kprobe.session+"; attach_kprobe's
//     sscanf("%m[a-zA-Z0-9_.]+%li"), attach_kprobe_multi's and
//     attach_kprobe_session's sscanf("%m[a-zA-Z0-9_.*?]"));
//   - glob_match (adapted from perf's: '?' one char, '*' any run);
//   - bpf_program__attach_kprobe_multi_opts: the option checks; the exact
//     name path (no '*' or '?' and no unique_match: syms = &pattern,
//     cnt = 1); the pattern path: available_filter_functions_addrs when
//     access(R_OK) succeeds (fscanf "%llx %499s" per line, glob_match,
//     append), else available_filter_functions (fscanf "%499s", glob_match,
//     strdup) + qsort + all of /proc/kallsyms (fscanf "%llx %c %499s",
//     glob_match, bsearch with the .llvm. retry); -ENOENT for no match,
//     -EINVAL for unique_match with a count ≠ 1; then bpf_link_create, with
//     -ESRCH rewritten to -ENOENT;
//   - bpf_program__attach_kprobe_opts in its default (perf PMU) mode:
//     determine_kprobe_perf_type (the PMU type file read on every attach),
//     determine_kprobe_retprobe_bit for kretprobes, perf_event_open on the
//     kprobe PMU (pid -1, cpu 0), then bpf_link_create(BPF_PERF_EVENT) and
//     PERF_EVENT_IOC_ENABLE.
//
// The kernel is behind the Sys interface; its file contents and syscalls
// are counted by the kernel models, the user-space parsing here.
package libbpf

import (
	"strings"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/sim"
)

// Version is the libbpf release modelled.
const Version = "1.8 (libbpf/libbpf f7081a6b; exact-syms path = commit e08da301)"

// The files libbpf reads.
const (
	ProcKallsyms                   = "/proc/kallsyms"
	AvailableFilterFunctions       = "/sys/kernel/tracing/available_filter_functions"
	AvailableFilterFunctionsAddrs  = "/sys/kernel/tracing/available_filter_functions_addrs"
	KprobePMUType                  = "/sys/bus/event_source/devices/kprobe/type"
	KprobePMURetprobe              = "/sys/bus/event_source/devices/kprobe/format/retprobe"
	symNameMax                     = 499 // "%499s"
	availableFilterFunctionsSuffix = ".llvm."
)

// Sys is the kernel as libbpf sees it: files and syscalls. Each call
// counts its kernel work in the current phase.
type Sys interface {
	// Access is access(path, R_OK) == 0.
	Access(c *sim.Counters, path string) bool
	// ReadFile opens path and reads it to EOF through a 4 KiB stdio
	// buffer, handing each line (with its '\n') to fn.
	ReadFile(c *sim.Counters, path string, fn func(line []byte)) error
	// LinkCreateKprobeMulti is bpf(BPF_LINK_CREATE) with a kprobe-multi
	// attr; it returns the link fd.
	LinkCreateKprobeMulti(c *sim.Counters, prog *bpf.Prog, attr bpf.KprobeMultiAttr) (int, error)
	// PerfEventOpenKprobe is perf_event_open(attr{type = pmuType,
	// config = retprobe bit, config1 = name, config2 = offset}, -1, 0).
	PerfEventOpenKprobe(c *sim.Counters, pmuType int, name string, offset uint64, retprobe bool) (int, error)
	// LinkCreatePerfEvent is bpf(BPF_LINK_CREATE, BPF_PERF_EVENT) on a
	// perf event fd, then ioctl(PERF_EVENT_IOC_ENABLE).
	LinkCreatePerfEvent(c *sim.Counters, prog *bpf.Prog, perfFD int) (int, error)
}

// User-space ops. Weights: weights.go.
var (
	OpFscanfKallsyms = sim.NewOp("libbpf.fscanf.kallsyms", wFscanfKallsyms, rFscanfKallsyms,
		"libbpf_kallsyms_parse: one fscanf(\"%llx %c %499s%*[^\\n]\\n\") of a /proc/kallsyms line")
	OpFscanfName = sim.NewOp("libbpf.fscanf.name", wFscanfName, rFscanfName,
		"libbpf_available_kallsyms_parse: one fscanf(\"%499s%*[^\\n]\\n\") of an available_filter_functions line")
	OpFscanfAddrName = sim.NewOp("libbpf.fscanf.addr_name", wFscanfAddrName, rFscanfAddrName,
		"libbpf_available_kprobes_parse: one fscanf(\"%llx %499s%*[^\\n]\\n\") of an available_filter_functions_addrs line")
	OpGlobStep = sim.NewOp("libbpf.glob.step", wGlobStep, rGlobStep,
		"glob_match: one character step (compare or '?' skip), recursion included")
	OpStrdup = sim.NewOp("libbpf.strdup", wStrdup, rStrdup,
		"strdup of a matching available_filter_functions name (malloc + copy) and its libbpf_ensure_mem slot")
	OpQsortCmp = sim.NewOp("libbpf.qsort.cmp", wQsortCmp, rQsortCmp,
		"one qsort comparison (avail_func_cmp: strcmp of two strdup'd names), characters included")
	OpBsearchStep = sim.NewOp("libbpf.bsearch.step", wBsearchStep, rBsearchStep,
		"one bsearch step of avail_kallsyms_cb over the sorted names, strcmp included")
	OpAppend = sim.NewOp("libbpf.addrs.append", wAppend, rAppend,
		"one address appended to res->addrs (libbpf_ensure_mem's amortised realloc)")
	OpFopen = sim.NewOp("libbpf.fopen", wFopen, rFopen,
		"fopen + fclose of a procfs/sysfs/tracefs file: openat path walk, the file's open (seq_open), close")
	OpSecParse = sim.NewOp("libbpf.sec.parse", wSecParse, rSecParse,
		"find_sec_def's prefix match over section_defs and the attach function's sscanf of the SEC spec")
)

// Phases of the user-space side.
var (
	PhaseParse = sim.NewPhase("libbpf.parse",
		"user space: SEC parsing, fscanf of every line, glob_match, strdup, qsort, bsearch, address collection")
	PhaseReadKallsyms = sim.NewPhase("libbpf.read.kallsyms",
		"kernel side of reading /proc/kallsyms: get_ksymbol_core per symbol (expansion, type), s_show formatting, the seq_file copies")
	PhaseReadFilter = sim.NewPhase("libbpf.read.filter_functions",
		"kernel side of reading available_filter_functions(_addrs): t_show per record with its kallsyms_lookup, the seq_file copies")
	PhaseAttachPerf = sim.NewPhase("libbpf.perf.attach",
		"the single-kprobe path's PMU files, perf_event_open (trace_kprobe creation, register_kprobe, arming) and BPF_PERF_EVENT link")
)

// Errors libbpf returns (negated errno, as libbpf_err_ptr).
const (
	ENOENT = errno.ENOENT
	EINVAL = errno.EINVAL
	ESRCH  = errno.ESRCH
)

// Lib is one libbpf instance on one kernel.
type Lib struct {
	Sys Sys
	// ExactSyms is switch libbpf-exact-syms (commit e08da301).
	ExactSyms bool
	// Warnings collects libbpf's pr_warn lines.
	Warnings []string
}

// New returns a libbpf over sys with the switches' form of the code.
func New(sys Sys, sw sim.Switches) *Lib {
	return &Lib{Sys: sys, ExactSyms: sw.Has(sim.LibbpfExactSyms)}
}

func (l *Lib) warn(s string) { l.Warnings = append(l.Warnings, "libbpf: "+s) }

// KprobeMultiOpts is struct bpf_kprobe_multi_opts.
type KprobeMultiOpts struct {
	Syms        []string
	Addrs       []uint64
	Cookies     []uint64
	Cnt         int
	Retprobe    bool
	Session     bool
	UniqueMatch bool
}

// Link is a struct bpf_link: its fd, what it attached and how.
type Link struct {
	FD int
	// PerfFD is the perf event of a single kprobe (-1 otherwise).
	PerfFD int
	// Path says how the target was resolved: "exact-syms", "filter-addrs",
	// "filter+kallsyms", "syms", "addrs", "perf-kprobe".
	Path string
	// Cnt is the number of addresses or names passed to the kernel.
	Cnt int
}

// AttachKprobeMultiOpts models bpf_program__attach_kprobe_multi_opts(prog,
// pattern, opts). pattern "" means NULL.
func (l *Lib) AttachKprobeMultiOpts(c *sim.Counters, prog *bpf.Prog, pattern string, hasPattern bool, opts KprobeMultiOpts) (*Link, error) {
	prev := c.Enter(PhaseParse)
	defer c.Enter(prev)
	syms, addrs, cnt := opts.Syms, opts.Addrs, opts.Cnt
	if !hasPattern && addrs == nil && syms == nil {
		return nil, EINVAL
	}
	if hasPattern && (addrs != nil || syms != nil || opts.Cookies != nil || cnt != 0) {
		return nil, EINVAL
	}
	if !hasPattern && cnt == 0 {
		return nil, EINVAL
	}
	if !hasPattern && opts.UniqueMatch {
		return nil, EINVAL
	}
	if addrs != nil && syms != nil {
		return nil, EINVAL
	}
	path := "syms"
	if addrs != nil {
		path = "addrs"
	}
	switch {
	case hasPattern && l.ExactSyms && !strings.ContainsAny(pattern, "*?") && !opts.UniqueMatch:
		syms, cnt, path = []string{pattern}, 1, "exact-syms"
	case hasPattern:
		var res []uint64
		var err error
		if l.Sys.Access(c, AvailableFilterFunctionsAddrs) {
			res, err = l.availableKprobesParse(c, pattern)
			path = "filter-addrs"
		} else {
			res, err = l.availableKallsymsParse(c, pattern)
			path = "filter+kallsyms"
		}
		if err != nil {
			return nil, err
		}
		if opts.UniqueMatch && len(res) != 1 {
			l.warn("failed to find a unique match for '" + pattern + "'")
			return nil, EINVAL
		}
		addrs, cnt = res, len(res)
	}
	if opts.Retprobe && opts.Session {
		return nil, EINVAL
	}
	p := *prog
	p.ExpectedAttachType = bpf.AttachKprobeMulti
	if opts.Session {
		p.ExpectedAttachType = bpf.AttachKprobeSession
	}
	attr := bpf.KprobeMultiAttr{Syms: syms, Addrs: addrs, Cookies: opts.Cookies, Cnt: uint32(cnt)}
	if opts.Retprobe {
		attr.Flags = bpf.FKprobeMultiReturn
	}
	fd, err := l.Sys.LinkCreateKprobeMulti(c, &p, attr)
	if err != nil {
		if l.ExactSyms && err == ESRCH {
			err = ENOENT
		}
		l.warn("prog '" + prog.Name + "': failed to attach: " + err.Error())
		return nil, err
	}
	return &Link{FD: fd, PerfFD: -1, Path: path, Cnt: cnt}, nil
}

// lineFields splits a line at spaces/tabs the way these fscanf formats
// see it: up to n whitespace-separated fields.
func lineFields(line []byte, n int) []string {
	var out []string
	i := 0
	for len(out) < n {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n') {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '\n' {
			j++
		}
		out = append(out, string(line[i:j]))
		i = j
	}
	return out
}

// availableKprobesParse models libbpf_available_kprobes_parse.
func (l *Lib) availableKprobesParse(c *sim.Counters, pattern string) ([]uint64, error) {
	var res []uint64
	var lines, globSteps uint64
	bad := false
	prev := c.Enter(PhaseReadFilter)
	c.Inc(OpFopen)
	err := l.Sys.ReadFile(c, AvailableFilterFunctionsAddrs, func(line []byte) {
		if bad {
			return
		}
		lines++
		f := lineFields(line, 2)
		a, ok := parseHex(f)
		if !ok || len(f) < 2 {
			bad = true
			return
		}
		name := truncName(f[1])
		m, steps := GlobMatch(name, pattern)
		globSteps += steps
		if m {
			res = append(res, a)
		}
	})
	c.Enter(PhaseParse)
	c.Add(OpFscanfAddrName, lines)
	c.Add(OpGlobStep, globSteps)
	c.Add(OpAppend, uint64(len(res)))
	c.Enter(prev)
	if err != nil {
		return nil, err
	}
	if bad {
		l.warn("failed to parse available_filter_functions_addrs entry")
		return nil, EINVAL
	}
	if len(res) == 0 {
		return nil, ENOENT
	}
	return res, nil
}

// availableKallsymsParse models libbpf_available_kallsyms_parse with
// avail_kallsyms_cb over libbpf_kallsyms_parse.
func (l *Lib) availableKallsymsParse(c *sim.Counters, pattern string) ([]uint64, error) {
	var syms []string
	var lines, globSteps uint64
	prev := c.Enter(PhaseReadFilter)
	defer c.Enter(prev)
	c.Inc(OpFopen)
	err := l.Sys.ReadFile(c, AvailableFilterFunctions, func(line []byte) {
		lines++
		f := lineFields(line, 1)
		if len(f) == 0 {
			return
		}
		name := truncName(f[0])
		m, steps := GlobMatch(name, pattern)
		globSteps += steps
		if m {
			syms = append(syms, name)
		}
	})
	c.Enter(PhaseParse)
	c.Add(OpFscanfName, lines)
	c.Add(OpGlobStep, globSteps)
	c.Add(OpStrdup, uint64(len(syms)))
	if err != nil {
		return nil, err
	}
	if len(syms) == 0 {
		return nil, ENOENT
	}
	c.Add(OpQsortCmp, qsortStrings(syms))
	var res []uint64
	lines, globSteps = 0, 0
	var bsteps uint64
	bad := false
	c.Enter(PhaseReadKallsyms)
	c.Inc(OpFopen)
	err = l.Sys.ReadFile(c, ProcKallsyms, func(line []byte) {
		if bad {
			return
		}
		lines++
		f := lineFields(line, 3)
		a, ok := parseHex(f)
		if !ok || len(f) < 3 || len(f[1]) != 1 {
			bad = true
			return
		}
		name := truncName(f[2])
		m, steps := GlobMatch(name, pattern)
		globSteps += steps
		if !m {
			return
		}
		found, st := bsearchStrings(syms, name)
		bsteps += st
		if !found {
			i := strings.Index(name, availableFilterFunctionsSuffix)
			if i < 0 {
				return
			}
			found, st = bsearchStrings(syms, name[:i])
			bsteps += st
			if !found {
				return
			}
		}
		res = append(res, a)
	})
	c.Enter(PhaseParse)
	c.Add(OpFscanfKallsyms, lines)
	c.Add(OpGlobStep, globSteps)
	c.Add(OpBsearchStep, bsteps)
	c.Add(OpAppend, uint64(len(res)))
	if err != nil {
		return nil, err
	}
	if bad {
		// libbpf_kallsyms_parse warns and stops; its caller ignores the
		// return value and goes on with what was collected.
		l.warn("failed to read kallsyms entry")
	}
	if len(res) == 0 {
		return nil, ENOENT
	}
	return res, nil
}

func truncName(s string) string {
	if len(s) > symNameMax {
		return s[:symNameMax]
	}
	return s
}

func parseHex(f []string) (uint64, bool) {
	if len(f) == 0 || f[0] == "" {
		return 0, false
	}
	s := f[0]
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		s = s[2:]
	}
	var v uint64
	for _, ch := range []byte(s) {
		var d byte
		switch {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, s != ""
}
