package synth

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/image"
)

// Config sizes and shapes a synthetic kernel. Every count and mix is a
// field (and a kpsim flag); DefaultConfig sizes it like a current x86-64
// distro kernel. The defaults are orders of magnitude of such kernels'
// tables (J ≈ 10⁴–5·10⁴, S ≈ 10³–10⁴, B ≈ 10⁴–3·10⁴, K ≈ 10³; `kpsim
// image` prints a real one's); the real-kernel loader replaces them with
// counts read from a real image.
type Config struct {
	Seed uint64
	// Gen is the kernel generation the image models (image.Config.Gen):
	// GenUnknown, which reads as 6.1, for DefaultConfig and the images
	// made before generations existed.
	Gen image.Generation

	// Functions is the number of core-text (.text) functions, all zones
	// included (entry, noinstr, kprobes text, thunks excluded).
	Functions int
	// InitFunctions live in .init.text.
	InitFunctions int
	// Function size distribution: log-normal around SizeMedian bytes with
	// shape SizeSigma, clamped to [MinSize, MaxSize]. Small functions
	// dominate, with a long tail of large ones.
	SizeMedian int
	SizeSigma  float64
	MinSize    int
	MaxSize    int

	// Jump-label sites (core + init text) and their static keys.
	JumpEntries int
	JumpKeys    int
	// JumpMix is the as-assembled encoding mix in percent: NOP2, NOP5, JMP8, JMP32.
	JumpMix [4]float64
	// JumpBranchPercent of entries belong to default-true keys (branch bit).
	JumpBranchPercent float64

	StaticCallSites       int
	StaticCallKeys        int
	StaticCallTailPercent float64

	BugEntries int
	// Blacklist is the number of NOKPROBE_SYMBOL entries (_kprobe_blacklist).
	Blacklist int
	// Functions in the special zones kprobes refuses by section range.
	EntryFunctions       int
	IRQEntryFunctions    int
	NoinstrFunctions     int
	KprobesTextFunctions int

	Modules               int
	ModuleFunctions       int
	ModuleInitFunctions   int
	ModuleJumpEntries     int
	ModuleStaticCallSites int
	ModuleBugEntries      int

	// TracedPercent of functions are built with -mfentry (a __fentry__
	// call after the ENDBR, recorded in __mcount_loc).
	TracedPercent float64
	// UaccessPercent of functions hold a stac/access/clac sequence with an
	// exception-table entry on the access.
	UaccessPercent float64
	// LoopToEntryPercent of functions jump back into the 5 bytes after the
	// entry probe point (which makes an entry optprobe unsafe).
	LoopToEntryPercent float64
	// IndirectJumpPercent of functions contain an indirect jump (a jmp to
	// a retpoline thunk with Retpoline, else jmp *%rax).
	IndirectJumpPercent float64
	// VzeroupperPercent of functions use AVX and end with vzeroupper.
	VzeroupperPercent float64
	// Name shape: percent of static helpers sharing a common name, and of
	// compiler clones with dotted suffixes (.isra.0, .constprop.0, ...).
	DupNamePercent float64
	ClonePercent   float64

	IBT            bool
	Retpoline      bool
	RetThunk       bool
	ReturnsPatched bool
	// CallPadding is CONFIG_CALL_PADDING (6.2 and later): gcc's
	// -fpatchable-function-entry=16,16 puts 16 single-byte NOPs before
	// every C function, which objtool names __pfx_<func>; the function
	// stays 16-byte aligned (CONFIG_FUNCTION_ALIGNMENT=16), so the
	// padding ends where it starts. The asm entry text (entry, irqentry
	// zones), thunks and static-call trampolines have none. With it,
	// __init functions are 16-byte aligned too (the real 6.12 and 7.3
	// images: 2,660 of 2,662 and 2,859 of 2,862).
	CallPadding bool

	// ProbeTargets adds N small generated functions like the kernel's
	// batch kprobe sample (P13 in docs/series.md), built into vmlinux.
	ProbeTargets       int
	ProbeTargetsTraced bool
	// ProbeTargetsAt places the targets inside .text after this fraction
	// of the ordinary functions (link order); 1 appends them after all
	// core text. The kernel's sample lives in kernel/, which the x86 link
	// order puts after head, init and arch code: early in .text.
	ProbeTargetsAt float64
	// SampleFunctions is how many functions the batch sample
	// (kernel/kprobes_many.c, P13 in docs/series.md) adds to vmlinux: 50,000,
	// of which the scenario probes --n (SampleSize).
	SampleFunctions int

	// ObjectFunctionsMedian and ObjectFunctionsSigma shape how many
	// functions one object file (translation unit) holds: log-normal,
	// at least one. Gaps inside an object are gas's NOPs, gaps between
	// objects the linker's fill (int3 in vmlinux .text). Measured on the
	// Debian 6.1 vmlinux as built (TestRealKernelObjectSizes): of 47,001
	// .text functions, the gaps before a 16-byte-aligned successor are
	// 2,203 int3-only (object boundaries), 37,735 NOP-only (gas), 3,210
	// empty, 238 an int3 then NOPs (an asm "ret; int3", then gas);
	// functions per object between int3 gaps: median 9, p10 1, p25 4, p75
	// 21, p90 46, p99 163, max 364, mean 19.7. Median 9 and shape 1.27
	// (ln(46/9)/z(0.9), fitted to p50 and p90 only) give p25 3.8, p99 173
	// and mean 20.
	ObjectFunctionsMedian float64
	ObjectFunctionsSigma  float64
	// Padding is how gaps are filled: PaddingToolchain (gas NOPs inside an
	// object, the linker's fill between) or PaddingInt3 (int3 everywhere,
	// kpsim's generator before it modelled the toolchain: a counterfactual
	// that measures what int3 padding costs can_optimize).
	Padding Padding
}

