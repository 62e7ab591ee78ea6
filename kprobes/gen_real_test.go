package kprobes

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestRealKernelCanProbeExceptionInsn: on the shipped 6.12 and 7.3
// bzImages, a probe on an int3 (the straight-line-speculation int3 after
// a ret or jmp) at an instruction boundary is refused by can_probe with
// -EILSEQ; the same image read with 6.1's kprobes refuses it later, in
// __copy_instruction, with -EINVAL. Skips without the kernels (a load
// takes about a second).
func TestRealKernelCanProbeExceptionInsn(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			p := realkernel.Find(t, g)
			k, err := load.Open(p.Vmlinuz)
			if err != nil {
				t.Fatal(err)
			}
			if k.Config.Gen != g {
				t.Fatalf("image generation %s, want %s", k.Config.Gen, g)
			}
			dec := x86.For(g)
			syms := kallsyms.NewSorted(k)
			var at uint64
		find:
			for _, f := range k.Functions() {
				if f.Module != "" || f.Size < 8 {
					continue
				}
				for off := uint64(0); off < f.Size; {
					in, err := dec.Decode(nil, k.Text(f.Addr+off, x86.MaxInsnSize))
					if err != nil {
						break
					}
					if off > 0 && in.Opcode[0] == x86.INT3InsnOpcode {
						at = f.Addr + off
						break find
					}
					off += uint64(in.Len)
				}
			}
			if at == 0 {
				t.Skip("no int3 inside a function")
			}
			register := func(gen image.Generation) (Reason, error) {
				saved := k.Config.Gen
				k.Config.Gen = gen
				kp, err := New(Deps{Image: k, Syms: syms}, DefaultConfig(), 0, sim.NewCounters(false))
				k.Config.Gen = saved
				if err != nil {
					t.Fatal(err)
				}
				q := &Kprobe{Addr: at}
				err = kp.RegisterKprobe(q)
				return q.Why(), err
			}
			whyG, errG := register(g)
			why61, err61 := register(image.Gen61)
			if errG != EILSEQ || err61 != EINVAL {
				t.Errorf("int3 at %#x: %s %v (%s), 6.1 %v (%s); want -EILSEQ and -EINVAL", at, g, errG, whyG, err61, why61)
			}
			t.Logf("int3 at %#x: %s: %s; 6.1: %s", at, g, whyG, why61)
		})
	}
}
