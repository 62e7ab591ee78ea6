package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kpsim/kpsim/doors"
)

// Attach causes: why a run's figures cover fewer probes than it was
// asked to attach. A report flags the run with them and kpsim exits 3
// unless --allow-refusals (cmd/kpsim).
const (
	// CauseNoneAttached: the front door attached none of the run's
	// targets; its cycles are the cost of refusals, not of probes.
	CauseNoneAttached = "none-attached"
	// CauseUnattempted: targets were never attempted (a line after a
	// refused line of the same kprobe_events write, a register_kprobes
	// batch rolled back at its first failure).
	CauseUnattempted = "unattempted"
	// CauseAllFailed: every attach of a BPF run failed.
	CauseAllFailed = "all-failed"
)

// AttachWarning is one cause flagged on a run: the cause and a sentence
// naming what happened and what to do.
type AttachWarning struct {
	Cause string `json:"cause"`
	Text  string `json:"text"`
}

// Refused is the number of targets the front door refused.
func (o *RunOutcome) Refused() int {
	n := 0
	for _, v := range o.Rejected {
		n += v
	}
	return n
}

// flagAttach sets every run's Targets and AttachWarnings: a run that
// attached nothing, or left targets unattempted. Partial refusals (some
// targets attached, the rest refused one by one, as --targets traceable
// or all-functions always has) are normal and not flagged.
func (rep *ManyReport) flagAttach(o ManyOptions) {
	for _, run := range rep.Runs {
		run.Targets = run.Registered + run.Refused() + run.NotTried
		run.AttachWarnings = manyWarnings(run, o)
	}
}

func manyWarnings(r *RunResult, o ManyOptions) []AttachWarning {
	var ws []AttachWarning
	via := o.FrontDoor()
	if r.Targets > 0 && r.Registered == 0 {
		t := fmt.Sprintf("attached none of its %d targets via %s", r.Targets, via)
		if n := r.Refused(); n > 0 {
			t += fmt.Sprintf(" (%d refused: %s%s)", n, countList(r.Rejected), topReason(refusedReasons(r)))
		}
		t += "; " + noneRemedy(r, o)
		ws = append(ws, AttachWarning{Cause: CauseNoneAttached, Text: t})
	}
	if r.NotTried > 0 {
		t := fmt.Sprintf("left %d of its %d targets unattempted via %s", r.NotTried, r.Targets, via)
		switch via {
		case doors.ViaKprobeEvents:
			t += fmt.Sprintf(": the first refused line of a write() to kprobe_events drops the rest of that write, as the kernel does (%d lines per write); use --lines-per-write 1 to attempt every line", o.LinesPerWrite)
		case doors.ViaRegisterKprobes:
			t += ": register_kprobes stops at the first failure and unregisters the batch, as the kernel does; use --via register_kprobe to attempt every target"
		default:
			t += "; --probes FILE lists each target's result"
		}
		ws = append(ws, AttachWarning{Cause: CauseUnattempted, Text: t})
	}
	return ws
}

// refusedReasons counts the refused probes' deciding checks (the
// reasons of the probes never attempted are not theirs).
func refusedReasons(r *RunResult) map[string]int {
	m := map[string]int{}
	for _, pr := range r.Results {
		if pr.Code > 0 && pr.Reason != "" {
			m[ReasonClass(pr.Reason)]++
		}
	}
	return m
}

// noneRemedy says what to do about a run that attached nothing.
func noneRemedy(r *RunResult, o ManyOptions) string {
	notrace := false
	for k := range refusedReasons(r) {
		notrace = notrace || strings.Contains(k, "within_notrace_func")
	}
	generated := o.Targets == TargetsGenerated || o.Targets == ""
	switch {
	case notrace && generated && !o.Traced:
		return "the generated targets are notrace (built without __fentry__), so kprobe_events and perf_kprobe refuse them with EINVAL (within_notrace_func): use --traced or --targets traceable"
	case notrace:
		return "the targets are not in available_filter_functions, so trace_kprobe refuses them with EINVAL (within_notrace_func): use --targets traceable"
	}
	return "--probes FILE lists each target's deciding check"
}

// topReason names the commonest deciding check.
func topReason(reasons map[string]int) string {
	best, n := "", 0
	for _, k := range slices.Sorted(maps.Keys(reasons)) {
		if reasons[k] > n {
			best, n = k, reasons[k]
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; deciding check %s: %d", best, n)
}

// countList writes {EINVAL:3, ENOENT:1} as EINVAL:3,ENOENT:1.
func countList(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// AttachWarnings returns every flagged run's warnings as "RUN: TEXT"
// lines, in run order.
func (rep *ManyReport) AttachWarnings() []string {
	return warningLines(rep.Runs, func(r *RunResult) (string, []AttachWarning) { return r.Name, r.AttachWarnings })
}

// warningLines is the "RUN: TEXT" lines of runs' warnings, in run order
// (run many's and the BPF commands' reports alike).
func warningLines[R any](runs []R, of func(R) (string, []AttachWarning)) []string {
	var out []string
	for _, run := range runs {
		name, ws := of(run)
		for _, w := range ws {
			out = append(out, name+": "+w.Text)
		}
	}
	return out
}

// BPFAttachWarnings flags a BPF run in which every attach failed, with
// the remedy for the errors it knows: -EOPNOTSUPP from a kernel built
// without CONFIG_FPROBE (fprobe says why the run had none).
func BPFAttachWarnings(run *BPFRunReport, fprobe bool, fprobeWhy string) []AttachWarning {
	if run.Attaches == 0 || run.OK > 0 {
		return nil
	}
	t := fmt.Sprintf("all %d attaches failed (%s)", run.Attaches, countList(run.Errors))
	if run.Attaches == 1 {
		t = fmt.Sprintf("its one attach failed (%s)", countList(run.Errors))
	}
	switch {
	case run.Errors["-EOPNOTSUPP"] > 0 && !fprobe:
		why := strings.TrimSuffix(fprobeWhy, " (bpf_kprobe_multi_link_attach is the -EOPNOTSUPP stub)")
		t += "; -EOPNOTSUPP is bpf_kprobe_multi_link_attach's stub on a kernel without CONFIG_FPROBE (" + why + "): use --kconfig FPROBE=y to model the image built with it"
	case len(run.Failed) > 0:
		t += "; the first: " + run.Failed[0]
	}
	return []AttachWarning{{Cause: CauseAllFailed, Text: t}}
}

// Warnings returns the sweep's flagged runs, one line per run and cause:
// "RUN at N=A,B (figures of N=B): TEXT", the text of the last such N.
func (s *Sweep) Warnings() []string {
	var out []string
	for _, run := range s.Runs {
		var causes []string
		ns, last := map[string][]string{}, map[string]string{}
		for _, p := range run.Points {
			for _, w := range p.AttachWarnings {
				if _, ok := ns[w.Cause]; !ok {
					causes = append(causes, w.Cause)
				}
				ns[w.Cause] = append(ns[w.Cause], fmt.Sprint(p.N))
				last[w.Cause] = w.Text
			}
		}
		for _, c := range causes {
			at := strings.Join(ns[c], ",")
			if n := len(ns[c]); n > 1 { // the text's figures are the last N's
				at += " (figures of N=" + ns[c][n-1] + ")"
			}
			out = append(out, fmt.Sprintf("%s at N=%s: %s", run.Name, at, last[c]))
		}
	}
	return out
}
