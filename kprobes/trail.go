package kprobes

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// The model reports what its checks decided through one hook, kp.ex():
// typed records (a check and what it looked at), never words. The hook
// turns a refusal into the Reason the caller reads (always: Why is part
// of the model's answer) and, when a Recorder is set, every record into
// trail steps. The wording of both lives in trail_text.go.

// explain is the hook. Its step methods do nothing without a Recorder
// (kp.Trail nil): no formatting, no allocation.
type explain struct{ kp *Kprobes }

// ex returns the explain hook of kp.
func (kp *Kprobes) ex() explain { return explain{kp} }

// ev names one check, or one outcome of a check, that the model reports.
type ev uint8

// rec is what a check looked at and found. Which fields an ev uses is
// written beside its wording (trail_text.go).
type rec struct {
	ev   ev
	addr uint64 // the address the check looked at
	at   uint64 // an address the check found: a location, a symbol start, a slot
	end  uint64 // the end of a range (inclusive), or where a walk stopped
	size uint64 // a symbol size
	off  uint64 // an offset in a symbol
	n, k int    // counts: instructions walked, bytes copied, probes
	p    *Kprobe
	mod  *image.Module
	name string
	flag bool // a yes or no the check found
	insn x86.Insn
	err  error // an error the check met (not the errno it returns)
}

// step records r as passed (a trail step; nothing without a Recorder).
func (x explain) step(r rec) {
	if x.kp.Trail != nil {
		x.kp.words(r, nil, false)
	}
}

// refuse records r as the check that refused, with errno err: its reason
// becomes kp.why, and its step joins the trail. It returns err.
func (x explain) refuse(err error, r rec) error {
	x.kp.why = x.kp.words(r, err, true)
	return err
}

// reason returns r's reason without making it the pending refusal (for a
// probe left unoptimized), and records r's step.
func (x explain) reason(r rec) Reason {
	return x.kp.words(r, nil, true)
}

// open records r and nests the following steps under it until close is
// given open's answer (defer x.close(x.open(r))).
func (x explain) open(r rec) int {
	kp := x.kp
	if kp.Trail == nil {
		return 0
	}
	depth := kp.depth
	kp.words(r, nil, false)
	kp.depth++
	return depth
}

// close ends the nesting an open began.
func (x explain) close(depth int) {
	if x.kp.Trail != nil {
		x.kp.depth = depth
	}
}

// hold buffers the steps until the returned flush runs (see
// Kprobes.hold); without a Recorder flush does nothing.
func (x explain) hold() (flush func()) {
	if x.kp.Trail == nil {
		return noFlush
	}
	return x.kp.hold()
}

func noFlush() {}

// refuse records why a check failed, already worded (read by the caller
// that knows which probe it concerns), and returns err.
func (kp *Kprobes) refuse(err error, check, detail string) error {
	kp.why = Reason{Check: check, Detail: detail}
	return err
}

// note records one step at the current depth (call only when tracing).
func (kp *Kprobes) note(check, args, result string) {
	kp.Trail.Record(Step{Depth: kp.depth, Check: check, Args: args, Result: result})
}

// noteSub records a step one level below the current one: what a check
// looked at on its way (call only when tracing).
func (kp *Kprobes) noteSub(check, args, result string) {
	kp.Trail.Record(Step{Depth: kp.depth + 1, Check: check, Args: args, Result: result})
}

// HoldTrail is hold for front doors: the steps recorded until flush runs
// are written with those at the current depth first, the deeper ones
// after, so a caller can note its summary of a call after making it and
// still have it lead the call's own steps. A no-op without a trail.
func (kp *Kprobes) HoldTrail() (flush func()) {
	return kp.ex().hold()
}

// hold buffers the steps recorded until the returned flush runs, then
// writes the check's own steps (at the current depth) before the ones
// nested under them: a walk's summary, known only at its end, comes
// before what it met on the way (call only when tracing).
func (kp *Kprobes) hold() (flush func()) {
	saved, base := kp.Trail, kp.depth
	buf := &Trail{}
	kp.Trail = buf
	done := false
	return func() {
		if done {
			return
		}
		done = true
		kp.Trail = saved
		for _, s := range buf.Steps {
			if s.Depth <= base {
				saved.Record(s)
			}
		}
		for _, s := range buf.Steps {
			if s.Depth > base {
				saved.Record(s)
			}
		}
	}
}

// Indent returns a Recorder that records to r with every step nested d
// levels deeper: a front door records its own steps at depth 0 and hands
// Indent(r, 1) to the kprobes core.
func Indent(r Recorder, d int) Recorder { return indent{r, d} }

type indent struct {
	r Recorder
	d int
}

func (i indent) Record(s Step) { s.Depth += i.d; i.r.Record(s) }
