package trace

import (
	"fmt"

	"github.com/kpsim/kpsim/kprobes"
)

// CheckInvariants asserts the event layer's consistency between two
// writes (simulator-side, uncounted): every live trace event is on
// ftrace_events (and the instance's tr->events) once; its group's
// subsystem counts it; dyn_event_list holds exactly the trace_kprobes of
// the live events; a trace_kprobe that is not pending has its kprobe
// registered, disabled exactly when its event is not enabled; a return
// probe holds its rethook pool (kretprobe instances) exactly while it is
// registered. With trace-event-index built, the index holds exactly the
// static and the live events.
func (t *Tracing) CheckInvariants() error {
	if n := t.calls.len(); n != len(t.events) {
		return fmt.Errorf("trace: %d events on ftrace_events, %d live trace events", n, len(t.events))
	}
	if err := t.checkIndex(); err != nil {
		return err
	}
	groups := map[string]int{}
	tks, files := 0, 0
	for key, ev := range t.events {
		if ev.Group != key.group || ev.Name != key.name {
			return fmt.Errorf("trace: event %s/%s filed as %s/%s", ev.Group, ev.Name, key.group, key.name)
		}
		if ev.local {
			return fmt.Errorf("trace: perf-local event %s/%s is on the lists", ev.Group, ev.Name)
		}
		if len(ev.probes) == 0 {
			return fmt.Errorf("trace: event %s/%s has no trace_kprobe", ev.Group, ev.Name)
		}
		if !ev.noFile {
			files++
		}
		if ev.inSystem {
			groups[ev.Group]++ // event_subsystem_dir counted it (file->system)
		}
		if ev.hasDir && !ev.inSystem {
			return fmt.Errorf("trace: %s/%s has a directory but no group directory", ev.Group, ev.Name)
		}
		for _, tk := range ev.probes {
			tks++
			if err := checkTK(tk, ev, t.disarmWarned()); err != nil {
				return err
			}
		}
	}
	if files != t.files.len() {
		return fmt.Errorf("trace: %d trace_event_files on tr->events, %d live events with one", t.files.len(), files)
	}
	if tks != t.dyn.len() {
		return fmt.Errorf("trace: dyn_event_list holds %d trace_kprobes, the events %d", t.dyn.len(), tks)
	}
	if t.dynList.Len() != t.dyn.len() || t.callList.Len() != t.calls.len() {
		return fmt.Errorf("trace: the lists hold %d and %d entries, their positions %d and %d", t.dynList.Len(), t.callList.Len(), t.dyn.len(), t.calls.len())
	}
	sys := 0
	for _, s := range t.systems {
		if isPlaceholderSystem(s) {
			continue
		}
		static := t.staticPerSys[s.name] // a static system's own events stay
		if s.nEvents != static+groups[s.name] {
			return fmt.Errorf("trace: subsystem %s counts %d events, %d static and %d live", s.name, s.nEvents, static, groups[s.name])
		}
		if groups[s.name] == 0 {
			if static == 0 {
				return fmt.Errorf("trace: subsystem %s has no event", s.name)
			}
			continue
		}
		sys++
	}
	if sys != len(groups) {
		return fmt.Errorf("trace: %d subsystems for %d groups", sys, len(groups))
	}
	all := map[string]int{}
	for _, ev := range t.events {
		all[ev.Group]++
	}
	for g, n := range t.perGrp {
		if all[g] != n {
			return fmt.Errorf("trace: group %s: %d events counted, %d live", g, n, all[g])
		}
	}
	return nil
}

// disarmWarned: __disarm_kprobe_ftrace WARNed (a failed filter update
// after the count went down): disable_kprobe then failed, which
// __disable_trace_kprobe ignores, so an event can be disabled with its
// probe still armed, in the kernel as in the model.
func (t *Tracing) disarmWarned() bool {
	ft := t.d.Ftrace
	return ft != nil && ft.KprobeOps(false).DisarmWarnings()+ft.KprobeOps(true).DisarmWarnings() > 0
}

func checkTK(tk *TraceKprobe, ev *Event, warned bool) error {
	name := ev.Group + "/" + ev.Name
	switch {
	case tk.ev != ev:
		return fmt.Errorf("trace: a trace_kprobe of %s points to another event", name)
	case !tk.listed:
		return fmt.Errorf("trace: a trace_kprobe of %s is not on dyn_event_list", name)
	case !tk.pending && !tk.Registered():
		return fmt.Errorf("trace: a trace_kprobe of %s is neither pending nor registered", name)
	case tk.pending && tk.Registered():
		return fmt.Errorf("trace: a pending trace_kprobe of %s is registered", name)
	}
	// A gone probe (its module went away: kill_kprobe) is exempt: a later
	// disable_kprobe finds kprobe_disabled() true (GONE counts) and leaves
	// KPROBE_FLAG_DISABLED clear, in the kernel as in the model.
	if disabled := tk.Kp.Flags&kprobes.KprobeFlagDisabled != 0; tk.Registered() && !tk.Kp.Gone() && disabled == ev.Enabled() && !(warned && tk.Kp.Ftrace()) {
		return fmt.Errorf("trace: %s enabled %v but its kprobe's KPROBE_FLAG_DISABLED is %v", name, ev.Enabled(), disabled)
	}
	if tk.Return && (tk.Rp.Instances() > 0) != tk.Registered() {
		return fmt.Errorf("trace: return probe of %s: %d kretprobe instances, registered %v", name, tk.Rp.Instances(), tk.Registered())
	}
	return nil
}

// CheckTeardown is CheckInvariants after every event was deleted and every
// perf event closed: no event, subsystem, dyn_event or perf trace user is
// left.
func (t *Tracing) CheckTeardown() error {
	if err := t.CheckInvariants(); err != nil {
		return err
	}
	switch {
	case len(t.events) != 0:
		return fmt.Errorf("teardown: %d trace events left", len(t.events))
	case t.dynSystems() != 0:
		return fmt.Errorf("teardown: %d event subsystems (tracefs group directories) left", t.dynSystems())
	case t.dyn.len() != 0:
		return fmt.Errorf("teardown: %d dyn_events left", t.dyn.len())
	case t.perfTotalRef != 0:
		return fmt.Errorf("teardown: %d perf trace users left", t.perfTotalRef)
	}
	return nil
}

// HasDir reports whether event_create_dir made the event's tracefs
// directory (false after a tracefs.dir fault).
func (e *Event) HasDir() bool { return e.hasDir }

// isPlaceholderSystem: a boot-time subsystem New adds for unnamed static
// events.
func isPlaceholderSystem(s *subsystem) bool { return len(s.name) > 0 && s.name[0] == 0 }

// dynSystems counts the subsystems made for dynamic events (the static
// ones stay for good).
func (t *Tracing) dynSystems() int {
	n := 0
	for _, s := range t.systems {
		if !isPlaceholderSystem(s) && t.staticPerSys[s.name] == 0 {
			n++
		}
	}
	return n
}