// Padding names a gap-fill model (--padding).
type Padding string

const (
	PaddingToolchain Padding = "toolchain"
	PaddingInt3      Padding = "int3"
)

func (p Padding) validate() error {
	switch p {
	case PaddingToolchain, PaddingInt3, "": // "" is the zero Config's toolchain
		return nil
	}
	return cfgErr("padding", "want toolchain or int3, got %q", string(p))
}

// SampleSize is how many target functions the batch sample adds for a run
// that probes n of them: c.SampleFunctions, or n when more are probed
// than the sample holds (the sample then grows to n).
func SampleSize(c Config, n int) int { return max(c.SampleFunctions, n) }

// DefaultConfig is the 6.1 reference: ConfigFor(Gen61), the image every
// 6.1 figure, golden file and test was made on (its Gen is GenUnknown,
// which reads as 6.1, so its images are byte for byte those of before
// generations; keep it unchanged). The commands' synthetic default is
// ConfigFor(Gen73) (Debian73Config). It is a distro-sized x86-64 kernel
// like Debian's 6.1 generic flavour (config of linux-image-6.1.0-57-amd64, 6.1.192-3): retpolines and
// return thunks built in, returns patched to "ret; int3" at boot (a CPU that
// needs no return thunk), and no IBT (# CONFIG_X86_KERNEL_IBT is not set),
// so functions start without ENDBR64; --ibt models a kernel that has it.
func DefaultConfig() Config {
	return Config{
		Seed:                  1,
		Functions:             60000,
		InitFunctions:         2500,
		SizeMedian:            112,
		SizeSigma:             1.15,
		MinSize:               16,
		MaxSize:               32768,
		JumpEntries:           30000,
		JumpKeys:              9000,
		JumpMix:               [4]float64{35, 40, 10, 15},
		JumpBranchPercent:     25,
		StaticCallSites:       6000,
		StaticCallKeys:        400,
		StaticCallTailPercent: 10,
		BugEntries:            18000,
		Blacklist:             600,
		EntryFunctions:        40,
		IRQEntryFunctions:     30,
		NoinstrFunctions:      400,
		KprobesTextFunctions:  30,
		Modules:               4,
		ModuleFunctions:       400,
		ModuleInitFunctions:   4,
		ModuleJumpEntries:     150,
		ModuleStaticCallSites: 20,
		ModuleBugEntries:      120,
		TracedPercent:         92,
		UaccessPercent:        3,
		LoopToEntryPercent:    2,
		IndirectJumpPercent:   0.5,
		VzeroupperPercent:     0.3,
		DupNamePercent:        2,
		ClonePercent:          4,
		ProbeTargetsAt:        0.15,
		SampleFunctions:       50000,
		ObjectFunctionsMedian: 9,
		ObjectFunctionsSigma:  1.27,
		Padding:               PaddingToolchain,
		IBT:                   false,
		Retpoline:             true,
		RetThunk:              true,
		ReturnsPatched:        true,
	}
}

