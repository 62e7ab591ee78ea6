package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Switch is one proposed change that a run may turn on. With every switch
// off kpsim models upstream ("linear" mode).
type Switch uint8

// The switches. P1–P12 are the patches of the kprobes lookup-cost series
// (docs/series.md §1); BugIndex and BlacklistIndex go beyond it.
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
	FtraceSingleLookup                 // ftrace series: cnt == 1 fast path, merged form
	FtraceSingleLookupV1               // ftrace series: cnt == 1 fast path, RFC v1 form
	LibbpfExactSyms                    // libbpf: exact names go to the kernel as syms[0]
	ModuleBugIndex                     // beyond the series
	TraceEventIndex                    // beyond the series: tracefs event lookups by name
	// The alternative designs a reviewer asks about (docs/series.md). They are
	// not in any preset: each replaces a structure the series keeps.
	KprobeHashBits   // kprobe_table with 2^B buckets (parameterised: kprobe-hash-bits=B)
	KprobeRhashtable // lib/rhashtable.c as the probe index
	KprobeBtree      // a maple-like B-tree in place of the P4 rbtree
	ReservationBtree // the late-init reservation indexes as B-trees instead of sorted arrays
	numSwitches
)

// The range of kprobe-hash-bits=B, and the value With(KprobeHashBits) uses
// when no value is given (the ablation run).
const (
	MinHashBits     = 6  // KPROBE_HASH_BITS upstream
	MaxHashBits     = 20 // 8 MiB of bucket heads
	DefaultHashBits = 10 // what "kprobe-hash-bits" alone means: 1024 buckets
)

// SwitchInfo describes a switch.
type SwitchInfo struct {
	Name     string
	Patch    string // "P1".."P12", or "" beyond the series
	Requires []Switch
	Doc      string
}

// SwitchRules are the rules beyond Requires that the alternative designs
// need.
type SwitchRules struct {
	// RequiresAny: at least one of these must be in the set.
	RequiresAny []Switch
	// Conflicts: none of these may be in the set.
	Conflicts []Switch
	// Design marks an alternative design (in no preset).
	Design bool
	// Param names the switch's value ("B" for kprobe-hash-bits=B), "" for
	// a plain switch.
	Param string
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
	FtraceSingleLookup: {Name: "ftrace-single-lookup",
		Doc: "ftrace_lookup_symbols: cnt == 1 by kallsyms_lookup_name, storing the symbol address and only checking ftrace_location (the form review asked for)"},
	FtraceSingleLookupV1: {Name: "ftrace-single-lookup-v1",
		Doc: "ftrace_lookup_symbols: cnt == 1 by kallsyms_lookup_name, storing ftrace_location(addr) (RFC v1; differs under IBT)"},
	LibbpfExactSyms: {Name: "libbpf-exact-syms",
		Doc: "libbpf bpf_program__attach_kprobe_multi_opts: a pattern without * or ? goes to the kernel as syms[0], cnt 1, no file parsing; -ESRCH reported as -ENOENT (libbpf e08da30)"},
	ModuleBugIndex: {"module-bug-index", "", nil, "module_find_bug: per-module address index of each module's bug table, built at module load (beyond the series)"},
	TraceEventIndex: {"trace-event-index", "", nil,
		"find_trace_kprobe and find_trace_event_call: hash tables of trace_probe_events by (group, event) and trace_event_calls by (system, name), built at late init and kept on create/delete, instead of walking dyn_event_list and ftrace_events (beyond the series)"},
	KprobeHashBits:   {"kprobe-hash-bits", "", nil, "design: kprobe_table with 2^B buckets (hash_ptr(addr, B)), B in 6..20; the simplest possible patch"},
	KprobeRhashtable: {"kprobe-rhashtable", "", nil, "design: lib/rhashtable.c (jhash2, growth at 75% load by the deferred worker, shrink below 30%) in place of kprobe_table"},
	KprobeBtree:      {"kprobe-btree", "", []Switch{KprobeTree}, "design: the P4 tree is a maple-like B-tree (16 slots, 256-byte nodes; google/btree) under the same iterators"},
	ReservationBtree: {"reservation-btree", "", nil, "design: the late-init reservation indexes (static-call, jump-label, bug, blacklist) are maple-like B-trees instead of sorted arrays"},
}

var switchRules = [numSwitches]SwitchRules{
	// Two forms of one patch: a set holding both is refused.
	FtraceSingleLookup:   {Conflicts: []Switch{FtraceSingleLookupV1}},
	FtraceSingleLookupV1: {Conflicts: []Switch{FtraceSingleLookup}},
	KprobeHashBits:       {Conflicts: []Switch{KprobeRhashtable}, Design: true, Param: "B"},
	KprobeRhashtable:     {Conflicts: []Switch{KprobeHashBits}, Design: true},
	KprobeBtree:          {Design: true},
	ReservationBtree:     {RequiresAny: []Switch{StaticCallIndex, JumpLabelIndex, BugIndex, BlacklistIndex}, Design: true},
}

// Rules returns the switch's rules beyond Requires.
func (s Switch) Rules() SwitchRules { return switchRules[s] }

