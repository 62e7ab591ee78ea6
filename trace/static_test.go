package trace

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

var staticGens = []image.Generation{image.Gen61, image.Gen612, image.Gen73}

// staticBoot boots a copy of the index image in generation g, edited by
// edit when set, with the walks (walk) or the counted shortcut.
func staticBoot(t *testing.T, g image.Generation, walk bool, edit func(k *image.Kernel)) (*image.Kernel, *Tracing) {
	t.Helper()
	k := *indexImage(t)
	k.Config.Gen = g
	k.Modules = nil
	for _, m := range indexImage(t).Modules {
		mc := *m
		k.Modules = append(k.Modules, &mc)
	}
	if edit != nil {
		edit(&k)
	}
	_, tr := bootWalk(t, &k, walk, 0)
	return &k, tr
}

// writeOne writes one line and returns its outcome and counts.
func writeOne(t *testing.T, tr *Tracing, line string) (Outcome, map[sim.Op]uint64) {
	t.Helper()
	c := tr.counters()
	snap := c.Snapshot()
	out, _ := tr.WriteKprobeEvents(line + "\n")
	if len(out) != 1 || !out[0].Attempted {
		t.Fatalf("%q: outcomes %+v", line, out)
	}
	return out[0], c.Since(snap)
}

// TestStaticEventExists: a kprobe event named like a static trace event
// (vmlinux's sched/sched_switch, or a loaded module's) is refused -EEXIST
// by trace_probe_register_event_call: find_trace_event_call walks
// ftrace_events (the dynamic events, then the newest module's, each
// section from its end, vmlinux's last) and finds it. No event and no
// kprobe is left. An image's own _ftrace_events table replaces Debian's.
func TestStaticEventExists(t *testing.T) {
	deb := debian61Events()
	idx := slices.Index(deb, image.TraceEvent{System: "sched", Name: "sched_switch"})
	if idx < 0 {
		t.Fatal("Debian 6.1's events lack sched/sched_switch")
	}
	fn := synth.ProbeTargetName(3)
	for _, g := range staticGens {
		for _, walk := range []bool{false, true} {
			k, tr := staticBoot(t, g, walk, nil)
			o, counts := writeOne(t, tr, "p:sched/sched_switch "+fn)
			if o.Code != errno.EEXIST || o.Reason.Check != "trace_probe_register_event_call" {
				t.Fatalf("%v walk=%v: %v %s, want EEXIST from trace_probe_register_event_call", g, walk, o.Code, o.Reason)
			}
			pos := SyntheticModuleEvents*len(k.Modules) + len(deb) - idx
			if got := counts[opEvVisit]; got != uint64(pos) {
				t.Errorf("%v walk=%v: %d ftrace_events entries visited, want %d", g, walk, got, pos)
			}
			if tr.NumEvents() != 0 || tr.d.KP.Reg.Len() != 0 || tr.LookupEvent("sched", "sched_switch") != nil {
				t.Errorf("%v walk=%v: the refused line left an event or a kprobe", g, walk)
			}
		}
		// The image's tables: vmlinux has only mysys/myev, module 0 has
		// modsys/modev.
		_, tr := staticBoot(t, g, false, func(k *image.Kernel) {
			k.TraceEvents = []image.TraceEvent{{System: "mysys", Name: "myev"}}
			k.Modules[0].TraceEvents = []image.TraceEvent{{System: "modsys", Name: "modev"}, {System: "modsys", Name: "other"}}
		})
		for _, tc := range []struct {
			line string
			code errno.Errno
		}{
			{"p:mysys/myev " + fn, errno.EEXIST},
			{"p:modsys/modev " + fn, errno.EEXIST},
			{"p:modsys/mine " + fn, 0},
			{"p:sched/sched_switch " + fn, 0}, // not in this image
		} {
			if o, _ := writeOne(t, tr, tc.line); o.Code != tc.code {
				t.Errorf("%v %q: %v, want %v (%s)", g, tc.line, o.Code, tc.code, o.Reason)
			}
		}
	}
}