// ConfigError names the offending field (its kpsim flag) and the problem.
type ConfigError struct {
	Flag string
	Msg  string
}

func (e *ConfigError) Error() string { return "--" + e.Flag + ": " + e.Msg }

func cfgErr(flag, format string, a ...any) error {
	return &ConfigError{Flag: flag, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks counts and mixes that can be checked without laying
// anything out. Capacity (more sites than the text can hold) is checked by
// Generate, which knows the function sizes.
func (c *Config) Validate() error {
	ints := []struct {
		flag string
		v    int
	}{
		{"functions", c.Functions}, {"init-functions", c.InitFunctions},
		{"size-median", c.SizeMedian}, {"min-size", c.MinSize}, {"max-size", c.MaxSize},
		{"jump-entries", c.JumpEntries}, {"jump-keys", c.JumpKeys},
		{"static-calls", c.StaticCallSites}, {"static-call-keys", c.StaticCallKeys},
		{"bug-entries", c.BugEntries}, {"blacklist", c.Blacklist},
		{"entry-functions", c.EntryFunctions}, {"irqentry-functions", c.IRQEntryFunctions},
		{"noinstr-functions", c.NoinstrFunctions}, {"kprobes-text-functions", c.KprobesTextFunctions},
		{"modules", c.Modules}, {"module-functions", c.ModuleFunctions},
		{"module-init-functions", c.ModuleInitFunctions}, {"module-jump-entries", c.ModuleJumpEntries},
		{"module-static-calls", c.ModuleStaticCallSites}, {"module-bug-entries", c.ModuleBugEntries},
		{"probe-targets", c.ProbeTargets}, {"sample-functions", c.SampleFunctions},
	}
	for _, f := range ints {
		if f.v < 0 {
			return cfgErr(f.flag, "must not be negative (got %d)", f.v)
		}
	}
	if c.Functions < 1 {
		return cfgErr("functions", "need at least one function")
	}
	if c.MinSize < 16 {
		return cfgErr("min-size", "must be at least 16 bytes (ENDBR, fentry call, ret; got %d)", c.MinSize)
	}
	if c.MaxSize < c.MinSize || c.MaxSize > 1<<20 {
		return cfgErr("max-size", "must be in [min-size, 1 MiB] (got %d)", c.MaxSize)
	}
	if c.SizeMedian < c.MinSize || c.SizeMedian > c.MaxSize {
		return cfgErr("size-median", "must lie in [min-size, max-size] (got %d)", c.SizeMedian)
	}
	if !(c.SizeSigma >= 0 && c.SizeSigma <= 4) { // NaN fails too

		return cfgErr("size-sigma", "must be in [0, 4] (got %g)", c.SizeSigma)
	}
	if c.JumpEntries > 0 && c.JumpKeys < 1 {
		return cfgErr("jump-keys", "jump entries need at least one key")
	}
	if c.JumpKeys > c.JumpEntries+c.Modules*c.ModuleJumpEntries && c.JumpKeys > 0 {
		return cfgErr("jump-keys", "%d keys for %d entries: every key needs a site", c.JumpKeys, c.JumpEntries)
	}
	if (c.StaticCallSites > 0 || c.ModuleStaticCallSites > 0) && c.StaticCallKeys < 1 {
		return cfgErr("static-call-keys", "static-call sites need at least one key")
	}
	var mix float64
	for i, m := range c.JumpMix {
		if m < 0 {
			return cfgErr("jump-mix", "%s share must not be negative", jumpKindNames[i])
		}
		mix += m
	}
	if c.JumpEntries+c.ModuleJumpEntries > 0 && mix <= 0 {
		return cfgErr("jump-mix", "shares must not all be zero")
	}
	pcts := []struct {
		flag string
		v    float64
	}{
		{"jump-branch-percent", c.JumpBranchPercent}, {"static-call-tail-percent", c.StaticCallTailPercent},
		{"traced-percent", c.TracedPercent}, {"uaccess-percent", c.UaccessPercent},
		{"loop-to-entry-percent", c.LoopToEntryPercent}, {"indirect-jump-percent", c.IndirectJumpPercent},
		{"vzeroupper-percent", c.VzeroupperPercent}, {"dup-name-percent", c.DupNamePercent},
		{"clone-percent", c.ClonePercent},
	}
	for _, p := range pcts {
		if !(p.v >= 0 && p.v <= 100) {
			return cfgErr(p.flag, "must be a percentage in [0, 100] (got %g)", p.v)
		}
	}
	if c.DupNamePercent+c.ClonePercent > 100 {
		return cfgErr("clone-percent", "dup-name-percent + clone-percent exceed 100")
	}
	special := c.EntryFunctions + c.IRQEntryFunctions + c.NoinstrFunctions + c.KprobesTextFunctions + 1
	if special >= c.Functions {
		return cfgErr("functions", "%d functions cannot hold the %d entry/noinstr/kprobes-text functions plus ordinary ones", c.Functions, special)
	}
	if c.Blacklist > c.Functions-special {
		return cfgErr("blacklist", "%d NOKPROBE entries but only %d ordinary functions", c.Blacklist, c.Functions-special)
	}
	if c.Modules > 64 {
		return cfgErr("modules", "at most 64 (got %d)", c.Modules)
	}
	if c.Modules > 0 && c.ModuleFunctions < 1 {
		return cfgErr("module-functions", "modules need at least one function")
	}
	if !(c.ProbeTargetsAt >= 0 && c.ProbeTargetsAt <= 1) {
		return cfgErr("probe-targets-at", "must be a fraction in [0, 1] (got %g)", c.ProbeTargetsAt)
	}
	if !(c.ObjectFunctionsMedian >= 1 && c.ObjectFunctionsMedian <= 4096) {
		return cfgErr("object-functions-median", "must be in [1, 4096] (got %g)", c.ObjectFunctionsMedian)
	}
	if !(c.ObjectFunctionsSigma >= 0 && c.ObjectFunctionsSigma <= 4) {
		return cfgErr("object-functions-sigma", "must be in [0, 4] (got %g)", c.ObjectFunctionsSigma)
	}
	if err := c.Padding.validate(); err != nil {
		return err
	}
	if c.SampleFunctions > 1_000_000 {
		return cfgErr("sample-functions", "at most 1000000 (got %d)", c.SampleFunctions)
	}
	if c.ProbeTargets > 1_000_000 {
		return cfgErr("probe-targets", "at most 1000000 (got %d)", c.ProbeTargets)
	}
	return nil
}

var jumpKindNames = [4]string{"nop2", "nop5", "jmp8", "jmp32"}

// ParseJumpMix parses "nop2=35,nop5=40,jmp8=10,jmp32=15" (missing kinds are 0).
func ParseJumpMix(s string) ([4]float64, error) {
	var mix [4]float64
	var seen [4]bool
	sum := 0.0
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return mix, cfgErr("jump-mix", "want KIND=PERCENT pairs such as nop2=35, got %q", part)
		}
		i := -1
		for j, n := range jumpKindNames {
			if n == k {
				i = j
			}
		}
		if i < 0 {
			return mix, cfgErr("jump-mix", "unknown site kind %q (nop2, nop5, jmp8, jmp32)", k)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return mix, cfgErr("jump-mix", "%s: %q is not a finite non-negative number", k, v)
		}
		if f > 100 {
			return mix, cfgErr("jump-mix", "%s: %g is not a percentage 0..100", k, f)
		}
		if seen[i] {
			return mix, cfgErr("jump-mix", "%s given twice", k)
		}
		seen[i] = true
		mix[i] = f
		sum += f
	}
	// The profiles' measured mixes are rounded to 0.1 (Debian 6.1's sums
	// to 100.1).
	if math.Abs(sum-100) > 0.5 {
		return mix, cfgErr("jump-mix", "the percentages sum to %g, want 100 (kinds not given are 0)", sum)
	}
	return mix, nil
}

