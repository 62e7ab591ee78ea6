package alternative_test

import (
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// BenchmarkLoadDebian: loading the decompressed Debian vmlinux as built
// and booted for each named CPU; the difference is the cost of
// alternative_instructions (and of the private copy the ELF path makes).
func BenchmarkLoadDebian(b *testing.B) {
	_, vmELF := realkernel.Vmlinux(b) // skip without the kernel
	for _, cpu := range append([]string{alternative.CPUNone}, alternative.CPUNames()...) {
		b.Run(cpu, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := load.BytesWith("vmlinux", vmELF, load.Options{CPU: cpu, NoCache: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
