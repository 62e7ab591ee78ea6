package scenarios

import (
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/sim"
)

// SwitchNotes says how the switches the runs turn on relate to the kernel
// generation gen (sim.Switch.On): which are already upstream there (the
// baseline runs them; the switch changes nothing), and, on a generation
// older than the series base, how many model a backport that must redo
// hunks. Empty when no run turns a switch on, or when every switch applies
// as written to gen.
func SwitchNotes(gen string, runs []*RunResult) []string {
	var all sim.Switches
	for _, r := range runs {
		for _, s := range r.Switches.List() {
			all = all.With(s)
		}
	}
	var upstream, redo []string
	for _, s := range all.List() {
		a := s.On(gen)
		if a.Upstream {
			upstream = append(upstream, s.String())
		}
		if a.Backport != "" && strings.HasPrefix(a.Backport, "a backport") {
			redo = append(redo, s.String())
		}
	}
	var out []string
	if len(upstream) > 0 {
		out = append(out, fmt.Sprintf("upstream in %s already: %s (its baseline runs the change; the switch changes nothing here)", gen, strings.Join(upstream, ", ")))
	}
	if len(redo) > 0 {
		out = append(out, fmt.Sprintf("the series were written on %s; on %s these switches model backports whose hunks differ (docs/series.md, \"Which kernels each switch applies to\"): %s", sim.SeriesBase, gen, strings.Join(redo, ", ")))
	}
	return out
}