// FormatJumpMix renders a mix in ParseJumpMix syntax.
func FormatJumpMix(m [4]float64) string {
	var parts []string
	for i, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%g", jumpKindNames[i], v))
	}
	return strings.Join(parts, ",")
}

// Debian61Config is a synthetic kernel calibrated to the real Debian
// bookworm kernel kpsim pins (linux-image-6.1.0-57-amd64, 6.1.192-3), from
// counts its loader reads: 47,089 core-text functions (log-normal sizes,
// median 112 B, shape 1.18, largest 12.9 KiB), 2,460 init functions,
// 6,299 jump entries over 2,821 keys (52% NOP2, 45% NOP5, 2% JMP8, 1%
// JMP32; 9% default-true), 4,085 static-call sites over 656 keys (0.7%
// tail), 7,743 bug entries, 178 NOKPROBE entries, 600 exception entries,
// 86% of functions traced, no IBT, no loaded modules (the real image
// loads none). It lets a user run the synthetic model's controlled
// experiments at the real kernel's sizes.
func Debian61Config() Config {
	c := DefaultConfig()
	c.Functions, c.InitFunctions = 47089, 2460
	c.SizeMedian, c.SizeSigma, c.MaxSize = 112, 1.18, 16384
	c.JumpEntries, c.JumpKeys, c.JumpBranchPercent = 6299, 2821, 8.9
	c.JumpMix = [4]float64{51.8, 45.0, 2.2, 1.1}
	c.StaticCallSites, c.StaticCallKeys, c.StaticCallTailPercent = 4085, 656, 0.7
	c.BugEntries, c.Blacklist = 7743, 178
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 45, 54, 156, 0
	c.TracedPercent = 86.1
	c.UaccessPercent = 1.3 // one exception entry per uaccess function: ~600
	c.Modules = 0
	c.IBT = false
	return c
}

