package scenarios

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/sim"
)

// TestExplainThroughFrontDoors: the trail of a probe written to
// kprobe_events starts with the event layer's steps and nests
// register_kprobe's under them; the trail and the decision are the same
// under every switch set; a duplicated name is refused before
// register_kprobe is reached.
func TestExplainThroughFrontDoors(t *testing.T) {
	cfg := smallImage(31)
	cfg.ProbeTargets, cfg.ProbeTargetsTraced = 20, true
	k := fixture.Generate(t, cfg)
	target := Target{Raw: synth.ProbeTargetName(2) + "+5", Symbol: synth.ProbeTargetName(2), Offset: 5, OwnOffset: true}
	var want string
	for _, spec := range append([]RunSpec{{"none", 0}, {"all", sim.PresetAll.Set}}, AblationSpecs()...) {
		for _, via := range []doors.Via{doors.ViaKprobeEvents, doors.ViaPerfKprobe} {
			m, err := Boot(k, spec.Switches, 8, nil)
			if err != nil {
				t.Fatal(err)
			}
			x, err := Explain(m, target, doors.New(m).Door(via, true))
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			_, _ = x.Trail.WriteTo(&b)
			trail := b.String()
			if x.Code != 0 || x.State.String() != "optimized" {
				t.Fatalf("%s via %s: code %d state %s (%s)\n%s", spec.Name, via, x.Code, x.State, x.Why, trail)
			}
			first := strings.SplitN(trail, "\n", 2)[0]
			switch via {
			case doors.ViaKprobeEvents:
				if !strings.HasPrefix(first, "trace_kprobe_create(") || !strings.Contains(trail, "number_of_same_symbols") ||
					!strings.Contains(trail, "find_trace_kprobe") || !strings.Contains(trail, "  register_kprobe(") ||
					!strings.Contains(trail, "event_enable_write") {
					t.Fatalf("kprobe_events trail lacks the event layer or the nested core:\n%s", trail)
				}
			case doors.ViaPerfKprobe:
				if !strings.HasPrefix(first, "perf_event_open(") || strings.Contains(trail, "find_trace_kprobe") {
					t.Fatalf("perf trail:\n%s", trail)
				}
			}
			key := string(via) + "\n" + trail + x.State.String() + x.Why.String()
			if spec.Name == "none" && via == doors.ViaKprobeEvents {
				want = key
			} else if via == doors.ViaKprobeEvents && key != want {
				t.Fatalf("%s: trail differs from none:\n%s\nvs\n%s", spec.Name, key, want)
			}
		}
	}
}
