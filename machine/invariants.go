package machine

import (
	"errors"
	"fmt"
	"slices"
)

// invState is what the invariant checks remember between calls.
type invState struct {
	indexesChecked bool // the late-init indexes never change once built
}

// CheckInvariants asserts the consistency of the booted kernel between two
// calls (simulator-side, uncounted):
//
//   - kprobes.CheckInvariants: table vs tree, probe states, optimizer
//     lists, slot caches, counters;
//   - ftrace: the filter hashes of kprobe_ftrace_ops and
//     kprobe_ipmodify_ops hold exactly the addresses of the armed ftrace
//     kprobes (each in one of them), each ops' user count
//     (kprobe_ftrace_enabled / kprobe_ipmodify_enabled) is its filter's
//     size, and an ops is registered with ftrace exactly while it has
//     users;
//   - the late-init indexes (jump-label, static-call, bug, blacklist),
//     when built, answer as the linear walks of their tables do (checked
//     once: the tables do not change after late init).
func (m *Machine) CheckInvariants() error {
	return m.afterWarn(m.checkInvariants())
}

// ErrAfterKernelWarn wraps an invariant failure found after
// __disarm_kprobe_ftrace WARNed (ftrace.Ops.DisarmWarnings): from there on
// the kernel's own state is inconsistent (kprobe_ftrace_enabled off by
// one, a probe whose unregistration failed still hashed, and the trace
// layer clearing its address anyway), so the model, which follows it, is
// too. A campaign can tell these from model bugs with errors.Is.
var ErrAfterKernelWarn = errors.New("after a __disarm_kprobe_ftrace WARN the kernel's state is inconsistent")

func (m *Machine) afterWarn(err error) error {
	if err == nil || m.Ftrace == nil {
		return err
	}
	if w := m.Ftrace.KprobeOps(false).DisarmWarnings() + m.Ftrace.KprobeOps(true).DisarmWarnings(); w > 0 {
		return fmt.Errorf("%w (%d WARNs): %v", ErrAfterKernelWarn, w, err)
	}
	return err
}

func (m *Machine) checkInvariants() error {
	if err := m.KP.CheckInvariants(); err != nil {
		return err
	}
	if err := m.checkFtrace(); err != nil {
		return err
	}
	if m.lateDone && !m.inv.indexesChecked {
		var checks []func() error
		if m.JumpLabel != nil {
			checks = append(checks, m.JumpLabel.CheckIndex)
		}
		if m.StaticCall != nil {
			checks = append(checks, m.StaticCall.CheckIndex)
		}
		if m.Bugs != nil {
			checks = append(checks, m.Bugs.CheckIndex)
		}
		if m.Blacklist != nil {
			checks = append(checks, m.Blacklist.CheckIndex)
		}
		for _, ck := range checks {
			if err := ck(); err != nil {
				return err
			}
		}
		m.inv.indexesChecked = true
	}
	return nil
}

// CheckTeardown is CheckInvariants after everything was unregistered and
// the optimizer drained: kprobes.CheckTeardown (empty registry, no queued
// optimizer work, no slot in use, pages freed as the kernel frees them) and
// no ftrace ops of kprobes left: both filter hashes empty, no users, not
// registered.
func (m *Machine) CheckTeardown() error {
	if err := m.CheckInvariants(); err != nil {
		return err
	}
	if err := m.KP.CheckTeardown(); err != nil {
		return m.afterWarn(err)
	}
	if m.Ftrace == nil {
		return nil
	}
	for _, ipmod := range []bool{false, true} {
		o := m.Ftrace.KprobeOps(ipmod)
		if o.DisarmWarnings() > 0 {
			return fmt.Errorf("teardown: %s: __disarm_kprobe_ftrace WARNed %d times (a failed ftrace_set_filter_ip after the user count went down): the kernel leaves %d users and %d filter entries", o.Name, o.DisarmWarnings(), o.Users(), len(o.Filter()))
		}
		if n := len(o.Filter()); n != 0 || o.Users() != 0 || o.Enabled() {
			return fmt.Errorf("teardown: %s has %d filter entries, %d users, registered %v", o.Name, n, o.Users(), o.Enabled())
		}
	}
	return nil
}

// checkFtrace: the kprobe ftrace ops match the armed ftrace kprobes.
func (m *Machine) checkFtrace() error {
	if m.Ftrace == nil {
		return nil
	}
	var armed []uint64
	if !m.KP.Reg.AllDisarmed {
		for _, p := range m.KP.Reg.Entries() {
			if p.Ftrace() && !p.Disabled() {
				armed = append(armed, p.Addr)
			}
		}
	}
	var filtered []uint64
	for _, ipmod := range []bool{false, true} {
		o := m.Ftrace.KprobeOps(ipmod)
		f := o.Filter()
		if o.DisarmWarnings() > 0 {
			// The kernel WARNed: __disarm_kprobe_ftrace decremented
			// kprobe_ftrace_enabled and then failed to remove the ip
			// (kernel/kprobes.c, 6.1.192); count and filter disagree
			// for good, in the kernel as in the model.
			filtered = append(filtered, f...)
			continue
		}
		if o.Users() != len(f) {
			return fmt.Errorf("ftrace: %s has %d users (kprobe_ftrace_enabled) and %d filter entries", o.Name, o.Users(), len(f))
		}
		if o.Enabled() != (o.Users() > 0) {
			return fmt.Errorf("ftrace: %s registered %v with %d users", o.Name, o.Enabled(), o.Users())
		}
		filtered = append(filtered, f...)
	}
	slices.Sort(filtered)
	if !slices.Equal(armed, filtered) {
		return fmt.Errorf("ftrace: armed ftrace kprobes %s, kprobe ops filters %s", short(armed), short(filtered))
	}
	return nil
}

func short(a []uint64) string {
	if len(a) > 6 {
		return fmt.Sprintf("%#x … (%d)", a[:6], len(a))
	}
	return fmt.Sprintf("%#x", a)
}
