package load

import (
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// TestGenerationsBzImage: the shipped 6.12 and 7.3 bzImages load as
// shipped, booted for the default CPU and for this machine's (host); their
// tables and symbols equal the -dbg vmlinux's (whose counts
// elfload's TestGenerationsTablesMatchReadelf checks against binutils),
// their functions exclude the padding symbols, and the build facts come
// from the config beside the image.
func TestGenerationsBzImage(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses and boots two real kernels three times each")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			p := realkernel.FindDbg(t, g)
			dbg, err := OpenWith(p.Vmlinux, Options{CPU: alternative.CPUNone, NoCache: true})
			if err != nil {
				t.Fatal(err)
			}
			counts := func(k *image.Kernel) [7]int {
				return [7]int{len(k.JumpEntries), len(k.StaticCallSites), len(k.BugEntries), len(k.ExTable), len(k.Blacklist), len(k.McountLocs), len(k.Regions)}
			}
			for _, cpu := range []string{alternative.DefaultCPU, "host"} {
				r, err := OpenWith(p.Vmlinuz, Options{CPU: cpu, NoCache: true})
				if err != nil {
					t.Fatalf("--cpu %s: %v", cpu, err)
				}
				k := r.Kernel
				if k.Config.Gen != g || k.Config.Version != p.Release || k.Config.CPU != cpu {
					t.Errorf("--cpu %s: generation %s release %q cpu %q", cpu, k.Config.Gen, k.Config.Version, k.Config.CPU)
				}
				if got, want := counts(k), counts(dbg.Kernel); got != want {
					t.Errorf("--cpu %s: tables (jump, static call, bug, extable, blacklist, mcount, regions) %v, the -dbg vmlinux %v", cpu, got, want)
				}
				if !k.Config.IBT || !k.Config.CallPadding || k.Config.FunctionAlignment != 16 {
					t.Errorf("--cpu %s: ibt=%v call_padding=%v alignment=%d", cpu, k.Config.IBT, k.Config.CallPadding, k.Config.FunctionAlignment)
				}
				for _, f := range k.Config.Facts {
					if f.Option == "CONFIG_X86_KERNEL_IBT" && f.From != "config file "+p.Config {
						t.Errorf("IBT from %q, want the config file beside the image", f.From)
					}
				}
				pad := 0
				for _, s := range k.Symbols {
					if s.IsPadding() {
						pad++
					}
				}
				fn := k.Functions()
				for _, s := range fn {
					if s.IsPadding() {
						t.Fatalf("Functions() lists %s", s.Name)
					}
				}
				t.Logf("%s --cpu %s: %d symbols, %d functions, %d padding symbols; tables %v", g, cpu, len(k.Symbols), len(fn), pad, counts(k))
			}
		})
	}
}
