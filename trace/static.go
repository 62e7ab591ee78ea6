package trace

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/kpsim/kpsim/image"
)

// debian61Events is Debian 6.1's vmlinux _ftrace_events, "system name"
// per line in section order, read off the pinned kernel
// (linux-image-6.1.0-57-amd64 6.1.192-3) by image/elfload
// (Kernel.TraceEvents): 1,506 events in 97 systems. It stands for
// vmlinux's static events when an image carries neither the table nor
// __event_* symbols (the synthetic generator emits neither).
// TestDebian61EventsMatchRealKernel checks it against the real kernel
// (KPSIM_UPDATE_EVENTS=1 rewrites it).
//
//go:embed debian61_events.txt
var debian61EventsText string

var debian61Events = sync.OnceValue(func() []image.TraceEvent {
	var out []image.TraceEvent
	for _, l := range strings.Split(strings.TrimSpace(debian61EventsText), "\n") {
		sys, name, _ := strings.Cut(l, " ")
		out = append(out, image.TraceEvent{System: sys, Name: name})
	}
	return out
})

// SyntheticModuleEvents is the number of trace events kpsim gives a
// module that does not say (a synthetic one; image.Module.TraceEvents
// nil), in one system of its own: the 935 _ftrace_events entries of the
// 130 modules of testdata/lsmod-debian12-kvm-host.txt found in the
// linux-image-6.1.0-57-amd64 package (kvm 109, xfs 579, ext4 113, xhci_hcd
// 53, libata 33, jbd2 21, tls 7, watchdog 4, nvme_core 4, scsi_mod 5, drm
// 3, mei 3, libphy 1; readelf -S, size / 8), 7.2 per module, rounded.
const SyntheticModuleEvents = 7

// StaticSegment is one _ftrace_events section as the tracing layer holds
// it: vmlinux's, put on ftrace_events by event_trace_enable at boot, or a
// loaded module's, by trace_module_add_events at MODULE_STATE_COMING.
type StaticSegment struct {
	// Owner is "vmlinux" or the module's name.
	Owner string
	// Events are the section's events in section order; nil when only
	// their number is known (Anon unnamed events in AnonSystems systems).
	Events      []image.TraceEvent
	Anon        int
	AnonSystems int
}

func (s StaticSegment) len() int {
	if s.Events != nil {
		return len(s.Events)
	}
	return s.Anon
}

// staticSegments returns the static events of k: vmlinux's (the image's
// table, else its __event_* / str__*__trace_system_name symbols counted,
// else Debian 6.1's), then every formed module not going, in load order
// (its table, else SyntheticModuleEvents in one system).
func staticSegments(k *image.Kernel) []StaticSegment {
	vml := StaticSegment{Owner: "vmlinux", Events: k.TraceEvents}
	if vml.Events == nil {
		for _, s := range k.Symbols {
			switch {
			case strings.HasPrefix(s.Name, "__event_"):
				vml.Anon++
			case strings.HasPrefix(s.Name, "str__") && strings.HasSuffix(s.Name, "__trace_system_name"):
				vml.AnonSystems++
			}
		}
		if vml.Anon == 0 {
			vml = StaticSegment{Owner: "vmlinux", Events: debian61Events()}
		}
	}
	segs := []StaticSegment{vml}
	for _, m := range k.Modules {
		// trace_module_notify adds a module's events at
		// MODULE_STATE_COMING and removes them at MODULE_STATE_GOING.
		if m.State == image.ModuleUnformed || m.State == image.ModuleGoing {
			continue
		}
		seg := StaticSegment{Owner: m.Name, Events: m.TraceEvents}
		if seg.Events == nil {
			seg.Anon, seg.AnonSystems = SyntheticModuleEvents, 1
		}
		if seg.len() > 0 {
			segs = append(segs, seg)
		}
	}
	return segs
}

// staticSystems returns tr->systems as boot and the modules' loads left
// it, from its head: event_subsystem_dir list_add's a system when its
// first event's directory is made, and the directories are made in
// section order (__trace_early_add_event_dirs walks tr->events, which
// __trace_early_add_events built from ftrace_events in the reverse
// order; trace_module_add_events goes through the module's section in
// order), so the system made last is first. Unnamed systems get
// placeholders no written group equals. It also returns how many static
// events each named system has.
func staticSystems(segs []StaticSegment) ([]*subsystem, map[string]int) {
	var made []*subsystem
	byName := map[string]*subsystem{}
	perSys := map[string]int{}
	for i, seg := range segs {
		if seg.Events == nil {
			for j := 0; j < seg.AnonSystems; j++ {
				made = append(made, &subsystem{name: fmt.Sprintf("\x00static%d.%d", i, j), nEvents: 1})
			}
			continue
		}
		for _, e := range seg.Events {
			if e.System == "" {
				continue
			}
			perSys[e.System]++
			if s := byName[e.System]; s != nil {
				s.nEvents++
				continue
			}
			s := &subsystem{name: e.System, nEvents: 1}
			byName[e.System] = s
			made = append(made, s)
		}
	}
	out := make([]*subsystem, len(made))
	for i, s := range made {
		out[len(made)-1-i] = s
	}
	return out, perSys
}

// forEachStatic calls fn for the static events in ftrace_events order
// from its head, until fn returns false: the newest module's first, each
// section from its end (every event was list_add'ed), vmlinux's last.
// An unnamed event is passed as the zero TraceEvent.
func forEachStatic(segs []StaticSegment, fn func(e image.TraceEvent) bool) {
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.Events == nil {
			for range s.Anon {
				if !fn(image.TraceEvent{}) {
					return
				}
			}
			continue
		}
		for j := len(s.Events) - 1; j >= 0; j-- {
			if !fn(s.Events[j]) {
				return
			}
		}
	}
}
