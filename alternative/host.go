package alternative

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// CPUInfoPath is where HostCPU reads this machine's CPU.
var CPUInfoPath = "/proc/cpuinfo"

// CPUInfo is the first processor of a /proc/cpuinfo.
type CPUInfo struct {
	Vendor, ModelName string
	Family, Model     int
	Flags, Bugs       []string
}

// ParseCPUInfo reads the first processor block of a /proc/cpuinfo. The
// "cpu family" and "model" values must be what show_cpuinfo prints
// (arch/x86/kernel/cpu/proc.c: the __u8 x86 and x86_model as decimal
// numbers): anything else is an error naming the line, not a family or
// model the mitigation choices would read.
func ParseCPUInfo(r io.Reader) (*CPUInfo, error) {
	ci := &CPUInfo{Family: -1, Model: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seenFlags := false
	lineNo := 0
	number := func(k, v string) (int, error) {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil {
			return 0, fmt.Errorf("line %d: %s %q is not an 8-bit decimal number", lineNo, k, v)
		}
		return int(n), nil
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seenFlags {
				break // end of the first processor
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			ci.Vendor = v
		case "model name":
			ci.ModelName = v
		case "cpu family":
			n, err := number(k, v)
			if err != nil {
				return nil, err
			}
			ci.Family = n
		case "model":
			n, err := number(k, v)
			if err != nil {
				return nil, err
			}
			ci.Model = n
		case "flags":
			ci.Flags, seenFlags = strings.Fields(v), true
		case "bugs":
			ci.Bugs = strings.Fields(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !seenFlags {
		return nil, fmt.Errorf("no flags line (not an x86 /proc/cpuinfo)")
	}
	return ci, nil
}

// HostCPU builds the CPU of this machine from CPUInfoPath: its flags and
// bugs lines as the boot CPU's CPUID and bug bits, and the mitigations
// cpu_select_mitigations picks from them on the default command line
// (hostMitigations). The returned CPU is numbered for 6.1; ForGen
// rebuilds it for a later generation, mitigations included.
func HostCPU() (*CPU, error) {
	f, err := os.Open(CPUInfoPath)
	if err != nil {
		return nil, fmt.Errorf("--cpu %s: %v", CPUHost, err)
	}
	defer f.Close()
	ci, err := ParseCPUInfo(f)
	if err != nil {
		return nil, fmt.Errorf("--cpu %s: %s: %v", CPUHost, CPUInfoPath, err)
	}
	return ci.CPU(image.Gen61)
}

// CPU builds the CPU these flags describe for generation g.
func (ci *CPUInfo) CPU(g image.Generation) (*CPU, error) {
	m := ModelFor(g)
	c := &CPU{Name: CPUHost, model: m}
	var unknown []string
	add := func(name, why string) {
		f, ok := m.FeatureByName(name)
		if !ok {
			c.Dropped = append(c.Dropped, name)
			return
		}
		if !c.Features.Has(f) {
			c.Features.Set(f)
			c.Why = append(c.Why, FeatureReason{name, why})
		}
	}
	for _, fl := range ci.Flags {
		if n, ok := lookupCPUInfo(m, fl, false); ok {
			add(n, "/proc/cpuinfo flags: "+fl)
		} else {
			unknown = append(unknown, fl)
		}
	}
	for _, b := range ci.Bugs {
		if n, ok := lookupCPUInfo(m, b, true); ok {
			add(n, "/proc/cpuinfo bugs: "+b)
		} else {
			unknown = append(unknown, "bug:"+b)
		}
	}
	// identify_cpu forces ALWAYS on every CPU; /proc/cpuinfo hides it.
	add("X86_FEATURE_ALWAYS", "forced by early_identify_cpu on every CPU")
	hv := c.Features.Has(m.bits.XENPV)
	mit := hostMitigations(m, ci, c, add)
	c.Mitigations = mit.lines
	c.ReturnThunk = mit.returnThunk
	c.Description = fmt.Sprintf("this machine: %s (%s family %d model %#x), default command line assumed, %s bits from /proc/cpuinfo flags [%s] bugs [%s]",
		ci.ModelName, ci.Vendor, ci.Family, ci.Model, m.Gen, strings.Join(ci.Flags, " "), strings.Join(ci.Bugs, " "))
	if len(unknown) > 0 {
		c.Description += fmt.Sprintf(" (%d names %s's cpufeatures.h lacks: %s)", len(unknown), m.Gen, strings.Join(unknown, " "))
	}
	if hv {
		c.Description += "; a Xen PV guest"
	}
	c.forGen = func(g image.Generation) (*CPU, error) { return ci.CPU(g) }
	return c, nil
}

// lookupCPUInfo maps a /proc/cpuinfo name to a cpufeatures.h name of m:
// m's own names (mkcapflags.sh), else the upper-cased macro suffix (the
// machine's kernel may be of another generation and show other names).
// Simulator helper: the inverse of the x86_cap_flags table show_cpuinfo
// prints from.
func lookupCPUInfo(m *Model, name string, bug bool) (string, bool) {
	key, prefix := name, "X86_FEATURE_"
	if bug {
		key, prefix = "bug:"+name, "X86_BUG_"
	}
	if n, ok := m.CPUInfo[key]; ok {
		return n, true
	}
	n := prefix + strings.ToUpper(name)
	if _, ok := m.Features[n]; ok {
		return n, true
	}
	return "", false
}

type hostMit struct {
	lines       []string
	returnThunk string
}

// hostMitigations sets the synthetic bits cpu_select_mitigations
// (arch/x86/kernel/cpu/bugs.c) picks on the default command line for the
// bugs of c, for the decisions boot patching reads: spectre_v2 (eIBRS,
// IBRS on retbleed-affected Intel, else retpolines; with the RSB filling
// it implies), retbleed (AMD: untrained return thunk; Intel: the
// spectre_v2 choice), SRSO (AMD: Safe RET), ITS (aligned thunks) and the
// return thunk these leave; spectre_v1's swapgs fences, MDS/TAA's VERW
// (CLEAR_CPU_BUF) and BHI's clearing sequence. Bits no patch site tests
// (SPEC_CTRL MSR values, SMT control) are not modelled. The choices are
// the same in 6.12 and 7.3 for these inputs (7.3 reorganises bugs.c into
// select/update/apply steps with the same AUTO outcomes); 6.1.192 has the
// same order of decisions.
//
// Models arch/x86/kernel/cpu/bugs.c:cpu_select_mitigations (the AUTO
// paths of spectre_v1, spectre_v2, retbleed, srso, its, mds/taa, bhi).
func hostMitigations(m *Model, ci *CPUInfo, c *CPU, add func(name, why string)) hostMit {
	has := func(n string) bool {
		f, ok := m.FeatureByName(n)
		return ok && c.Features.Has(f)
	}
	clear := func(n string) {
		if f, ok := m.FeatureByName(n); ok {
			c.Features.Clear(f)
		}
	}
	intel := ci.Vendor == "GenuineIntel"
	amd := ci.Vendor == "AuthenticAMD" || ci.Vendor == "HygonGenuine"
	var out hostMit
	thunk := "__x86_return_thunk"
	say := func(s string) { out.lines = append(out.lines, s) }

	// spectre_v1_select_mitigation
	if has("X86_BUG_SPECTRE_V1") {
		if has("X86_BUG_SWAPGS") && !has("X86_BUG_CPU_MELTDOWN") {
			add("X86_FEATURE_FENCE_SWAPGS_USER", "spectre_v1_select_mitigation: X86_BUG_SWAPGS without PTI")
		}
		add("X86_FEATURE_FENCE_SWAPGS_KERNEL", "spectre_v1_select_mitigation: swapgs barriers")
		say("spectre_v1: usercopy/swapgs barriers")
	}

	// spectre_v2_select_mitigation (AUTO)
	mode := "none"
	if has("X86_BUG_SPECTRE_V2") {
		switch {
		case has("IBRS_ENHANCED"):
			mode = "eibrs"
		case has("X86_BUG_RETBLEED") && has("IBRS") && intel:
			mode = "ibrs"
		default:
			mode = "retpoline"
		}
	}
	switch mode {
	case "eibrs":
		say("spectre_v2: Enhanced IBRS: apply_retpolines writes call/jmp *%reg")
		if has("X86_BUG_EIBRS_PBRSB") {
			add("X86_FEATURE_RSB_VMEXIT_LITE", "spectre_v2_select_rsb_mitigation: eIBRS with X86_BUG_EIBRS_PBRSB")
		}
	case "ibrs":
		add("X86_FEATURE_KERNEL_IBRS", "spectre_v2_select_mitigation: AUTO, retbleed-affected Intel with IBRS: SPECTRE_V2_IBRS")
		add("X86_FEATURE_RSB_CTXSW", "spectre_v2_select_rsb_mitigation: IBRS")
		add("X86_FEATURE_RSB_VMEXIT", "spectre_v2_select_rsb_mitigation: IBRS")
		say("spectre_v2: IBRS: apply_retpolines writes call/jmp *%reg")
	case "retpoline":
		add("X86_FEATURE_RETPOLINE", "spectre_v2_select_mitigation: AUTO without eIBRS (nor IBRS for retbleed): spectre_v2_select_retpoline")
		add("X86_FEATURE_RSB_CTXSW", "spectre_v2_select_rsb_mitigation: retpoline")
		add("X86_FEATURE_RSB_VMEXIT", "spectre_v2_select_rsb_mitigation: retpoline")
		if has("IBRS") {
			add("X86_FEATURE_USE_IBRS_FW", "spectre_v2_select_mitigation: IBRS present, not an IBRS mode")
		}
		say("spectre_v2: Retpolines: apply_retpolines keeps the thunk calls")
	}

	// bhi_select_mitigation
	if has("X86_BUG_BHI") {
		switch {
		case mode == "retpoline" && !has("RRSBA_CTRL"):
			say("bhi: retpoline (no BHB clearing needed)")
		case has("BHI_CTRL"):
			add("X86_FEATURE_CLEAR_BHB_HW", "bhi_select_mitigation: BHI_CTRL, BHI_DIS_S")
			say("bhi: BHI_DIS_S")
		default:
			add("X86_FEATURE_CLEAR_BHB_LOOP", "bhi_select_mitigation: SW BHB clearing on syscall")
			say("bhi: SW loop")
		}
	}

	// retbleed_select_mitigation (AUTO)
	retbleed := "not affected"
	if has("X86_BUG_RETBLEED") {
		switch {
		case amd:
			retbleed = "unret"
			add("X86_FEATURE_RETHUNK", "retbleed_select_mitigation: AUTO on AMD: RETBLEED_MITIGATION_UNRET")
			add("X86_FEATURE_UNRET", "retbleed_select_mitigation: RETBLEED_MITIGATION_UNRET")
			thunk = "retbleed_return_thunk"
		case intel && mode == "ibrs":
			retbleed = "IBRS"
		case intel && mode == "eibrs":
			retbleed = "eIBRS"
		default:
			retbleed = "vulnerable"
		}
	}
	say("retbleed: " + retbleed)

	// srso_select_mitigation (AUTO: Safe RET)
	if has("X86_BUG_SRSO") && amd {
		add("X86_FEATURE_RETHUNK", "srso_select_mitigation: Safe RET")
		switch {
		case ci.Family == 0x19:
			add("X86_FEATURE_SRSO_ALIAS", "srso_select_mitigation: Safe RET on family 0x19")
			thunk = "srso_alias_return_thunk"
		default:
			add("X86_FEATURE_SRSO", "srso_select_mitigation: Safe RET")
			thunk = "srso_return_thunk"
		}
		if ci.Family == 0x17 || ci.Family == 0x19 {
			add("X86_FEATURE_UNRET", "srso_select_mitigation: Safe RET untrains on entry")
		}
		say("srso: Safe RET: apply_returns writes jmp " + thunk)
	}

	// its_select_mitigation (AUTO: aligned thunks)
	if has("X86_BUG_ITS") && mode != "none" && !has("RETPOLINE_LFENCE") {
		if !has("RETPOLINE") {
			add("X86_FEATURE_INDIRECT_THUNK_ITS", "its_select_mitigation: aligned thunks without retpolines")
		}
		add("X86_FEATURE_RETHUNK", "its_select_mitigation: aligned branch/return thunks")
		thunk = "its_return_thunk"
		say("its: Aligned branch/return thunks: apply_returns writes jmp its_return_thunk in the lower half of a cache line, ret elsewhere")
	}
	if !has("RETHUNK") {
		clear("X86_FEATURE_UNRET")
	}

	// mds / taa / mmio: VERW before returning to user space
	if has("X86_BUG_MDS") || has("X86_BUG_TAA") || has("X86_BUG_MMIO_STALE_DATA") || has("X86_BUG_RFDS") {
		add("X86_FEATURE_CLEAR_CPU_BUF", "mds/taa/mmio/rfds_select_mitigation: VERW (mitigation or \"attempted, no microcode\")")
		say("mds/taa/mmio/rfds: clear CPU buffers")
	}
	out.returnThunk = thunk
	return out
}
