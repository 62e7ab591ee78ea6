package scenarios

import (
	"math"

	"github.com/kpsim/kpsim/sim"
)

// PhaseNames is the fixed phase order of every report: sim.Phases(), the
// registration order (fixed for a build), every phase included.
func PhaseNames() []string {
	var out []string
	for _, p := range sim.Phases() {
		out = append(out, p.Name)
	}
	return out
}

// Phase returns the run's phase of that name (zero if it counted nothing).
func (r *RunResult) Phase(name string) PhaseResult {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return PhaseResult{Name: name}
}

// Cycles rounds estimated cycles to the integer the reports print.
func Cycles(c float64) int64 { return int64(math.Round(c)) }
