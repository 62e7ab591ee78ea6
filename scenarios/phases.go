package scenarios

import (
	"math"
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// PhaseOrder is the order every report lists phases in. It is declared
// here, not derived from sim's registry (whose indexes follow names), so
// no import order can move a row; TestPhaseOrderComplete fails when a
// registered phase is missing. It is the order reports have always had
// (the registration order of the kpsim binary before phases were
// declared), kept so that reports before and after compare line for line.
var PhaseOrder = []string{
	"other",
	// BPF kprobe.multi and libbpf's user-space side.
	"bpf.link_create", "bpf.resolve", "bpf.fprobe",
	// BPF tracing multi (7.3), in attach order.
	"tracing_multi.link", "tracing_multi.kallsyms", "tracing_multi.btf", "tracing_multi.trampoline",
	"tracing_multi.jit", "tracing_multi.image", "tracing_multi.ftrace", "tracing_multi.text_poke",
	"libbpf.parse", "libbpf.read.kallsyms", "libbpf.read.filter_functions", "libbpf.perf.attach",
	"rht_deferred_worker",
	// register_kprobe in call order, enable/disable, teardown.
	"enable_kprobe", "disable_kprobe",
	"name_lookup", "rereg_check",
	"safety.ftrace", "safety.text", "safety.blacklist", "safety.jump_label",
	"safety.static_call", "safety.bug", "safety.cfi",
	"prepare", "insert", "arm", "optimize", "optimizer", "unregister",
	// Boot and late_initcall.
	"boot", "late_init",
	// tracefs kprobe_events and the perf kprobe PMU.
	"event.parse", "event.symbols", "event.lookup", "event.register", "tracefs",
	"event.enable", "event.disable", "event.delete",
	"perf.open", "perf.close",
}

// PhaseNames is the phase order of every report: PhaseOrder's registered
// phases, then (a bug TestPhaseOrderComplete catches) any registered phase
// PhaseOrder lacks, by name. Every registered phase is included.
func PhaseNames() []string {
	var out []string
	for _, name := range PhaseOrder {
		if _, ok := sim.LookupPhase(name); ok {
			out = append(out, name)
		}
	}
	for _, p := range sim.Phases() {
		if !slices.Contains(PhaseOrder, p.Name) {
			out = append(out, p.Name)
		}
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
