package jumplabel

import (
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// benchAddrs: function entries spread over the default image's core text.
func benchAddrs(b *testing.B) []uint64 {
	k := defaultImage(b)
	fs := k.Functions()
	var out []uint64
	for i := 0; i < len(fs); i += len(fs) / 64 {
		out = append(out, fs[i].Addr)
	}
	return out
}

func benchCheck(b *testing.B, sw sim.Switches) {
	k := defaultImage(b)
	addrs := benchAddrs(b)
	st := boot.Running
	t := newForm(b, k, resvtest.Form{Switches: sw, Late: true}, &st)
	for _, a := range addrs { // warm the simulator's size cache
		t.TextReserved(nil, a, a)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := addrs[i%len(addrs)]
		if _, err := t.TextReserved(nil, a, a); err != nil {
			b.Fatal(err)
		}
	}
}

// One jump_label_text_reserved check on the default image, per form.
func BenchmarkTextReservedLinear(b *testing.B) { benchCheck(b, 0) }
func BenchmarkTextReservedLinearOpcode(b *testing.B) {
	benchCheck(b, sim.Switches(0).With(sim.JumpSizeOpcode))
}
func BenchmarkTextReservedIndexed(b *testing.B) {
	benchCheck(b, sim.Switches(0).With(sim.JumpLabelIndex))
}

// Modelled cycles of one check (counts × weights), reported beside the
// simulator's own time: linear vs indexed on the default image.
func BenchmarkTextReservedModelCycles(b *testing.B) {
	k := defaultImage(b)
	addrs := benchAddrs(b)
	costs := sim.DefaultCosts()
	for _, sw := range []sim.Switches{0, sim.Switches(0).With(sim.JumpLabelIndex), sim.Switches(0).With(sim.JumpLabelIndex).With(sim.JumpSizeOpcode)} {
		b.Run(sw.Name(), func(b *testing.B) {
			st := boot.Running
			t := newForm(b, k, resvtest.Form{Switches: sw, Late: true}, &st)
			c := sim.NewCounters(false)
			for i := 0; i < b.N; i++ {
				a := addrs[i%len(addrs)]
				t.TextReserved(c, a, a)
			}
			b.ReportMetric(costs.Cycles(c)/float64(b.N), "model-cycles/check")
		})
	}
}

// Building the P2 index at late init.
func BenchmarkLateInitIndex(b *testing.B) {
	k := defaultImage(b)
	for i := 0; i < b.N; i++ {
		t, _ := New(k, sim.Switches(0).With(sim.JumpLabelIndex), nil, nil)
		if err := t.LateInit(nil); err != nil {
			b.Fatal(err)
		}
	}
}