// ConfigFor is the reference configuration of generation g, the
// synthetic default of kpsim's commands for that generation:
//
//   - Gen61 (and GenUnknown): DefaultConfig, the distro-sized 6.1 image
//     every 6.1 figure was made on, byte for byte, with Gen set.
//   - Gen612: Debian's 6.12.117+deb13-amd64 at its own proportions
//     (Debian612Config).
//   - Gen73: Debian's 7.3-amd64 at its own proportions (Debian73Config),
//     the kernel the series was written on.
func ConfigFor(g image.Generation) Config {
	switch g {
	case image.Gen612:
		return Debian612Config()
	case image.Gen73:
		return Debian73Config()
	}
	c := DefaultConfig()
	c.Gen = image.Gen61
	return c
}

// postCallPadding is what the 6.12 and 7.3 profiles keep of DefaultConfig
// and what they change to the build facts both Debian configs share
// (config-6.12.117+deb13-amd64 and 7.3-amd64/config): CONFIG_X86_KERNEL_IBT=y
// (ENDBR64 at every function, the __fentry__ call at +4),
// CONFIG_CALL_PADDING=y with CONFIG_FUNCTION_PADDING_BYTES=16 and
// CONFIG_FUNCTION_ALIGNMENT=16, CONFIG_MITIGATION_RETPOLINE=y and
// CONFIG_MITIGATION_RETHUNK=y, returns patched to "ret; int3" at boot as
// on the default boot CPU (sapphire-rapids: kpsim image --kernel says
// "returns ret"). Not measured, kept from DefaultConfig: the modules
// (kpsim reads none from a real image: four distro-sized ones, so the
// module paths are exercised), the instruction mix percentages (loop to
// entry, indirect jump, vzeroupper), the name shape, the
// functions-per-object shape (measured on 6.1) and the batch sample.
func postCallPadding(g image.Generation) Config {
	c := DefaultConfig()
	c.Gen = g
	c.IBT, c.CallPadding = true, true
	c.Retpoline, c.RetThunk, c.ReturnsPatched = true, true, true
	c.KprobesTextFunctions = 0 // both images: __kprobes_text is empty
	return c
}

