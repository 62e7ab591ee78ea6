package elfload

import (
	"os"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// dbgVmlinux reads generation g's -dbg vmlinux once per test binary.
var dbgVmlinux = struct {
	sync.Mutex
	data map[image.Generation][]byte
}{data: map[image.Generation][]byte{}}

func readDbg(t testing.TB, g image.Generation) (string, []byte) {
	p := realkernel.FindDbg(t, g)
	dbgVmlinux.Lock()
	defer dbgVmlinux.Unlock()
	if b, ok := dbgVmlinux.data[g]; ok {
		return p.Vmlinux, b
	}
	b, err := os.ReadFile(p.Vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	dbgVmlinux.data[g] = b
	return p.Vmlinux, b
}

// bootCPUs are the CPUs every generation is booted for: the presets and,
// where /proc/cpuinfo exists, this machine's.
func bootCPUs(t testing.TB) []string {
	names := alternative.CPUNames()
	if _, err := os.Stat(alternative.CPUInfoPath); err == nil {
		names = append(names, alternative.CPUHost)
	}
	return names
}

// TestBootGenerations: the 6.12 and 7.3 -dbg vmlinux boot for every CPU;
// the statistics are logged and checked for the shape each CPU implies.
func TestBootGenerations(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			name, data := readDbg(t, g)
			if _, err := Load(name, data); err != nil {
				t.Fatalf("the %s image does not load as built: %v", g, err)
			}
			for _, cn := range bootCPUs(t) {
				t.Run(cn, func(t *testing.T) {
					cpu, err := alternative.LookupCPU(cn)
					if err != nil {
						t.Fatal(err)
					}
					k, bt, err := LoadWith(name, data, Options{CPU: cpu})
					if err != nil {
						t.Fatal(err)
					}
					if k.Config.Gen != g || bt.Model.Gen != g {
						t.Fatalf("generation %v, model %v", k.Config.Gen, bt.Model.Gen)
					}
					for _, n := range k.Notes {
						t.Log(n)
					}
					s := &bt.Stats
					if s.Retpolines.Skipped+s.Returns.Skipped+s.Alternatives.Undecodable+s.Seal.NotEndbr > 0 || s.Seal.Poisoned == 0 || s.Alternatives.DirectCall == 0 {
						t.Errorf("implausible boot: %+v", s)
					}
					if k.Config.CPU != cn || bt.CPU.Model() != bt.Model {
						t.Errorf("CPU %q numbered for %v", k.Config.CPU, bt.CPU.Model().Gen)
					}
				})
			}
		})
	}
}
