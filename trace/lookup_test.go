package trace

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// bootWalk boots a machine with Config.Walk set as walk, and its tracing
// layer with other dynamic events on dyn_event_list.
func bootWalk(t fataler, k *image.Kernel, walk bool, otherDyn int) (*machine.Machine, *Tracing) {
	t.Helper()
	cfg := machine.DefaultConfig()
	cfg.Walk = walk
	m, err := machine.Boot(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tcfg := ConfigFor(k)
	tcfg.OtherDynEvents = otherDyn
	tr := New(Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: k, C: m.C, Faults: m.Faults}, tcfg)
	m.AtLateInit(tr.LateInit)
	return m, tr
}

// TestLookupShortcutMatchesWalk: on random sets of kprobe events (creates
// in a few groups with shared names, appends, deletes by GRP/EVENT, by
// EVENT and by GRP/), the counted shortcut of find_trace_kprobe and
// find_trace_event_call answers as the plain walks do, with identical
// counts, and the writes decide and count the same either way.
func TestLookupShortcutMatchesWalk(t *testing.T) {
	race.RapidChecks(t, 20)
	k := indexImage(t)
	groups, names := eventGroups, eventNames
	rapid.Check(t, func(rt *rapid.T) {
		otherDyn := rapid.IntRange(0, 3).Draw(rt, "otherDyn")
		mWalk, walk := bootWalk(rt, k, true, otherDyn)
		mFast, fast := bootWalk(rt, k, false, otherDyn)
		if _, ok := walk.lookup.(walkLookup); !ok {
			rt.Fatalf("Config.Walk: lookup is %T", walk.lookup)
		}
		if _, ok := fast.lookup.(countedLookup); !ok {
			rt.Fatalf("no Config.Walk: lookup is %T", fast.lookup)
		}
		for w := range rapid.IntRange(1, 20).Draw(rt, "writes") {
			buf := drawEventWrite(rt, 4, nil)
			outsW, errW := walk.WriteKprobeEvents(buf)
			outsF, errF := fast.WriteKprobeEvents(buf)
			if got, want := state(fast, outsF, errF), state(walk, outsW, errW); got != want {
				rt.Fatalf("write %d %q: the shortcut decides\n%s\nthe walk\n%s", w, buf, got, want)
			}
			if got, want := mFast.C.Snapshot(), mWalk.C.Snapshot(); !slices.Equal(got, want) {
				rt.Fatalf("write %d %q: counts differ:\nshortcut %v\nwalk     %v", w, buf, mFast.C.NonZero(), mWalk.C.NonZero())
			}
			sameWalkAndShortcut(rt, walk, fast, append(groups, "none"), append(names, "missing"))
		}
	})
}

// sameWalkAndShortcut asks both lookups for every key, each into fresh
// counters, and requires the same answer (the same probe or event by its
// place on its list) and the same counts.
func sameWalkAndShortcut(t fataler, walk, fast *Tracing, groups, names []string) {
	t.Helper()
	ask := func(tr *Tracing, f func()) []uint64 {
		c := sim.NewCounters(false)
		saved := tr.d.C
		tr.d.C = c
		f()
		tr.d.C = saved
		return c.Snapshot()
	}
	for _, g := range groups {
		for _, n := range names {
			var tkW, tkF *TraceKprobe
			cW := ask(walk, func() { tkW = walk.lookup.findTraceKprobe(n, g) })
			cF := ask(fast, func() { tkF = fast.lookup.findTraceKprobe(n, g) })
			if (tkW == nil) != (tkF == nil) || tkW != nil && (tkW.seq != tkF.seq || tkW.describe() != tkF.describe()) {
				t.Fatalf("find_trace_kprobe(%s/%s): shortcut %v, walk %v", n, g, tkF, tkW)
			}
			if !slices.Equal(cW, cF) {
				t.Fatalf("find_trace_kprobe(%s/%s): shortcut counts %v, walk %v", n, g, cF, cW)
			}
			var evW, evF *Event
			cW = ask(walk, func() { evW = walk.lookup.findTraceEventCall(g, n) })
			cF = ask(fast, func() { evF = fast.lookup.findTraceEventCall(g, n) })
			if (evW == nil) != (evF == nil) || evW != nil && (evW.seq != evF.seq || evW.Group != evF.Group || evW.Name != evF.Name) {
				t.Fatalf("find_trace_event_call(%s/%s): shortcut %v, walk %v", g, n, evF, evW)
			}
			if !slices.Equal(cW, cF) {
				t.Fatalf("find_trace_event_call(%s/%s): shortcut counts %v, walk %v", g, n, cF, cW)
			}
		}
	}
}