// DesignSwitches lists the alternative designs.
func DesignSwitches() []Switch {
	var out []Switch
	for s := Switch(0); s < numSwitches; s++ {
		if switchRules[s].Design {
			out = append(out, s)
		}
	}
	return out
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

// Switches is a set of switches. The low 32 bits are one bit per switch;
// a parameterised switch keeps its value above them (bits 32-39: the B of
// kprobe-hash-bits=B), so a set is still a comparable integer and the zero
// value is upstream.
type Switches uint64

const (
	flagMask      Switches = 1<<32 - 1
	hashBitsShift          = 32
	hashBitsMask  Switches = 0xff << hashBitsShift
)

// Has reports whether s is in the set.
func (ss Switches) Has(s Switch) bool { return ss&(1<<s) != 0 }

// With returns the set plus s. A parameterised switch gets its default
// value unless the set already carries one (WithHashBits sets it).
func (ss Switches) With(s Switch) Switches {
	ss |= 1 << s
	if s == KprobeHashBits && ss&hashBitsMask == 0 {
		ss |= Switches(DefaultHashBits) << hashBitsShift
	}
	return ss
}

// Without returns the set minus s (and its value).
func (ss Switches) Without(s Switch) Switches {
	ss &^= 1 << s
	if s == KprobeHashBits {
		ss &^= hashBitsMask
	}
	return ss
}

// WithHashBits returns the set with kprobe-hash-bits=b. b is not checked
// here; Validate checks it.
func (ss Switches) WithHashBits(b uint) Switches {
	return (ss&^hashBitsMask | 1<<KprobeHashBits) | Switches(b&0xff)<<hashBitsShift
}

// HashBits returns the kprobe_table's hash bits: B with kprobe-hash-bits=B,
// else upstream's KPROBE_HASH_BITS (6).
func (ss Switches) HashBits() uint {
	if !ss.Has(KprobeHashBits) {
		return MinHashBits
	}
	return uint(ss&hashBitsMask) >> hashBitsShift
}

// union merges two sets; a value of t wins over one of ss.
func (ss Switches) union(t Switches) Switches {
	out := ss | t&flagMask
	if t&hashBitsMask != 0 {
		out = out&^hashBitsMask | t&hashBitsMask
	}
	return out
}

// name returns s's name in the set: "kprobe-hash-bits=12" for a value.
func (ss Switches) name(s Switch) string {
	if s == KprobeHashBits {
		return fmt.Sprintf("%s=%d", s, ss.HashBits())
	}
	return s.String()
}

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
		out = append(out, ss.name(s))
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
	PresetAll = Preset{"all", nonDesign().Without(FtraceSingleLookupV1), "the series plus every change beyond it (no alternative design; the merged form of each patch, not ftrace-single-lookup-v1)"}
)

func nonDesign() Switches {
	var out Switches
	for s := Switch(0); s < numSwitches; s++ {
		if !switchRules[s].Design {
			out = out.With(s)
		}
	}
	return out
}

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
			ss = ss.union(p.Set)
			continue
		}
		name, val, hasVal := strings.Cut(part, "=")
		s, ok := LookupSwitch(name)
		if ok && hasVal {
			if switchRules[s].Param == "" {
				return 0, fmt.Errorf("patch switch %s takes no value (got %q)", s, part)
			}
			b, err := strconv.ParseUint(val, 10, 8)
			if err != nil || b < MinHashBits || b > MaxHashBits {
				return 0, fmt.Errorf("%s: B must be an integer in %d..%d (got %q)", s, MinHashBits, MaxHashBits, val)
			}
			ss = ss.WithHashBits(uint(b))
			continue
		}
		if ok && switchRules[s].Param != "" {
			return 0, fmt.Errorf("patch switch %s needs a value: %s=%s (%s in %d..%d)", s, s, switchRules[s].Param, switchRules[s].Param, MinHashBits, MaxHashBits)
		}
		if !ok {
			return 0, fmt.Errorf("unknown patch switch or preset %q (known: %s)", part, strings.Join(knownNames(), ", "))
		}
		ss = ss.With(s)
	}
	return ss, ss.Validate()
}

// Validate checks that every switch's requirements are in the set.
func (ss Switches) Validate() error {
	if ss&^(flagMask|hashBitsMask) != 0 || ss&flagMask>>numSwitches != 0 {
		return fmt.Errorf("patch set %#x has unknown bits", uint64(ss))
	}
	if ss.Has(KprobeHashBits) {
		if b := ss.HashBits(); b < MinHashBits || b > MaxHashBits {
			return fmt.Errorf("kprobe-hash-bits: B must be in %d..%d (got %d)", MinHashBits, MaxHashBits, b)
		}
	} else if ss&hashBitsMask != 0 {
		return fmt.Errorf("patch set carries hash bits without kprobe-hash-bits")
	}
	for _, s := range ss.List() {
		info, rules := switchInfo[s], switchRules[s]
		for _, r := range info.Requires {
			if !ss.Has(r) {
				return fmt.Errorf("patch switch %s requires %s (add it explicitly; kpsim does not enable it for you)", s, r)
			}
		}
		for _, x := range rules.Conflicts {
			if ss.Has(x) {
				return fmt.Errorf("patch switches %s and %s are alternatives to each other (pick one)", s, x)
			}
		}
		if len(rules.RequiresAny) > 0 {
			found := false
			var names []string
			for _, r := range rules.RequiresAny {
				found = found || ss.Has(r)
				names = append(names, r.String())
			}
			if !found {
				return fmt.Errorf("patch switch %s needs one of %s (it changes how those indexes are kept)", s, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// Closure returns s together with everything it requires.
// For a switch that needs one of several (RequiresAny), all of them are
// taken: reservation-btree alone means every reservation index as a B-tree.
func (s Switch) Closure() Switches {
	ss := Switches(0).With(s)
	for _, r := range switchInfo[s].Requires {
		ss = ss.union(r.Closure())
	}
	for _, r := range switchRules[s].RequiresAny {
		ss = ss.union(r.Closure())
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
		if p := switchRules[s].Param; p != "" {
			sw = append(sw, s.String()+"="+p)
			continue
		}
		sw = append(sw, s.String())
	}
	sort.Strings(sw)
	return append(out, sw...)
}
