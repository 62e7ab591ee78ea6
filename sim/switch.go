package sim

import (
	"fmt"
	"sort"
	"strings"
)

// Switch is one proposed change that a run may turn on. With every switch
// off kpsim models upstream ("linear" mode).
type Switch uint8

// The switches. P1–P12 are the patches of the kprobes lookup-cost series
// (shared/reference/kprobes.md §3); BugIndex and BlacklistIndex go beyond it.
const (
	StaticCallIndex      Switch = iota // P1
	JumpLabelIndex                     // P2
	JumpSizeOpcode                     // P3
	KprobeTree                         // P4 (with the P5/P6 iterators)
	IterGetOptimized                   // P7
	IterRecoverOptprobed               // P8
	IterCheckOptimized                 // P9
	IterCanOptimize                    // P10
	IterCanProbe                       // P11
	IterCopyOptimized                  // P12
	BugIndex                           // beyond the series
	BlacklistIndex                     // beyond the series
	KallsymsOffsetIndex                // kallsyms series: 3-byte kallsyms_names_offsets
	KallsymsTokenCmp                   // kallsyms series: on-the-fly compressed compare
	ModuleBugIndex                     // beyond the series
	numSwitches
)

// SwitchInfo describes a switch.
type SwitchInfo struct {
	Name     string
	Patch    string // "P1".."P12", or "" beyond the series
	Requires []Switch
	Doc      string
}

var switchInfo = [numSwitches]SwitchInfo{
	StaticCallIndex:      {"static-call-index", "P1", nil, "static_call_text_reserved: late-init index of core sites by address, binary search"},
	JumpLabelIndex:       {"jump-label-index", "P2", nil, "jump_label_text_reserved: late-init index of core entries by code address, binary search"},
	JumpSizeOpcode:       {"jump-size-opcode", "P3", nil, "arch_jump_entry_size: size from the opcode / NOP bytes instead of decoding"},
	KprobeTree:           {"kprobe-tree", "P4", nil, "address-ordered tree of registered probes beside the hash table (P4-P6)"},
	IterGetOptimized:     {"iter-get-optimized", "P7", []Switch{KprobeTree}, "get_optimized_kprobe: one range query instead of 18 get_kprobe"},
	IterRecoverOptprobed: {"iter-recover-optprobed", "P8", []Switch{KprobeTree}, "__recover_optprobed_insn: look-back window from the address iterator"},
	IterCheckOptimized:   {"iter-check-optimized", "P9", []Switch{KprobeTree}, "arch_check_optimized_kprobe: one range query instead of size-1 get_kprobe"},
	IterCanOptimize:      {"iter-can-optimize", "P10", []Switch{KprobeTree}, "can_optimize: address iterator over the whole-function walk"},
	IterCanProbe:         {"iter-can-probe", "P11", []Switch{KprobeTree}, "can_probe: address iterator over the walk to the probe"},
	IterCopyOptimized:    {"iter-copy-optimized", "P12", []Switch{KprobeTree}, "copy_optimized_instructions: address iterator over the copied instructions"},
	BugIndex:             {"bug-index", "", nil, "find_bug: address index of the core bug table (beyond the series)"},
	BlacklistIndex:       {"blacklist-index", "", nil, "within_kprobe_blacklist: address index instead of the list walk (beyond the series)"},
	KallsymsOffsetIndex:  {"kallsyms-offset-index", "", nil, "kallsyms: 3-byte kallsyms_names_offsets index instead of marker walks (the kallsyms series)"},
	KallsymsTokenCmp:     {"kallsyms-token-cmp", "", nil, "kallsyms: compare names on the fly from the compressed tokens (the kallsyms series)"},
	ModuleBugIndex:       {"module-bug-index", "", nil, "module_find_bug: per-module address index of each module's bug table, built at module load (beyond the series)"},
}

// Info returns the switch's description.
func (s Switch) Info() SwitchInfo { return switchInfo[s] }

// String returns the switch's name.
func (s Switch) String() string { return switchInfo[s].Name }

// AllSwitches lists every switch in order.
func AllSwitches() []Switch {
	out := make([]Switch, numSwitches)
	for i := range out {
		out[i] = Switch(i)
	}
	return out
}

// Switches is a set of switches.
type Switches uint32

// Has reports whether s is in the set.
func (ss Switches) Has(s Switch) bool { return ss&(1<<s) != 0 }

