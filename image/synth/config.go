package synth

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Config sizes and shapes a synthetic kernel. Every count and mix is a
// field (and a kpsim flag); DefaultConfig sizes it like a current x86-64
// distro kernel. The defaults are orders of magnitude of such kernels'
// tables (J ≈ 10⁴–5·10⁴, S ≈ 10³–10⁴, B ≈ 10⁴–3·10⁴, K ≈ 10³; `kpsim
// image` prints a real one's); the real-kernel loader replaces them with
// counts read from a real image.
type Config struct {
	Seed uint64

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

// DefaultConfig is a distro-sized x86-64 kernel like Debian's 6.1 generic
// flavour (config of linux-image-6.1.0-57-amd64, 6.1.192-3): retpolines and
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
		mix[i] = f
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

// Profiles are the named starting configurations (--profile).
var Profiles = map[string]func() Config{
	"reference":  DefaultConfig,
	"debian-6.1": Debian61Config,
}
