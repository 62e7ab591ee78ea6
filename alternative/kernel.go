package alternative

import (
	"fmt"

	"github.com/kpsim/kpsim/image"
)

// EnvSymbols are the vmlinux symbols an Env is built from.
var EnvSymbols = []string{
	"_paravirt_nop", "paravirt_BUG", "__x86_indirect_thunk_array",
	"__x86_indirect_its_thunk_array", "__x86_return_thunk", "its_return_thunk",
	"__static_call_return",
}

// NewEnv builds the Env for cpu from a symbol lookup (first address of a
// name) and the pv_ops slots. __x86_return_thunk and, with CONFIG_PARAVIRT,
// _paravirt_nop are required; x86_return_thunk is the symbol cpu names.
func NewEnv(lookup func(string) (uint64, bool), pvops []uint64, cpu *CPU) (*Env, error) {
	e := &Env{PVOps: pvops}
	need := func(name string) (uint64, error) {
		a, ok := lookup(name)
		if !ok {
			return 0, fmt.Errorf("no %s symbol", name)
		}
		return a, nil
	}
	var err error
	if e.ReturnThunk, err = need("__x86_return_thunk"); err != nil {
		return nil, err
	}
	if len(pvops) > 0 {
		if e.ParavirtNop, err = need("_paravirt_nop"); err != nil {
			return nil, err
		}
		if e.ParavirtBUG, err = need("paravirt_BUG"); err != nil {
			return nil, err
		}
	}
	e.IndirectThunkArray, _ = lookup("__x86_indirect_thunk_array")
	e.ITSThunkArray, _ = lookup("__x86_indirect_its_thunk_array")
	e.ITSReturnThunk, _ = lookup("its_return_thunk")
	e.StaticCallReturn, _ = lookup("__static_call_return")
	e.XReturnThunk = e.ReturnThunk
	if cpu != nil && cpu.ReturnThunk != "" {
		if e.XReturnThunk, err = need(cpu.ReturnThunk); err != nil {
			return nil, fmt.Errorf("CPU %s returns through %s: %w", cpu.Name, cpu.ReturnThunk, err)
		}
	}
	return e, nil
}

// KernelEnv builds the Env of a loaded vmlinux image for module
// patching: its symbols, its PVOps and the CPU it was booted for
// (k.Config.CPU).
func KernelEnv(k *image.Kernel) (*Env, *CPU, error) {
	if k.Config.CPU == "" || k.Config.CPU == CPUNone {
		return nil, nil, fmt.Errorf("image %s was not boot-patched for a CPU", k.Name)
	}
	cpu, err := LookupCPU(k.Config.CPU)
	if err != nil {
		return nil, nil, err
	}
	m := ModelFor(k.Config.Gen)
	if cpu, err = cpu.ForGen(m.Gen); err != nil {
		return nil, nil, err
	}
	idx := make(map[string]uint64, len(EnvSymbols)+1)
	want := map[string]bool{cpu.ReturnThunk: true}
	for _, n := range EnvSymbols {
		want[n] = true
	}
	if !m.Paravirt {
		for _, n := range append(append(EnvSymbols612, callThunkSkip...), m.kexecSkip.symbols()...) {
			want[n] = true
		}
	}
	for _, s := range k.Symbols {
		if _, seen := idx[s.Name]; !seen && want[s.Name] {
			idx[s.Name] = s.Addr
		}
	}
	env, err := m.NewEnv(func(n string) (uint64, bool) { a, ok := idx[n]; return a, ok }, k.PVOps, KernelMemory{k}, cpu)
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: %w", k.Name, err)
	}
	return env, cpu, nil
}

// KernelMemory is the Memory of an image's text regions (vmlinux and
// module text), as image.Kernel.Text reads them.
type KernelMemory struct{ K *image.Kernel }

// Text implements Memory.
func (m KernelMemory) Text(addr uint64, n int) []byte { return m.K.Text(addr, n) }