// Debian73Config is Debian's 7.3 kernel (linux-image-7.3-amd64, 7.3~rc7)
// at its own proportions, unscaled. Every figure is measured on the real
// image as built (kpsim's loader, --cpu none; TestDebian73ProportionsReal
// measures them again):
//
//   - 66,067 core-text functions with a size, __pfx_ excluded (the
//     loader's IBT vote counts the same 66,067 and finds ENDBR64 on
//     46,236 of them before boot sealing); 3,962 are __SCT__ static-call
//     trampolines, which the generator adds one per static-call key, so
//     Functions is 66,067 - 3,962 = 62,105; 2,862 init functions;
//   - sizes (next-symbol distances from the kallsyms tables): median 112
//     B, log-normal shape 1.28 (ln(p90/p50)/1.2816), largest 20,880 B;
//   - 10,328 jump entries over 6,289 keys, as assembled 56.5% NOP2, 40.3%
//     NOP5, 2.2% JMP8, 1.0% JMP32, 11.5% with the branch bit;
//   - 10,439 static-call sites over 3,825 keys, 2.9% tail calls;
//   - 11,169 bug entries (16-byte struct bug_entry with the format field
//     of HAVE_ARCH_BUG_FORMAT: image.BugEntryLayoutFor(Gen73, true); the
//     generator emits decoded entries, whose layout the generation names),
//     224 NOKPROBE entries, 787 exception entries (UaccessPercent 1.6:
//     one entry per uaccess function, fitted to give ~787), 49,975
//     __mcount_loc entries = 75.6% of the core functions (the ratio
//     Debian61Config's TracedPercent is; here TracedPercent is 77, fitted
//     so that the generated image's ratio is 75.6%: the generator traces
//     no entry or noinstr function and no trampoline, which the core
//     count includes);
//   - 46 functions in the entry text outside __irqentry_text, 56 in
//     __irqentry_text, 229 in .noinstr.text, none in .kprobes.text;
//   - 58,214 __pfx_ symbols, 55,397 of them before a core function: every
//     C function but the asm entry code has one (the generator pads every
//     function but the entry and irqentry zones', thunks and
//     trampolines).
func Debian73Config() Config {
	c := postCallPadding(image.Gen73)
	c.Functions, c.InitFunctions = 62105, 2862
	c.SizeMedian, c.SizeSigma, c.MaxSize = 112, 1.30, 20880
	c.JumpEntries, c.JumpKeys, c.JumpBranchPercent = 10328, 6289, 11.5
	c.JumpMix = [4]float64{56.5, 40.3, 2.2, 1.0}
	c.StaticCallSites, c.StaticCallKeys, c.StaticCallTailPercent = 10439, 3825, 2.9
	c.BugEntries, c.Blacklist = 11169, 224
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions = 46, 56, 229
	c.TracedPercent = 77   // gives 75.6% of the core functions (above)
	c.UaccessPercent = 1.6 // gives ~787 exception entries
	return c
}

// Debian612Config is Debian's 6.12 kernel (linux-image-6.12.117+deb13-amd64)
// at its own proportions, unscaled, measured as Debian73Config's figures
// are (TestDebian612ProportionsReal): 56,386 core functions of which 3,764
// __SCT__ trampolines (Functions 52,622), 2,662 init functions; sizes
// median 112 B, shape 1.19, largest 15,632 B; 9,241 jump entries over
// 5,924 keys (55.5% NOP2, 41.9% NOP5, 1.9% JMP8, 0.7% JMP32; 6.4% branch);
// 7,690 static-call sites over 3,611 keys (3.7% tail); 9,852 bug entries
// (12-byte bug_entry: BugEntryLayoutFor(Gen612, true)), 221 NOKPROBE
// entries, 671 exception entries, 45,297 __mcount_loc entries (80.3% of
// the core functions: TracedPercent 82.4 gives that ratio, as for 7.3);
// 46 entry, 55 irqentry, 206 noinstr functions; 51,844 __pfx_ symbols.
func Debian612Config() Config {
	c := postCallPadding(image.Gen612)
	c.Functions, c.InitFunctions = 52622, 2662
	c.SizeMedian, c.SizeSigma, c.MaxSize = 112, 1.22, 15632
	c.JumpEntries, c.JumpKeys, c.JumpBranchPercent = 9241, 5924, 6.4
	c.JumpMix = [4]float64{55.5, 41.9, 1.9, 0.7}
	c.StaticCallSites, c.StaticCallKeys, c.StaticCallTailPercent = 7690, 3611, 3.7
	c.BugEntries, c.Blacklist = 9852, 221
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions = 46, 55, 206
	c.TracedPercent = 82.4  // gives 80.3% of the core functions (above)
	c.UaccessPercent = 1.65 // gives ~671 exception entries
	return c
}

// ProfileNames are the --profile names.
var ProfileNames = []string{"reference", "debian-6.1"}

// Profile is the named starting configuration (--profile) for generation
// g: reference is ConfigFor(g); debian-6.1 is Debian61Config, a 6.1
// profile (Gen61), which refuses another generation.
func Profile(name string, g image.Generation) (Config, error) {
	switch name {
	case "reference":
		return ConfigFor(g), nil
	case "debian-6.1":
		if g != image.Gen61 && g != image.GenUnknown {
			return Config{}, fmt.Errorf("profile debian-6.1 is a 6.1 kernel's; it does not model %s", g)
		}
		c := Debian61Config()
		c.Gen = image.Gen61
		return c, nil
	}
	return Config{}, fmt.Errorf("unknown profile %q (reference, debian-6.1)", name)
}
