package alternative

import (
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// Model is one kernel generation's boot-time patching: the facts its
// tables and headers fix (struct alt_instr's size, cpufeatures.h's
// numbering, ASM_NOP_MAX, which vmlinux symbols the patch functions
// read) and the kernel functions that differ between generations, chosen
// once here (ModelFor) so that no model function tests a version.
//
//   - 6.1 (6.1.192): apply_paravirt over .parainstructions, then
//     apply_retpolines, apply_returns, apply_alternatives (12-byte
//     alt_instr, ALTINSTR_FLAG_INV in cpuid bit 15, recompute_jump,
//     optimize_nops on runs of 0x90). No IBT sealing (Debian 6.1 is built
//     without CONFIG_X86_KERNEL_IBT), no call thunks.
//   - 6.12 (6.12.117): no .parainstructions; pv calls are alternatives
//     with ALT_FLAG_DIRECT_CALL. alternative_instructions runs
//     apply_retpolines, apply_returns, apply_alternatives (14-byte
//     alt_instr: u32 ft_flags = cpuid:16 | flags:16; each entry patched
//     in turn, __apply_relocation, optimize_nops over any NOP, add_nop up
//     to 11 bytes), callthunks_patch_builtin_calls (.call_sites and the
//     alternative sites), apply_seal_endbr (.ibt_endbr_seal).
//   - 7.3 (7.3~rc7): as 6.12 but callthunks_patch_builtin_calls runs
//     before apply_alternatives and only on .call_sites,
//     apply_alternatives patches each site once with the last eligible
//     entry (analyze_patch_site), insn_is_nop also knows mov %reg,%reg,
//     lea 0(%reg),%reg and jmp +0, emit_indirect pads calls with CS
//     prefixes and jumps with int3, and apply_retpolines leaves Jcc.d8
//     and FineIBT-paranoid sites alone.
//
// module_finalize (Patcher.ModuleFinalize) follows the same order with
// the module's tables; its call thunks are callthunks_patch_module_calls'
// (calls in MOD_TEXT only), and 7.3 runs them before apply_alternatives
// there too.
type Model struct {
	Gen image.Generation
	// Release is the source release the model was read from.
	Release string
	// Insn is the generation's instruction decoder (insn_decode_kernel).
	Insn *x86.Decoder
	// AltInstrSize is sizeof(struct alt_instr).
	AltInstrSize int
	// Features maps cpufeatures.h names to this generation's bits;
	// CPUInfo maps /proc/cpuinfo flag names ("bug:" + name for the bugs
	// line) to cpufeatures.h names.
	Features map[string]Feature
	CPUInfo  map[string]string
	// NopMax is ASM_NOP_MAX (x86_nops[1..NopMax]).
	NopMax int
	// Paravirt says .parainstructions exist (apply_paravirt).
	Paravirt bool
	// Sealing and CallThunks say the kernel has apply_seal_endbr
	// (CONFIG_X86_KERNEL_IBT) and callthunks_patch_builtin_calls
	// (CONFIG_CALL_THUNKS) as Debian builds it.
	Sealing, CallThunks bool
	// EndbrPoison is gen_endbr_poison() (arch/x86/include/asm/ibt.h):
	// 6.12's "osp nopl (%rax)" (0x001f0f66), 7.3's "nopl -42(%rax)"
	// (0xd6401f0f); nil without sealing.
	EndbrPoison []byte
	// NotModelled completes the image note about boot patching.
	NotModelled string

	bits featureBits

	alternativeInstructions func(p *Patcher, t *Tables) error
	moduleFinalize          func(p *Patcher, t *Tables) error
	parseAlt                func(b []byte, base uint64) ([]AltInstr, error)
	applyAlternatives       func(p *Patcher, alts []AltInstr) error
	insnIsNop               func(in x86.Insn) bool
	// retpolineNops is the optimize_nops apply_retpolines runs on its
	// buffer (6.1: retpolineNops61; 6.12, 7.3: retpolineNops612).
	retpolineNops func(m *Model, b []byte, n int)
	emitIndirect  func(op byte, reg int, b []byte, excess int) int
	// int3AfterJmp: patch_retpoline appends int3 to an indirect jmp
	// itself (6.1, 6.12); 7.3's emit_indirect pads it.
	int3AfterJmp bool
	// retpolineSkip: apply_retpolines' extra site filter (7.3), nil
	// where there is none.
	retpolineSkip func(p *Patcher, addr uint64, in x86.Insn) bool
	// callThunkAltSites: patch_alt_call_sites runs (6.12).
	callThunkAltSites bool
	// kexecSkip is skip_addr's CONFIG_KEXEC_CORE range (6.12, 7.3; 6.1
	// has no call thunks).
	kexecSkip kexecRange
}

// kexecRange is the relocate_kernel range skip_addr leaves alone under
// CONFIG_KEXEC_CORE (Debian 6.12 and 7.3 set it): [start, end) between
// two symbols, or [start, start+size) when end is "".
type kexecRange struct {
	start, end string
	size       uint64
}

var (
	// kexecSkip612: 6.12's skip_addr tests dest >= relocate_kernel &&
	// dest < relocate_kernel + KEXEC_CONTROL_CODE_MAX_SIZE
	// (6.12.117 arch/x86/kernel/callthunks.c:141-144;
	// KEXEC_CONTROL_CODE_MAX_SIZE is 2048 on x86-64,
	// arch/x86/include/asm/kexec.h:20).
	kexecSkip612 = kexecRange{start: "relocate_kernel", size: 2048}
	// kexecSkip73: 7.3's skip_addr, CONFIG_X86_64, tests dest >=
	// __relocate_kernel_start && dest < __relocate_kernel_end
	// (7.3 arch/x86/kernel/callthunks.c:139-149;
	// the linker script brackets .text..relocate_kernel and
	// .data..relocate_kernel with them, arch/x86/kernel/vmlinux.lds.S:114-117).
	kexecSkip73 = kexecRange{start: "__relocate_kernel_start", end: "__relocate_kernel_end"}
)

// symbols are the vmlinux symbols r reads.
func (r kexecRange) symbols() []string {
	if r.start == "" {
		return nil
	}
	if r.end == "" {
		return []string{r.start}
	}
	return []string{r.start, r.end}
}

// resolve returns r's address range, false when r is empty or a symbol
// is missing (a kernel without CONFIG_KEXEC_CORE).
//
// Models arch/x86/kernel/callthunks.c:skip_addr (its CONFIG_KEXEC_CORE
// range; 6.12: relocate_kernel + KEXEC_CONTROL_CODE_MAX_SIZE, 7.3:
// __relocate_kernel_start to __relocate_kernel_end).
func (r kexecRange) resolve(lookup func(string) (uint64, bool)) ([2]uint64, bool) {
	if r.start == "" {
		return [2]uint64{}, false
	}
	s, ok := lookup(r.start)
	if !ok {
		return [2]uint64{}, false
	}
	if r.end == "" {
		return [2]uint64{s, s + r.size}, true
	}
	e, ok := lookup(r.end)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{s, e}, true
}

// featureBits are the bits the patch functions test, in one generation's
// numbering. A feature the generation lacks is noFeature (never set).
type featureBits struct {
	ALWAYS, XENPV, RETPOLINE, RETPOLINE_LFENCE, RETHUNK, INDIRECT_THUNK_ITS, CALL_DEPTH, IBT Feature
}

const noFeature = featureLimit

func resolveBits(names map[string]Feature) featureBits {
	get := func(n string) Feature {
		if f, ok := names["X86_FEATURE_"+n]; ok {
			return f
		}
		return noFeature
	}
	return featureBits{
		ALWAYS: get("ALWAYS"), XENPV: get("XENPV"), RETPOLINE: get("RETPOLINE"),
		RETPOLINE_LFENCE: get("RETPOLINE_LFENCE"), RETHUNK: get("RETHUNK"),
		INDIRECT_THUNK_ITS: get("INDIRECT_THUNK_ITS"), CALL_DEPTH: get("CALL_DEPTH"), IBT: get("IBT"),
	}
}

var (
	model61 = &Model{
		Gen: image.Gen61, Release: "6.1.192", AltInstrSize: AltInstrSize,
		Features: featureNames, CPUInfo: cpuinfoNames61, NopMax: 8, Paravirt: true,
		NotModelled:  "not modelled: static-call and jump-label init (same length), ftrace NOPing of __fentry__ calls (same length), IBT sealing (IBT off)",
		int3AfterJmp: true,
	}
	model612 = &Model{
		Gen: image.Gen612, Release: "6.12.117", AltInstrSize: AltInstrSize14,
		Features: featureNames612, CPUInfo: cpuinfoNames612, NopMax: 11,
		Sealing: true, CallThunks: true, EndbrPoison: []byte{0x66, 0x0f, 0x1f, 0x00},
		NotModelled:       model612NotModelled,
		int3AfterJmp:      true,
		callThunkAltSites: true,
		kexecSkip:         kexecSkip612,
	}
	model73 = &Model{
		Gen: image.Gen73, Release: "7.3~rc7", AltInstrSize: AltInstrSize14,
		Features: featureNames73, CPUInfo: cpuinfoNames73, NopMax: 11,
		Sealing: true, CallThunks: true, EndbrPoison: []byte{0x0f, 0x1f, 0x40, 0xd6},
		NotModelled: model612NotModelled,
		kexecSkip:   kexecSkip73,
	}
)

const model612NotModelled = "not modelled: static-call and jump-label init (same length), ftrace NOPing of __fentry__ calls (same length), FineIBT (gcc build: no kCFI), ITS thunk pages (a thunk call keeps its length; it is aimed at the static __x86_indirect_its_thunk_array entry)"

// The functions are set here, not in the literals: they refer back to
// the models (Patcher.model), which Go's initialization order forbids.
func init() {
	// Each generation decodes with its own insn.c and opcode map.
	for _, m := range []*Model{model61, model612, model73} {
		m.Insn = x86.For(m.Gen)
	}
	model61.alternativeInstructions = alternativeInstructions61
	model61.moduleFinalize = moduleFinalize61
	model61.parseAlt = ParseAltInstructions
	model61.applyAlternatives = (*Patcher).ApplyAlternatives
	model61.emitIndirect = emitIndirect61
	model61.retpolineNops = retpolineNops61
	model612.alternativeInstructions = alternativeInstructions612
	model612.moduleFinalize = moduleFinalize612
	model612.parseAlt = ParseAltInstructions14
	model612.applyAlternatives = applyAlternatives612
	model612.insnIsNop = insnIsNop612
	model612.retpolineNops = retpolineNops612
	model612.emitIndirect = emitIndirect61
	model73.alternativeInstructions = alternativeInstructions73
	model73.moduleFinalize = moduleFinalize73
	model73.parseAlt = ParseAltInstructions14
	model73.applyAlternatives = applyAlternatives73
	model73.insnIsNop = insnIsNop73
	model73.retpolineNops = retpolineNops612
	model73.emitIndirect = emitIndirect73
	model73.retpolineSkip = retpolineSkip73
	for _, m := range []*Model{model61, model612, model73} {
		m.bits = resolveBits(m.Features)
	}
}

// ModelFor returns the boot-patching model of generation g
// (GenUnknown: 6.1, see image.Generation.Effective).
func ModelFor(g image.Generation) *Model {
	switch g.Effective() {
	case image.Gen612:
		return model612
	case image.Gen73:
		return model73
	}
	return model61
}

// ParseAlt decodes this generation's .altinstructions.
func (m *Model) ParseAlt(b []byte, base uint64) ([]AltInstr, error) { return m.parseAlt(b, base) }

// FeatureByName returns the bit of an X86_FEATURE_* / X86_BUG_* name in
// this generation's cpufeatures.h (the X86_FEATURE_ prefix may be left
// off).
func (m *Model) FeatureByName(name string) (Feature, bool) {
	if f, ok := m.Features[name]; ok {
		return f, true
	}
	f, ok := m.Features["X86_FEATURE_"+name]
	return f, ok
}

// FeatureName names bit f in this generation's numbering (the first
// name in sort order when two share a bit), or "" when it has none.
func (m *Model) FeatureName(f Feature) string {
	var names []string
	for n, b := range m.Features {
		if b == f {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[0]
}

// EnvSymbols612 are the vmlinux symbols the 6.12 and 7.3 patch functions
// read besides the tables.
var EnvSymbols612 = []string{
	"nop_func", "BUG_func", "__x86_indirect_thunk_array", "__x86_indirect_call_thunk_array",
	"__x86_indirect_jump_thunk_array", "__x86_indirect_its_thunk_array", "__x86_return_thunk",
	"its_return_thunk", "__static_call_return", "_text", "_etext",
	"skl_call_thunk_template", "skl_call_thunk_tail",
}

// callThunkSkip are skip_addr's destinations (arch/x86/kernel/callthunks.c):
// calls to them keep their target.
var callThunkSkip = []string{"error_entry", "paranoid_entry", "xen_error_entry", "__switch_to_asm", "ret_from_fork", "soft_restart_cpu", "__fentry__"}

// NewEnv builds the Env of this generation for cpu from a symbol lookup
// (first address of a name), the pv_ops slots (6.1 only) and mem (6.12,
// 7.3: the call-thunk template is read from .rodata).
func (m *Model) NewEnv(lookup func(string) (uint64, bool), pvops []uint64, mem Memory, cpu *CPU) (*Env, error) {
	if m.Paravirt {
		return NewEnv(lookup, pvops, cpu)
	}
	e := &Env{PVOps: pvops}
	need := func(name string) (uint64, error) {
		a, ok := lookup(name)
		if !ok {
			return 0, fmt.Errorf("no %s symbol", name)
		}
		return a, nil
	}
	var err error
	for _, r := range []struct {
		name string
		p    *uint64
	}{
		{"__x86_return_thunk", &e.ReturnThunk}, {"nop_func", &e.NopFunc}, {"BUG_func", &e.BUGFunc},
	} {
		if *r.p, err = need(r.name); err != nil {
			return nil, err
		}
	}
	e.IndirectThunkArray, _ = lookup("__x86_indirect_thunk_array")
	e.CallThunkArray, _ = lookup("__x86_indirect_call_thunk_array")
	e.JumpThunkArray, _ = lookup("__x86_indirect_jump_thunk_array")
	e.ITSThunkArray, _ = lookup("__x86_indirect_its_thunk_array")
	e.ITSReturnThunk, _ = lookup("its_return_thunk")
	e.StaticCallReturn, _ = lookup("__static_call_return")
	e.XReturnThunk = e.ReturnThunk
	if cpu != nil && cpu.ReturnThunk != "" {
		if e.XReturnThunk, err = need(cpu.ReturnThunk); err != nil {
			return nil, fmt.Errorf("CPU %s returns through %s: %w", cpu.Name, cpu.ReturnThunk, err)
		}
	}
	if m.CallThunks {
		ct := &CallThunkEnv{}
		ct.TextStart, _ = lookup("_text")
		ct.TextEnd, _ = lookup("_etext")
		for _, n := range callThunkSkip {
			if a, ok := lookup(n); ok {
				ct.Skip = append(ct.Skip, a)
			}
		}
		// CONFIG_KEXEC_CORE: the generation's relocate_kernel range.
		if r, ok := m.kexecSkip.resolve(lookup); ok {
			ct.SkipRanges = append(ct.SkipRanges, r)
		}
		if s, ok := lookup("skl_call_thunk_template"); ok {
			if t, ok := lookup("skl_call_thunk_tail"); ok && t > s && t-s <= MaxPatchLen {
				b := mem.Text(s, int(t-s))
				if len(b) == int(t-s) {
					ct.Template = append([]byte(nil), b...)
					ct.TemplateAddr = s
				}
			}
		}
		e.CallThunks = ct
	}
	return e, nil
}

// CallThunkEnv is what callthunks_patch_builtin_calls reads.
type CallThunkEnv struct {
	// TextStart, TextEnd: builtin_coretext, [_text, _etext).
	TextStart, TextEnd uint64
	// Skip are skip_addr's single destinations; SkipRanges its ranges.
	Skip       []uint64
	SkipRanges [][2]uint64
	// Template is skl_call_thunk_template (INCREMENT_CALL_DEPTH), as
	// built, at TemplateAddr.
	Template     []byte
	TemplateAddr uint64
}
