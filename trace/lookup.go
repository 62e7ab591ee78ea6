package trace

import "github.com/kpsim/kpsim/sim"

// eventLookup answers the two name lookups of event creation: the plain
// walks (events.go), the simulator's counted shortcut of them, or the
// trace-event-index form. New chooses one, once: the walks under
// machine.Config.Walk (kprobes.SimOptions.Walk), the shortcut otherwise,
// either behind the index when sim.TraceEventIndex is on.
type eventLookup interface {
	findTraceKprobe(event, group string) *TraceKprobe
	findTraceEventCall(system, eventName string) *Event
}

func newEventLookup(t *Tracing, walk bool) eventLookup {
	var l eventLookup = countedLookup{t}
	if walk {
		l = walkLookup{t}
	}
	if t.sw.Has(sim.TraceEventIndex) {
		l = indexedLookup{t, l}
	}
	return l
}

// walkLookup is the kernel's walks.
type walkLookup struct{ t *Tracing }

func (w walkLookup) findTraceKprobe(event, group string) *TraceKprobe {
	return w.t.findTraceKprobe(event, group)
}

func (w walkLookup) findTraceEventCall(system, eventName string) *Event {
	return w.t.findTraceEventCall(system, eventName)
}

// countedLookup answers the walks from the simulator's maps and adds the
// counts the walk would make (TestLookupShortcutMatchesWalk proves them
// identical).
type countedLookup struct{ t *Tracing }

// findTraceKprobe: a miss visits all D entries and compares E names; a hit
// at the k-th live trace_kprobe visits the non-kprobe entries (which sit
// before every kprobe event) and k entries, compares k names and one
// group. A name match in another group also costs a group compare.
func (s countedLookup) findTraceKprobe(event, group string) *TraceKprobe {
	t := s.t
	c := t.counters()
	e := t.events[eventKey{group, event}]
	if e == nil || e.local || len(e.probes) == 0 {
		c.Add(opDynVisit, uint64(t.DynEvents()))
		c.Add(opStrcmp, uint64(t.dyn.len()+t.sameNameOtherGroups(event)))
		return nil
	}
	primary := e.probes[0]
	k := t.dyn.before(primary.seq) + 1
	c.Add(opDynVisit, uint64(t.cfg.OtherDynEvents+k))
	c.Add(opStrcmp, uint64(k+1+t.sameNameOtherGroupsBefore(event, group, primary.seq)))
	return primary
}

// findTraceEventCall: a miss visits all T trace events, compares each
// one's system and, for the dynamic events of this system, the name. A
// dynamic hit (which event creation never meets: find_trace_kprobe found
// the event first) and any group named like a static system (its static
// events' names are compared too, and one may match) are left to the
// walk.
func (s countedLookup) findTraceEventCall(system, eventName string) *Event {
	t := s.t
	if e := t.events[eventKey{system, eventName}]; (e != nil && e.callNode != nil) || t.staticPerSys[system] > 0 {
		return t.findTraceEventCall(system, eventName)
	}
	c := t.counters()
	c.Add(opEvVisit, uint64(t.NumTraceEvents()))
	c.Add(opStrcmp, uint64(t.NumTraceEvents()+t.perGrp[system]))
	return nil
}

// sameNameOtherGroups counts live kprobe entries named name in any group
// (their group compares fail).
func (t *Tracing) sameNameOtherGroups(name string) int {
	n := 0
	for _, e := range t.byName[name] {
		n += len(e.probes)
	}
	return n
}

func (t *Tracing) sameNameOtherGroupsBefore(name, group string, seq int) int {
	n := 0
	for _, e := range t.byName[name] {
		if e.Group == group {
			continue
		}
		for _, tk := range e.probes {
			if tk.seq < seq {
				n++
			}
		}
	}
	return n
}

// indexedLookup is the trace-event-index form (index.go) once late init
// built the tables; before that, or when their allocation failed, the
// linear form answers.
type indexedLookup struct {
	t      *Tracing
	linear eventLookup
}

func (x indexedLookup) findTraceKprobe(event, group string) *TraceKprobe {
	if x.t.idx == nil {
		return x.linear.findTraceKprobe(event, group)
	}
	return x.t.findTraceKprobeIndexed(event, group)
}

func (x indexedLookup) findTraceEventCall(system, eventName string) *Event {
	if x.t.idx == nil {
		return x.linear.findTraceEventCall(system, eventName)
	}
	ev, found := x.t.findTraceEventCallIndexed(system, eventName)
	if found && ev == nil {
		return staticCall
	}
	return ev
}
