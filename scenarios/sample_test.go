package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestSampleAddsItsFixedCount: the sample adds its 50,000 functions
// whatever --n is, and the run probes the first N; asking for more probes
// than the sample holds grows it to N.
func TestSampleAddsItsFixedCount(t *testing.T) {
	for _, tc := range []struct{ sample, n, want int }{{50000, 100, 50000}, {50, 120, 120}} {
		o := testManyOptions()
		o.Image = smallImage(3)
		o.Image.SampleFunctions, o.N = tc.sample, tc.n
		s := mustSetup(t, o)
		if len(s.Kernel.SymbolsByName(synth.ProbeTargetName(tc.want-1))) != 1 || len(s.Kernel.SymbolsByName(synth.ProbeTargetName(tc.want))) != 0 {
			t.Errorf("sample %d, n %d: the image does not hold exactly %d targets", tc.sample, tc.n, tc.want)
		}
		if len(s.Targets) != tc.n || s.Targets[tc.n-1].Symbol != synth.ProbeTargetName(tc.n-1) {
			t.Errorf("sample %d, n %d: %d probes", tc.sample, tc.n, len(s.Targets))
		}
	}
}

// TestOptimizerDecodesOncePerProbe: text_poke_bp's text_poke_loc_init
// decodes the JMP32 once per optimized probe, and nothing else in the
// optimizer decodes.
func TestOptimizerDecodesOncePerProbe(t *testing.T) {
	o := testManyOptions()
	o.Image = smallImage(4)
	o.Image.SampleFunctions, o.N = 300, 300
	rep, err := RunMany(mustSetup(t, o), []RunSpec{{"none", 0}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.Optimized == 0 {
		t.Fatal("nothing optimized")
	}
	for _, ph := range r.Phases {
		if ph.Name == "optimizer" {
			if got := ph.Counts[x86.OpDecode.Name()]; got != uint64(r.Optimized) {
				t.Fatalf("optimizer phase: %d decodes for %d optimized probes", got, r.Optimized)
			}
			return
		}
	}
	t.Fatal("no optimizer phase")
}

// TestCanOptimizeWalksThePadding: can_optimize decodes each target to the
// next symbol, its gas padding included (one exception-table search per
// instruction), then copy_optimized_instructions copies the instructions
// covering the JMP32 (one more search each). The walk length is what the
// text holds: 8 instructions and 2 NOPs for the default (returns patched,
// untraced) target, where int3 padding would be 12 more.
func TestCanOptimizeWalksThePadding(t *testing.T) {
	o := testManyOptions()
	o.Image = smallImage(5)
	o.Image.SampleFunctions, o.N = 400, 200
	s := mustSetup(t, o)
	k := s.Kernel
	want := uint64(0)
	for i := 0; i < o.N; i++ {
		a := k.SymbolsByName(synth.ProbeTargetName(i))[0].Addr
		next := k.SymbolsByName(synth.ProbeTargetName(i + 1))[0].Addr
		code := k.Text(a, int(next-a))
		walk, copied := 0, 0
		for off := 0; off < len(code); walk++ {
			in, err := x86.Decode(nil, code[off:])
			if err != nil {
				t.Fatal(err)
			}
			if off < x86.JMP32InsnSize {
				copied++
			}
			off += in.Len
		}
		if i == 0 && walk != 10 {
			t.Fatalf("target 0 holds %d instructions to the next symbol, want 8 + 2 NOPs", walk)
		}
		want += uint64(walk + copied)
	}
	rep, err := RunMany(s, []RunSpec{{"none", 0}}, machine.Wire, sim.DefaultCosts(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if r.Optimized != o.N {
		t.Fatalf("%d of %d optimized", r.Optimized, o.N)
	}
	for _, ph := range r.Phases {
		if ph.Name == "optimize" {
			if got := ph.Counts["extable.search"]; got != want {
				t.Fatalf("optimize phase: %d exception-table searches, the text holds %d walk + copy instructions", got, want)
			}
			return
		}
	}
	t.Fatal("no optimize phase")
}
