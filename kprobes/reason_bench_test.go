package kprobes_test

import (
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

// BenchmarkRegisterTrail: one register_kprobe (optimized) plus its
// unregistration on the reason test image, with the decision trail off
// and on: the simulator's price of the trail (the counts are the same,
// TestTrailChangesNoCount).
func BenchmarkRegisterTrail(b *testing.B) {
	k := testImage(b)
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			f, _ := sim.ParseFaults("")
			kp := bootB(b, k, f)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if on {
					kp.Trail = &kprobes.Trail{}
				}
				p := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(0)}
				if err := kp.RegisterKprobe(p); err != nil {
					b.Fatal(err)
				}
				kp.Drain()
				kp.UnregisterKprobes([]*kprobes.Kprobe{p})
				kp.Drain()
			}
		})
	}
}