// TestStaticSystemReused: a kprobe event in a group named like a static
// system (sched) joins that system: event_subsystem_dir finds it on
// tr->systems, at its place (the newest module's systems first, then
// vmlinux's, the one made last first), and makes no group directory; the
// system stays when the event goes.
func TestStaticSystemReused(t *testing.T) {
	fn := synth.ProbeTargetName(3)
	for _, g := range staticGens {
		_, tr := staticBoot(t, g, false, nil)
		at := slices.IndexFunc(tr.systems, func(s *subsystem) bool { return s.name == "sched" })
		if at < 0 {
			t.Fatalf("%v: no sched on tr->systems", g)
		}
		want := map[sim.Op]uint64{opSysVisit: uint64(at + 1), opDentry: filesPerEvent, opEiCreate: 0}
		if g != image.Gen61 {
			want[opDentry], want[opEiCreate] = 0, 1 // eventfs: the event's eventfs_inode only
		}
		for round := range 2 {
			o, counts := writeOne(t, tr, "p:sched/mine "+fn)
			if o.Code != 0 {
				t.Fatalf("%v: %v (%s)", g, o.Code, o.Reason)
			}
			for op, w := range want {
				if counts[op] != w {
					t.Errorf("%v round %d: %s %d, want %d", g, round, op.Name(), counts[op], w)
				}
			}
			if err := tr.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			if o, _ := writeOne(t, tr, "-:sched/mine"); o.Code != 0 {
				t.Fatalf("%v: delete: %v", g, o.Code)
			}
		}
		if err := tr.CheckTeardown(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestModuleEventsOnWalks: a loaded module's trace events
// (trace_module_add_events) are on ftrace_events and tr->events, so
// find_trace_event_call's walk and a group enable's walk of tr->events
// cover them, and their systems are on tr->systems: a module's
// _ftrace_events table when the image has it, else
// SyntheticModuleEvents in one system of its own.
func TestModuleEventsOnWalks(t *testing.T) {
	for _, g := range staticGens {
		for _, tables := range []bool{false, true} {
			var edit func(k *image.Kernel)
			modEvents, modSystems := 0, 0
			if tables {
				edit = func(k *image.Kernel) {
					k.Modules[0].TraceEvents = []image.TraceEvent{{System: "modsys", Name: "a"}, {System: "modsys", Name: "b"}, {System: "sched", Name: "mod_sched"}}
				}
				modEvents, modSystems = 3, 1 // modsys; sched is vmlinux's
			}
			k, tr := staticBoot(t, g, false, edit)
			synthetic := len(k.Modules) - btoi(tables) // modules without a table
			modEvents += SyntheticModuleEvents * synthetic
			modSystems += synthetic
			T := DebianStaticEvents + modEvents
			if tr.NumTraceEvents() != T || len(tr.systems) != DebianStaticSystems+modSystems {
				t.Fatalf("%v tables=%v: %d trace events in %d systems, want %d in %d", g, tables, tr.NumTraceEvents(), len(tr.systems), T, DebianStaticSystems+modSystems)
			}
			o, counts := writeOne(t, tr, "p:newgrp/ev "+synth.ProbeTargetName(3))
			if o.Code != 0 {
				t.Fatalf("%v: %v (%s)", g, o.Code, o.Reason)
			}
			if got := counts[opEvVisit]; got != uint64(T) {
				t.Errorf("%v tables=%v: find_trace_event_call visited %d, want T = %d", g, tables, got, T)
			}
			if got := counts[opSysVisit]; got != 2*uint64(DebianStaticSystems+modSystems) {
				t.Errorf("%v tables=%v: a new group walked %d systems, want 2 x %d", g, tables, got, DebianStaticSystems+modSystems)
			}
			c := tr.counters()
			snap := c.Snapshot()
			if err := tr.EnableGroup("newgrp", false, nil); err != nil {
				t.Fatal(err)
			}
			if got := c.Since(snap)[opFileVisit]; got != uint64(T+1) {
				t.Errorf("%v tables=%v: events/newgrp/enable walked %d files, want %d", g, tables, got, T+1)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDebian61EventsMatchRealKernel: debian61_events.txt is the pinned
// real kernel's _ftrace_events as image/elfload reads it (skipped without
// `make real-kernel`; KPSIM_UPDATE_EVENTS=1 rewrites the file).
func TestDebian61EventsMatchRealKernel(t *testing.T) {
	const p = "../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	k, err := load.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	systems := map[string]bool{}
	for _, e := range k.TraceEvents {
		if e.System == "" || e.Name == "" || strings.ContainsAny(e.System+e.Name, " \n") {
			t.Fatalf("real kernel: unreadable event %+v", e)
		}
		systems[e.System] = true
		fmt.Fprintf(&b, "%s %s\n", e.System, e.Name)
	}
	if os.Getenv("KPSIM_UPDATE_EVENTS") != "" {
		if err := os.WriteFile("debian61_events.txt", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if b.String() != debian61EventsText {
		t.Fatal("debian61_events.txt differs from the real kernel's _ftrace_events: rerun with KPSIM_UPDATE_EVENTS=1")
	}
	if len(k.TraceEvents) != DebianStaticEvents || len(systems) != DebianStaticSystems {
		t.Fatalf("real kernel: %d events in %d systems, DebianStaticEvents/Systems say %d/%d", len(k.TraceEvents), len(systems), DebianStaticEvents, DebianStaticSystems)
	}
	// The tracing layer takes the image's table, not the embedded copy.
	if cfg := ConfigFor(k); len(cfg.Static) == 0 || &cfg.Static[0].Events[0] != &k.TraceEvents[0] {
		t.Fatal("ConfigFor does not use the image's _ftrace_events")
	}
}

// TestGoingModuleEventsGone: trace_module_notify removes a module's events
// at MODULE_STATE_GOING (trace_module_remove_events), so a going module's
// events are on no list.
func TestGoingModuleEventsGone(t *testing.T) {
	for _, g := range staticGens {
		k, tr := staticBoot(t, g, false, func(k *image.Kernel) { k.Modules[0].State = image.ModuleGoing })
		want := DebianStaticEvents + SyntheticModuleEvents*(len(k.Modules)-1)
		if tr.NumTraceEvents() != want {
			t.Errorf("%v: %d trace events with module 0 going, want %d", g, tr.NumTraceEvents(), want)
		}
	}
}