// With returns the set plus s.
func (ss Switches) With(s Switch) Switches { return ss | 1<<s }

// Without returns the set minus s.
func (ss Switches) Without(s Switch) Switches { return ss &^ (1 << s) }

// List returns the members in order.
func (ss Switches) List() []Switch {
	var out []Switch
	for s := Switch(0); s < numSwitches; s++ {
		if ss.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

// Names returns the members' names in order.
func (ss Switches) Names() []string {
	out := []string{}
	for _, s := range ss.List() {
		out = append(out, s.String())
	}
	return out
}

// Preset is a named set of switches.
type Preset struct {
	Name string
	Set  Switches
	Doc  string
}

func setOf(ss ...Switch) Switches {
	var out Switches
	for _, s := range ss {
		out = out.With(s)
	}
	return out
}

// The presets.
var (
	PresetNone   = Preset{"none", 0, "upstream: every lookup linear"}
	PresetSeries = Preset{"series", setOf(StaticCallIndex, JumpLabelIndex, JumpSizeOpcode, KprobeTree,
		IterGetOptimized, IterRecoverOptprobed, IterCheckOptimized, IterCanOptimize, IterCanProbe, IterCopyOptimized),
		"the kprobes lookup-cost series, P1-P12"}
	PresetAll = Preset{"all", (1 << numSwitches) - 1, "the series plus every change beyond it"}
)

// Presets lists the presets.
func Presets() []Preset { return []Preset{PresetNone, PresetSeries, PresetAll} }

// LookupSwitch finds a switch by name.
func LookupSwitch(name string) (Switch, bool) {
	for s := Switch(0); s < numSwitches; s++ {
		if switchInfo[s].Name == name {
			return s, true
		}
	}
	return 0, false
}

// ParseSwitches parses a preset name or a comma-separated list of switch
// names and presets ("series,bug-index"). The result is validated: an
// iterator switch without kprobe-tree is an error, never silently fixed.
func ParseSwitches(spec string) (Switches, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return 0, fmt.Errorf("empty patch list (use a preset: none, series, all)")
	}
	var ss Switches
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if p, ok := lookupPreset(part); ok {
			ss |= p.Set
			continue
		}
		s, ok := LookupSwitch(part)
		if !ok {
			return 0, fmt.Errorf("unknown patch switch or preset %q (known: %s)", part, strings.Join(knownNames(), ", "))
		}
		ss = ss.With(s)
	}
	return ss, ss.Validate()
}

// Validate checks that every switch's requirements are in the set.
func (ss Switches) Validate() error {
	for _, s := range ss.List() {
		for _, r := range switchInfo[s].Requires {
			if !ss.Has(r) {
				return fmt.Errorf("patch switch %s requires %s (add it explicitly; kpsim does not enable it for you)", s, r)
			}
		}
	}
	return nil
}

// Closure returns s together with everything it requires.
func (s Switch) Closure() Switches {
	ss := Switches(0).With(s)
	for _, r := range switchInfo[s].Requires {
		ss |= r.Closure()
	}
	return ss
}

// Dependents returns the switches that require s (directly or not).
func (s Switch) Dependents() Switches {
	var out Switches
	for t := Switch(0); t < numSwitches; t++ {
		if t != s && t.Closure().Has(s) {
			out = out.With(t)
		}
	}
	return out
}

// Name returns a canonical name for the set: a preset's name when it equals
// one; the largest non-empty preset it contains plus the extra switches
// ("series+bug-index"); else the member names joined by '+'
// ("kprobe-tree+iter-can-probe").
func (ss Switches) Name() string {
	for _, p := range Presets() {
		if p.Set == ss {
			return p.Name
		}
	}
	ps := Presets()
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if p.Set != 0 && ss&p.Set == p.Set {
			return p.Name + "+" + strings.Join((ss&^p.Set).Names(), "+")
		}
	}
	return strings.Join(ss.Names(), "+")
}

func lookupPreset(name string) (Preset, bool) {
	for _, p := range Presets() {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

func knownNames() []string {
	var out []string
	for _, p := range Presets() {
		out = append(out, p.Name)
	}
	var sw []string
	for s := Switch(0); s < numSwitches; s++ {
		sw = append(sw, s.String())
	}
	sort.Strings(sw)
	return append(out, sw...)
}
