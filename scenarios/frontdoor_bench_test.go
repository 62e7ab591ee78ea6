package scenarios

import (
	"os"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
)

var (
	benchKernelOnce sync.Once
	benchKernel     *image.Kernel
	benchKernelErr  error
)

// debianKernel loads the pinned Debian kernel once per benchmark binary.
func debianKernel(b *testing.B) *image.Kernel {
	const p = "../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(p); err != nil {
		b.Skip("no real kernel: run `make real-kernel` to enable")
	}
	benchKernelOnce.Do(func() {
		benchKernel, benchKernelErr = load.Open(p) // booted for the default CPU
	})
	if benchKernelErr != nil {
		b.Fatal(benchKernelErr)
	}
	return benchKernel
}

// benchEvents: every traceable function of the Debian kernel (one line
// per ftrace record, as available_filter_functions lists them), written to
// kprobe_events one line per write at +5 (past the __fentry__ call, so the
// int3 and optprobe paths run), each event enabled, then disabled and
// deleted: the whole tracefs session.
func benchEvents(b *testing.B, sw sim.Switches) {
	k := debianKernel(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := DefaultManyOptions()
		o.Targets, o.Via, o.Enable, o.LinesPerWrite = TargetsTraceable, doors.ViaKprobeEvents, doors.EnableEach, 1
		o.Placement, o.Offset = PlaceOffset, 5
		s := mustPrepareFor(b, k, o)
		rep, err := RunMany(s, []RunSpec{{sw.Name(), sw}}, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			b.Fatal(err)
		}
		r := rep.Runs[0]
		b.ReportMetric(float64(len(s.Targets)), "targets")
		b.ReportMetric(float64(r.Registered), "registered")
		b.ReportMetric(float64(r.TotalOps), "kernel-ops")
		b.ReportMetric(float64(r.RetainedBytes)/(1<<20), "retained-MiB")
	}
}

func BenchmarkKprobeEventsDebianNone(b *testing.B)   { benchEvents(b, 0) }
func BenchmarkKprobeEventsDebianSeries(b *testing.B) { benchEvents(b, sim.PresetSeries.Set) }
