package alternative

import (
	"fmt"
	"sort"
	"strings"
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
}

// FeatureReason documents one bit of a CPU's set.
type FeatureReason struct {
	Name string // X86_FEATURE_* / X86_BUG_*
	Why  string
}

// Has is boot_cpu_has(f).
func (c *CPU) Has(f Feature) bool { return c.Features.Has(f) }

// WantsRethunk is cpu_wants_rethunk: X86_FEATURE_RETHUNK.
func (c *CPU) WantsRethunk() bool { return c.Has(X86_FEATURE_RETHUNK) }

// SpectreV2Mode names what apply_retpolines does on this CPU:
// "retpoline" (sites kept), "lfence" (lfence; call *%reg) or "indirect"
// (call *%reg: eIBRS/IBRS/off).
func (c *CPU) SpectreV2Mode() string {
	switch {
	case c.Has(X86_FEATURE_RETPOLINE_LFENCE):
		return "lfence"
	case c.Has(X86_FEATURE_RETPOLINE):
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

// LookupCPU returns a fresh copy of the named CPU.
func LookupCPU(name string) (*CPU, error) {
	if f, ok := cpus[name]; ok {
		return f(), nil
	}
	return nil, fmt.Errorf("unknown CPU %q (known: %s, or %s for the text as built)", name, strings.Join(CPUNames(), ", "), CPUNone)
}
