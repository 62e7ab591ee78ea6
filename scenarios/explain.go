package scenarios

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

// Boot boots a kernel on k under sw (machine.Boot with run many's
// kprobes configuration and cpus online CPUs; faults may be nil), ready
// for a first probe.
func Boot(k *image.Kernel, sw sim.Switches, cpus int, faults *sim.Faults) (*machine.Machine, error) {
	cfg := machine.DefaultConfig()
	cfg.Switches, cfg.Faults = sw, faults
	if cpus >= 1 {
		cfg.Kprobes.CPUs = cpus
	}
	cfg.Counters = sim.NewCounters(false)
	return machine.Boot(k, cfg)
}

// Explanation is what happened to one probe on a booted kernel.
type Explanation struct {
	Target Target
	Door   string
	// Probe is the kprobe registered (nil if the front door refused first).
	Probe *kprobes.Kprobe
	// Addr is the probed address (0 if never resolved).
	Addr  uint64
	Err   error // nil, an Errno, or a model fault
	Code  int   // 0 or the positive errno
	State kprobes.State
	// Why is the deciding check of a refusal or a non-optimization (zero
	// for an optimized probe).
	Why   kprobes.Reason
	Trail *kprobes.Trail
	// Counters hold this registration's counts alone (and the optimizer
	// run after it), not the boot's.
	Counters *sim.Counters
}

// Explain registers the one target t on m's kernel through door (nil:
// register_kprobe's, doors.Doors.Door), runs the deferred optimizer until it is idle, and returns
// the decision trail and the outcome. It counts on a fresh counter set,
// so Explanation.Counters is the cost of this probe alone.
func Explain(m *machine.Machine, t Target, door doors.Door) (*Explanation, error) {
	if door == nil {
		door = doors.New(m).Door(doors.ViaRegisterKprobe, false)
	}
	kp := m.KP
	trail := &kprobes.Trail{}
	c := sim.NewCounters(false)
	saved := kp.C
	kp.C, kp.Trail = c, trail
	defer func() { kp.C, kp.Trail = saved, nil }()

	p, why, err := door.Register(t.Probe())
	var e kprobes.Errno
	code := 0
	switch {
	case err == nil:
	case errors.As(err, &e):
		code = int(e)
	default:
		var bug *kprobes.BugError
		if !errors.As(err, &bug) {
			return nil, fmt.Errorf("%s %s: %w", door.Name(), targetString(t), err)
		}
	}
	if kp.KickPending() {
		trail.Record(kprobes.Step{Check: "kprobe_optimizer", Result: "the delayed work runs (OPTIMIZE_DELAY)"})
		kp.Trail = kprobes.Indent(trail, 1)
		kp.Drain()
	}
	x := &Explanation{Target: t, Door: door.Name(), Probe: p, Err: err, Code: code, Why: why, Trail: trail, Counters: c}
	if p != nil {
		x.Addr, x.State = p.Addr, p.State()
		if err == nil {
			x.Why = p.Why() // the optimizer may have changed it
		}
	}
	return x, nil
}

func targetString(t Target) string {
	switch {
	case t.Symbol != "" && t.Offset != 0:
		return fmt.Sprintf("%s+%d", t.Symbol, t.Offset)
	case t.Symbol != "":
		return t.Symbol
	}
	return fmt.Sprintf("%#x", t.Addr)
}
