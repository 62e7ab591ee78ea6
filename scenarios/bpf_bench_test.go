package scenarios

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

func benchRuns(b *testing.B, specs ...string) []RunSpec {
	var out []RunSpec
	for _, s := range specs {
		ss, err := sim.ParseSwitches(s)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, RunSpec{Name: ss.Name(), Switches: ss})
	}
	return out
}

// BenchmarkRunMultiDebian: `kpsim run multi --kernel <Debian> --kconfig
// FPROBE=y --patches none`, one kprobe.multi link (syms form) over every
// traceable function, image already loaded (boot of the run's kernel,
// target selection and the attach are timed).
func BenchmarkRunMultiDebian(b *testing.B) {
	k := realKernel(b)
	o := SessionOptions{BPF: DefaultBPFOptions(), Runs: benchRuns(b, "none")}
	o.BPF.Kconfig = map[string]bool{"FPROBE": true}
	if _, err := machine.KallsymsTables(k); err != nil { // built once per image, as the CLI's process does
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := RunMulti(k, o, sim.DefaultCosts())
		if err != nil {
			b.Fatal(err)
		}
		if rep.Runs[0].OK != 1 {
			b.Fatalf("attach failed: %v", rep.Runs[0].Errors)
		}
	}
}

// BenchmarkRunSession: the default session runs (none, libbpf-exact-syms,
// libbpf-exact-syms,ftrace-single-lookup) with 50 programs on the default
// synthetic image.
func BenchmarkRunSession(b *testing.B) {
	k, _, err := synth.Generate(synth.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	k.Config.Gen = image.Gen612 // kprobe.session exists from 6.12 (the BPF paths follow the image)
	benchSession(b, k)
}

// BenchmarkRunSessionDebian: the same on the Debian kernel with the
// FPROBE override.
func BenchmarkRunSessionDebian(b *testing.B) { benchSession(b, realKernel(b)) }

func benchSession(b *testing.B, k *image.Kernel) {
	o := SessionOptions{BPF: DefaultBPFOptions(), Programs: 50,
		Runs: benchRuns(b, "none", "libbpf-exact-syms", "libbpf-exact-syms,ftrace-single-lookup")}
	o.BPF.Kconfig = map[string]bool{"FPROBE": true}
	if _, err := machine.KallsymsTables(k); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := RunSession(k, o, sim.DefaultCosts()); err != nil {
			b.Fatal(err)
		}
	}
}
