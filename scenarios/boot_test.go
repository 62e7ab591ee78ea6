package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// pvCall reports whether the instruction at addr is "call *disp32(%rip)"
// through a pv_ops slot: the as-built paravirt site prepare_emulation
// refuses with EOPNOTSUPP.
func pvCall(k *image.Kernel, pv uint64, addr uint64) bool {
	in, err := x86.DecodeKernel(nil, k.Text(addr, 15))
	if err != nil || in.Opcode[0] != 0xff || !in.RIPRelative() || in.ModRMReg() != 2 {
		return false
	}
	d := addr + uint64(in.Len) + uint64(int64(in.Disp))
	return d >= pv && d < pv+8*uint64(len(k.PVOps))
}

// TestRealKernelParavirtNotRefused: on the Debian kernel, probes at every
// .parainstructions site and at the entry of every function holding one.
// As built, the sites are "call *pv_ops+off(%rip)" and prepare_emulation
// refuses them with EOPNOTSUPP; booted for each named CPU, no probe is
// refused with EOPNOTSUPP.
func TestRealKernelParavirtNotRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("boots and probes the real kernel")
	}
	path := os.Getenv("KPSIM_KERNEL")
	if path == "" {
		path, _ = filepath.Abs("../.cache/kernels/vmlinuz-6.1.0-57-amd64")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skip("no real kernel: run `make real-kernel` (or set KPSIM_KERNEL) to enable")
	}
	vmlinux, _, err := bzimage.Decompress(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	booted := map[string]*load.Result{}
	for _, cpu := range append([]string{alternative.CPUNone}, alternative.CPUNames()...) {
		r, err := load.BytesWith(path, vmlinux, load.Options{CPU: cpu, NoCache: true}) // Booted: a cache hit has none
		if err != nil {
			t.Fatal(err)
		}
		booted[cpu] = r
	}
	def := booted[alternative.DefaultCPU]
	var probes []Target
	seen := map[uint64]bool{}
	for _, s := range def.Booted.Tables.Para {
		probes = append(probes, Target{Addr: s.Instr, Raw: fmt.Sprintf("%#x", s.Instr), Source: "pv site"})
		if f := def.Kernel.LookupFunction(s.Instr); f != nil && !seen[f.Addr] {
			seen[f.Addr] = true
			probes = append(probes, Target{Addr: f.Addr, Raw: fmt.Sprintf("%#x", f.Addr), Source: "pv function"})
		}
	}
	run := func(cpu string) (*image.Kernel, *RunResult) {
		k := booted[cpu].Kernel
		o := testManyOptions()
		o.Targets, o.ByAddress, o.Via = TargetsAllFunctions, true, doors.ViaRegisterKprobe // one by one, by address
		s := &ManySetup{Opts: o, Kernel: k, Targets: probes}
		s.Opts.N = len(probes)
		rep, err := RunMany(s, []RunSpec{{"none", 0}}, machine.Wire, sim.DefaultCosts(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return k, rep.Runs[0]
	}

	k, r := run(alternative.CPUNone)
	pv := def.Kernel.SymbolsByName("pv_ops")[0].Addr
	k.PVOps = def.Kernel.PVOps // the as-built image does not read pv_ops
	refused := 0
	for _, p := range r.Results {
		if p.Code != int(errno.EOPNOTSUPP) {
			continue
		}
		refused++
		if !pvCall(k, pv, p.Addr) {
			t.Errorf("as built: EOPNOTSUPP at %#x, not a pv call: % x", p.Addr, k.Text(p.Addr, 6))
		}
	}
	t.Logf("as built: %d probes (%d pv sites, %d function entries): registered %d, rejected %v", len(probes), len(def.Booted.Tables.Para), len(seen), r.Registered, r.Rejected)
	if refused == 0 {
		t.Fatal("as built: no probe refused with EOPNOTSUPP; the test would not see an unpatched pv call")
	}
	for _, cpu := range alternative.CPUNames() {
		_, r := run(cpu)
		t.Logf("%s: registered %d, optimized %d, rejected %v", cpu, r.Registered, r.Optimized, r.Rejected)
		if n := r.Rejected["EOPNOTSUPP"]; n != 0 {
			t.Errorf("%s: %d probes refused with EOPNOTSUPP", cpu, n)
		}
	}
}
