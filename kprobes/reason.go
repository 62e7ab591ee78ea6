package kprobes

import (
	"fmt"
	"io"
	"strings"
)

// Reason is why the kernel refused a probe or left it unoptimized: the
// check that decided, named as the kernel call chain that reached it
// ("check_kprobe_address_safe: jump_label_text_reserved", "can_optimize",
// "optimize_kprobe"), and what that check found, in kernel terms ("NOP5
// site at +5", "jump into the probed bytes at +9"). Offsets are relative
// to the symbol that holds the address.
//
// A Reason never depends on the patch switches: the linear and the
// indexed forms of a check reach the same decision, and the detail is
// derived from the image, not from how the lookup found it. The zero
// Reason means nothing stood in the way (a registered, optimized probe).
type Reason struct {
	Check  string `json:"check,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// String returns "check: detail" ("" for the zero Reason).
func (r Reason) String() string {
	switch {
	case r.Check == "":
		return r.Detail
	case r.Detail == "":
		return r.Check
	}
	return r.Check + ": " + r.Detail
}

// IsZero reports whether r is the zero Reason.
func (r Reason) IsZero() bool { return r == Reason{} }

// Why returns the reason of the last decision about p: why the last
// RegisterKprobe of p failed, or, for a registered probe, why the entry
// at its address (p itself or its aggregator) is not optimized. It is the
// zero Reason for a registered, optimized probe.
func (p *Kprobe) Why() Reason {
	if !p.refused.IsZero() {
		return p.refused
	}
	if p.parent != nil {
		return p.parent.why
	}
	return p.why
}

// State is where a probe stands, as /sys/kernel/debug/kprobes/list would
// show it.
type State uint8

// The states of a probe.
const (
	StateUnregistered State = iota // refused, or never registered
	StateDisabled                  // registered with KPROBE_FLAG_DISABLED (or GONE)
	StateFtrace                    // armed through ftrace ([FTRACE])
	StateInt3                      // armed as an int3 breakpoint
	StateOptimized                 // jump-optimized ([OPTIMIZED]; the jump may still be queued)
)

var stateNames = [...]string{"unregistered", "disabled", "ftrace", "int3", "optimized"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// MarshalText makes a State read as its name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// State returns where p stands: its own flags, or its aggregator's for a
// child (the aggregator is what the kernel arms and optimizes).
func (p *Kprobe) State() State {
	if !p.Registered() {
		return StateUnregistered
	}
	e := p
	if p.parent != nil {
		e = p.parent
	}
	switch {
	case p.Disabled() || e.Disabled():
		return StateDisabled
	case e.Ftrace():
		return StateFtrace
	case e.Optimized():
		return StateOptimized
	}
	return StateInt3
}

// Recorder receives the decision trail of a registration: every check in
// the order the kernel makes it, what it looked at and what it decided.
// Kprobes.Trail is nil by default (no trail, no cost); the steps never
// change a count. A front door (tracefs kprobe_events, the perf kprobe
// PMU) records its own steps to the same Recorder before it calls
// register_kprobe, so one trail reads from the user's write to the arm.
type Recorder interface {
	Record(Step)
}

// Step is one check of a decision trail.
type Step struct {
	// Depth nests a step under the one before it with a smaller depth: 0
	// for register_kprobe's own steps, 1 for the checks they make, ...
	Depth int
	// Check is the kernel function (or the chain "caller: callee").
	Check string
	// Args is what it looked at ("\"vfs_read\"", "[0x..., 0x...]"); may be empty.
	Args string
	// Result is what it decided ("0xffffffff812a3b40", "false", "-EINVAL").
	Result string
}

// String formats the step as "check(args) = result", or "check: result"
// when there are no arguments.
func (s Step) String() string {
	var b strings.Builder
	b.WriteString(s.Check)
	if s.Args != "" {
		b.WriteString("(")
		b.WriteString(s.Args)
		b.WriteString(")")
	}
	if s.Result != "" {
		if s.Args != "" {
			b.WriteString(" = ")
		} else {
			b.WriteString(": ")
		}
		b.WriteString(s.Result)
	}
	return b.String()
}

// Trail is a Recorder that keeps every step.
type Trail struct {
	Steps []Step
}

// Record appends s.
func (t *Trail) Record(s Step) { t.Steps = append(t.Steps, s) }

// WriteTo prints one step a line, indented two spaces per depth.
func (t *Trail) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, s := range t.Steps {
		m, err := fmt.Fprintf(w, "%s%s\n", strings.Repeat("  ", s.Depth), s)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
