package alternative

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// CPU is the boot CPU the patcher assumes: boot_cpu_data.x86_capability as
// it stands when alternative_instructions runs (after identify_cpu,
// cpu_select_mitigations and paravirt_set_cap), and the return thunk the
// mitigation selection chose.
type CPU struct {
	Name        string // --cpu name, e.g. "sapphire-rapids"
	Description string // the part and how it boots (bare metal, default command line)
	Features    FeatureSet
	// ReturnThunk names x86_return_thunk after set_return_thunk:
	// "__x86_return_thunk" (the default), "retbleed_return_thunk",
	// "srso_return_thunk", "srso_alias_return_thunk" or "its_return_thunk".
	ReturnThunk string
	// Mitigations says in /sys/devices/system/cpu/vulnerabilities terms
	// what cpu_select_mitigations chose, which is why the synthetic bits
	// in Features are set.
	Mitigations []string
	// Why gives, per feature or bug name set, the reason it is set.
	Why []FeatureReason
	// Dropped lists the names of Why that the generation of Features
	// does not have (ForGen).
	Dropped []string

	// model is the generation whose cpufeatures.h numbers Features (nil:
	// 6.1); forGen, when set, rebuilds the CPU for another generation
	// (the host CPU: its mitigations depend on the generation).
	model  *Model
	forGen func(g image.Generation) (*CPU, error)
}

// Model returns the generation whose numbering Features uses.
func (c *CPU) Model() *Model {
	if c.model == nil {
		return model61
	}
	return c.model
}

// ForGen returns the CPU as generation g's kernel sees it: the same named
// bits numbered by g's cpufeatures.h (names g lacks are listed in
// Dropped), or, for a CPU built from a machine's flags (host), the
// mitigations g's cpu_select_mitigations picks. A CPU already in g's
// numbering is returned as is.
func (c *CPU) ForGen(g image.Generation) (*CPU, error) {
	m := ModelFor(g)
	if c.Model() == m {
		return c, nil
	}
	if c.forGen != nil {
		return c.forGen(m.Gen)
	}
	out := *c
	out.model = m
	out.Features = FeatureSet{}
	out.Dropped = nil
	for _, b := range c.Why {
		f, ok := m.FeatureByName(b.Name)
		if !ok {
			out.Dropped = append(out.Dropped, b.Name)
			continue
		}
		out.Features.Set(f)
	}
	return &out, nil
}

// FeatureReason documents one bit of a CPU's set.
type FeatureReason struct {
	Name string // X86_FEATURE_* / X86_BUG_*
	Why  string
}

// Has is boot_cpu_has(f).
func (c *CPU) Has(f Feature) bool { return c.Features.Has(f) }

// WantsRethunk is cpu_wants_rethunk: X86_FEATURE_RETHUNK, in the
// numbering of the CPU's Model.
//
// Models arch/x86/kernel/alternative.c:cpu_wants_rethunk.
func (c *CPU) WantsRethunk() bool { return c.Has(c.Model().bits.RETHUNK) }

// SpectreV2Mode names what apply_retpolines does on this CPU:
// "retpoline" (sites kept), "call-depth" (retpoline with call depth
// tracking: calls to the __x86_indirect_call_thunk_array entry, 6.12+),
// "lfence" (lfence; call *%reg) or "indirect" (call *%reg:
// eIBRS/IBRS/off).
func (c *CPU) SpectreV2Mode() string {
	b := &c.Model().bits
	switch {
	case c.Has(b.RETPOLINE_LFENCE):
		return "lfence"
	case c.Has(b.RETPOLINE) && c.Has(b.CALL_DEPTH):
		return "call-depth"
	case c.Has(b.RETPOLINE):
		return "retpoline"
	}
	return "indirect"
}

// Summary is one line naming the CPU and its patching modes, for image
// notes and report headers.
func (c *CPU) Summary() string {
	ret := "ret"
	if c.WantsRethunk() {
		ret = "jmp " + c.ReturnThunk
	}
	return fmt.Sprintf("%s (%s): retpolines %s, returns %s, %d feature/bug bits", c.Name, c.Description, c.SpectreV2Mode(), ret, len(c.Features.List()))
}

// newCPU builds a CPU from documented bits; an unknown name is a
// programming error caught by the tests (TestCPUsKnownBits).
func newCPU(name, desc, thunk string, mit []string, bits []FeatureReason) *CPU {
	c := &CPU{Name: name, Description: desc, ReturnThunk: thunk, Mitigations: mit, Why: bits}
	for _, b := range bits {
		f, ok := FeatureByName(b.Name)
		if !ok {
			panic("alternative: unknown feature " + b.Name + " in CPU " + name)
		}
		c.Features.Set(f)
	}
	return c
}

// CPUNone is the --cpu value for "no boot patching": the text as built.
const CPUNone = "none"

// DefaultCPU is the CPU the loaders and the CLI assume unless told.
const DefaultCPU = "sapphire-rapids"

var cpus = map[string]func() *CPU{
	"sapphire-rapids": sapphireRapids,
	"genoa":           genoa,
	"milan":           milan,
}

// CPUNames lists the named CPUs, sorted.
func CPUNames() []string {
	out := make([]string, 0, len(cpus))
	for n := range cpus {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CPUHost is the --cpu value for this machine's CPU, built from
// /proc/cpuinfo (HostCPU).
const CPUHost = "host"

// LookupCPU returns a fresh copy of the named CPU, or of this machine's
// (CPUHost).
func LookupCPU(name string) (*CPU, error) {
	if f, ok := cpus[name]; ok {
		return f(), nil
	}
	if name == CPUHost {
		return HostCPU()
	}
	return nil, fmt.Errorf("unknown CPU %q (known: %s, %s for this machine's CPU, or %s for the text as built)", name, strings.Join(CPUNames(), ", "), CPUHost, CPUNone)
}
