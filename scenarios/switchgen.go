package scenarios

import (
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/sim"
)

// SwitchNotes says how the switches the runs turn on relate to the kernel
// generation gen (sim.Switch.On): which are already upstream there (the
// baseline runs them; the switch changes nothing), and, on a generation
// older than the series base, which model a backport that must redo
// hunks, and the decisions a switch changes there (sim.Applicability's
// Decision: the one place a switch may not keep a generation's decisions). Empty when no run turns a switch on, or when every switch applies
// as written to gen.
func SwitchNotes(gen string, runs []*RunResult) []string {
	var all sim.Switches
	for _, r := range runs {
		for _, s := range r.Switches.List() {
			all = all.With(s)
		}
	}
	var upstream, redo, decisions []string
	for _, s := range all.List() {
		a := s.On(gen)
		if a.Decision != "" {
			decisions = append(decisions, fmt.Sprintf("on %s %s changes a decision: %s", gen, s, a.Decision))
		}
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
	return append(out, decisions...)
}
