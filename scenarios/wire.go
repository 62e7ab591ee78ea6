package scenarios

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// PhaseBoot and PhaseLateInit are the machine's boot phases.
var (
	PhaseBoot     = machine.PhaseBoot
	PhaseLateInit = machine.PhaseLateInit
)

// KallsymsBuildOptions are the scripts/kallsyms flags of an x86-64 6.1
// distro build (KALLSYMS_ALL, ABSOLUTE_PERCPU, BASE_RELATIVE).
var KallsymsBuildOptions = machine.KallsymsBuildOptions

// Wiring builds the subsystems one run's kernel uses; scenarios share it.
type Wiring = machine.Wiring

// DefaultWiring is the real wiring (machine.Wire).
func DefaultWiring(k *image.Kernel, sw sim.Switches, c *sim.Counters, faults *sim.Faults, walk bool) (*machine.Subsystems, error) {
	return machine.Wire(k, sw, c, faults, walk)
}
