package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/elfload"
	"github.com/kpsim/kpsim/image/kconfig"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/image/synth"
)

// imageFlags are the flags every image-taking command shares: the
// synthetic generator's knobs (loaders for real kernels add --kernel later).
type imageFlags struct {
	cfg     synth.Config
	seed    uint64
	jumpMix string
	kernel  string
	profile string
	cpu     string
	noCache bool
	// kernelVersion is --kernel-version (a generation), kconfig --kconfig.
	kernelVersion string
	kconfig       string
	// kconfigReaders are the --kconfig options the command itself reads
	// (the BPF layer's CONFIG_FPROBE); on a synthetic image every other
	// option is refused.
	kconfigReaders []string
	fs             *flag.FlagSet
	// record keeps the boot-patched sites of a --kernel image in booted.
	record bool
	booted *elfload.Booted
	mods   moduleFlags // --modules, --modules-dir (modules.go)
	// err is a bad --profile, found before the flags were defined and
	// reported when they are parsed.
	err error
}

// explicit reports whether the flag was given on the command line.
func (f *imageFlags) explicit(name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			set = true
		}
	})
	return set
}

// synthetic reports whether the image comes from the generator.
func (f *imageFlags) synthetic() bool { return f.kernel == "" || f.kernel == "synthetic" }

// defaultGen is the generation of the synthetic image when
// --kernel-version does not name one: 7.3, the kernel the series was
// written on (synth.ConfigFor(image.Gen73), Debian's 7.3 proportions).
const defaultGen = image.Gen73

func addImageFlags(fs *flag.FlagSet) *imageFlags {
	return addImageFlagsProfile(fs, synth.ConfigFor(defaultGen))
}

// flagValue finds --NAME VALUE (or -NAME, =VALUE) in args before the
// flags are defined; the last one wins, as in flag.Parse.
func flagValue(args []string, name, def string) string {
	v := def
	for i, a := range args {
		switch {
		case a == "--"+name || a == "-"+name:
			if i+1 < len(args) {
				v = args[i+1]
			}
		case strings.HasPrefix(a, "--"+name+"="):
			v = strings.TrimPrefix(a, "--"+name+"=")
		case strings.HasPrefix(a, "-"+name+"="):
			v = strings.TrimPrefix(a, "-"+name+"=")
		}
	}
	return v
}

// profileOf finds --profile NAME and --kernel-version GEN in args before
// the flags are defined, since the profile of that generation supplies
// the other flags' defaults: reference is the generation's
// synth.ConfigFor (7.3 without --kernel-version), debian-6.1 the 6.1
// calibration. A --kernel-version that does not parse is left to load,
// which reports it (it applies to --kernel images alike).
func profileOf(args []string) (string, synth.Config, error) {
	name := flagValue(args, "profile", "reference")
	if !slices.Contains(synth.ProfileNames, name) {
		return "", synth.Config{}, usagef("--profile: unknown profile %q (%s)", name, strings.Join(synth.ProfileNames, ", "))
	}
	gen := defaultGen
	if v := flagValue(args, "kernel-version", ""); v != "" {
		if g, err := image.ParseGeneration(v); err == nil {
			gen = g
		}
	} else if name == "debian-6.1" {
		gen = image.Gen61
	}
	cfg, err := synth.Profile(name, gen)
	if err != nil {
		return "", synth.Config{}, usagef("--profile: %v", err)
	}
	return name, cfg, nil
}

// newImageFlagSet is the flag set of command c that reads an image: the
// image flags of the profile args name.
func newImageFlagSet(c string, args []string, stdout io.Writer) (*flag.FlagSet, *imageFlags) {
	fs := newFlagSet(c, stdout)
	return fs, addImageFlagsFor(fs, args)
}

// addImageFlagsFor defines the image flags with the defaults of the
// profile named in args. An unknown profile is the error parse returns.
func addImageFlagsFor(fs *flag.FlagSet, args []string) *imageFlags {
	name, cfg, err := profileOf(args)
	if err != nil {
		f := addImageFlags(fs)
		f.err = err
		return f
	}
	f := addImageFlagsProfile(fs, cfg)
	f.profile = name
	return f
}

// parse parses args into the flag set (an unknown --profile first).
func (f *imageFlags) parse(args []string, stdout io.Writer) error {
	if f.err != nil {
		return f.err
	}
	if err := parse(f.fs, args, stdout); err != nil {
		return err
	}
	if f.synthetic() {
		return f.mods.synthCheck() // --modules NAME is for --kernel PATH
	}
	return nil
}

func addImageFlagsProfile(fs *flag.FlagSet, base synth.Config) *imageFlags {
	f := &imageFlags{cfg: base, fs: fs}
	c := &f.cfg
	fs.StringVar(&f.profile, "profile", "reference", "synthetic starting point: reference (the defaults below: the --kernel-version generation's, Debian's 7.3 proportions without it) or debian-6.1 (calibrated to the pinned Debian 6.1 kernel's counts); other flags override it")
	fs.StringVar(&f.kernel, "kernel", "synthetic", "kernel to model: a bzImage (vmlinuz) or vmlinux ELF path, or synthetic (the generator and the flags below)")
	fs.Uint64Var(&f.seed, "seed", c.Seed, "generator seed: the same seed gives a byte-identical image")
	fs.IntVar(&c.Functions, "functions", c.Functions, "core-text functions (entry, noinstr and kprobes-text zones included)")
	fs.IntVar(&c.InitFunctions, "init-functions", c.InitFunctions, "functions in .init.text")
	fs.IntVar(&c.SizeMedian, "size-median", c.SizeMedian, "median function size in bytes (log-normal)")
	fs.Float64Var(&c.SizeSigma, "size-sigma", c.SizeSigma, "log-normal shape of function sizes")
	fs.IntVar(&c.MinSize, "min-size", c.MinSize, "smallest function in bytes")
	fs.IntVar(&c.MaxSize, "max-size", c.MaxSize, "largest function in bytes")
	fs.IntVar(&c.JumpEntries, "jump-entries", c.JumpEntries, "jump-label sites in vmlinux (core + init text)")
	fs.IntVar(&c.JumpKeys, "jump-keys", c.JumpKeys, "static keys the vmlinux jump-label sites belong to")
	fs.StringVar(&f.jumpMix, "jump-mix", synth.FormatJumpMix(c.JumpMix), "as-assembled jump-label site mix in percent")
	fs.Float64Var(&c.JumpBranchPercent, "jump-branch-percent", c.JumpBranchPercent, "percent of static keys that are default-true")
	fs.IntVar(&c.StaticCallSites, "static-calls", c.StaticCallSites, "static-call sites in vmlinux")
	fs.IntVar(&c.StaticCallKeys, "static-call-keys", c.StaticCallKeys, "static calls (keys and __SCT__ trampolines)")
	fs.Float64Var(&c.StaticCallTailPercent, "static-call-tail-percent", c.StaticCallTailPercent, "percent of static-call sites that are tail calls (jmp)")
	fs.IntVar(&c.BugEntries, "bug-entries", c.BugEntries, "__bug_table entries in vmlinux")
	fs.IntVar(&c.Blacklist, "blacklist", c.Blacklist, "NOKPROBE_SYMBOL entries (_kprobe_blacklist)")
	fs.IntVar(&c.EntryFunctions, "entry-functions", c.EntryFunctions, "functions in the entry text")
	fs.IntVar(&c.IRQEntryFunctions, "irqentry-functions", c.IRQEntryFunctions, "functions in the irqentry text")
	fs.IntVar(&c.NoinstrFunctions, "noinstr-functions", c.NoinstrFunctions, "functions in .noinstr.text")
	fs.IntVar(&c.KprobesTextFunctions, "kprobes-text-functions", c.KprobesTextFunctions, "functions in .kprobes.text")
	f.addModuleFlags(fs)
	fs.IntVar(&c.ModuleFunctions, "module-functions", c.ModuleFunctions, "functions per module")
	fs.IntVar(&c.ModuleInitFunctions, "module-init-functions", c.ModuleInitFunctions, "init functions per module")
	fs.IntVar(&c.ModuleJumpEntries, "module-jump-entries", c.ModuleJumpEntries, "jump-label sites per module")
	fs.IntVar(&c.ModuleStaticCallSites, "module-static-calls", c.ModuleStaticCallSites, "static-call sites per module")
	fs.IntVar(&c.ModuleBugEntries, "module-bug-entries", c.ModuleBugEntries, "bug entries per module")
	fs.Float64Var(&c.TracedPercent, "traced-percent", c.TracedPercent, "percent of functions with a __fentry__ call")
	fs.Float64Var(&c.UaccessPercent, "uaccess-percent", c.UaccessPercent, "percent of functions with stac/clac and an exception-table entry")
	fs.Float64Var(&c.LoopToEntryPercent, "loop-to-entry-percent", c.LoopToEntryPercent, "percent of functions that jump back into the bytes after the entry probe point")
	fs.Float64Var(&c.IndirectJumpPercent, "indirect-jump-percent", c.IndirectJumpPercent, "percent of functions with an indirect jump")
	fs.Float64Var(&c.VzeroupperPercent, "vzeroupper-percent", c.VzeroupperPercent, "percent of functions ending with vzeroupper")
	fs.Float64Var(&c.DupNamePercent, "dup-name-percent", c.DupNamePercent, "percent of functions with a name other files use too")
	fs.Float64Var(&c.ClonePercent, "clone-percent", c.ClonePercent, "percent of functions with a compiler-clone suffix (.isra.0, .cold, ...)")
	fs.BoolVar(&c.IBT, "ibt", c.IBT, "CONFIG_X86_KERNEL_IBT: functions start with ENDBR64")
	fs.BoolVar(&c.Retpoline, "retpoline", c.Retpoline, "CONFIG_RETPOLINE: indirect branches through thunks")
	fs.BoolVar(&c.RetThunk, "rethunk", c.RetThunk, "CONFIG_RETHUNK: returns built as jmp __x86_return_thunk")
	fs.BoolVar(&c.CallPadding, "call-padding", c.CallPadding, "CONFIG_CALL_PADDING: 16 NOPs (a __pfx_ symbol) before every C function")
	fs.BoolVar(&c.ReturnsPatched, "returns-patched", c.ReturnsPatched, "synthetic images: boot patched return thunks to ret; int3 (with --kernel the --cpu decides; an explicit value must agree with it)")
	fs.BoolVar(&f.noCache, "no-cache", false, "bypass every cache (also KPSIM_NO_CACHE=1): generate the synthetic image, build the kallsyms tables and, with --kernel, decompress and load the kernel again, instead of reading them from $KPSIM_CACHE_DIR (default: the user cache dir's kpsim/; entries keyed by every input and the kpsim build)")
	fs.StringVar(&f.cpu, "cpu", "", "boot CPU whose boot-time patching (paravirt, retpolines, returns, alternatives) the --kernel text goes through: "+strings.Join(alternative.CPUNames(), ", ")+", host (this machine: /proc/cpuinfo flags and bugs), or none for the text as built (default "+alternative.DefaultCPU+" with --kernel; synthetic images: sets --returns-patched from the CPU's return mode)")
	fs.StringVar(&f.kernelVersion, "kernel-version", "", "kernel generation to model: 6.1, 6.12 or 7.3 (a release such as 6.12.117 names its generation); with --kernel the image's linux_banner decides unless this is given (an image of another release is refused without it); synthetic images: the generation whose reference profile shapes the image (default 7.3; 6.1 is the image every 6.1 figure was made on)")
	fs.StringVar(&f.kconfig, "kconfig", "", "with --kernel: build options that override the kernel's config (embedded, or the config-KVER file beside the image) and what the image shows: OPTION=VALUE,... (X86_KERNEL_IBT=y,CALL_PADDING=y,FUNCTION_ALIGNMENT=16,...); the BPF commands read FPROBE=y|n from it (recorded in the report), on any image")
	fs.IntVar(&c.ProbeTargets, "probe-targets", c.ProbeTargets, "add N generated probe-target functions (the batch kprobe sample)")
	fs.BoolVar(&c.ProbeTargetsTraced, "probe-targets-traced", c.ProbeTargetsTraced, "build the probe targets with __fentry__ calls")
	fs.Float64Var(&c.ProbeTargetsAt, "probe-targets-at", c.ProbeTargetsAt, "place the probe targets after this fraction of .text's functions (link order; 1 = after _etext)")
	fs.IntVar(&c.SampleFunctions, "sample-functions", c.SampleFunctions, "functions the batch sample (kernel/kprobes_many.c) adds to vmlinux; run many probes --n of them")
	fs.Float64Var(&c.ObjectFunctionsMedian, "object-functions-median", c.ObjectFunctionsMedian, "median functions per object file (gas NOPs pad inside an object, the linker's int3 between)")
	fs.Float64Var(&c.ObjectFunctionsSigma, "object-functions-sigma", c.ObjectFunctionsSigma, "log-normal shape of the functions-per-object distribution")
	fs.Func("padding", "gap fill: toolchain (gas NOPs inside an object, linker int3 between) or int3 (everywhere; a counterfactual)", func(s string) error {
		c.Padding = synth.Padding(s)
		return nil
	})
	return f
}

// load builds the image the flags describe. Config errors are usage
// errors naming the flag.
func (f *imageFlags) load() (*image.Kernel, *synth.Truth, error) {
	var cpu *alternative.CPU
	if f.cpu != "" && f.cpu != alternative.CPUNone {
		c, err := alternative.LookupCPU(f.cpu)
		if err != nil {
			return nil, nil, usagef("--cpu: %v", err)
		}
		cpu = c
	}
	if !f.synthetic() {
		name := f.cpu
		if name == "" {
			name = alternative.DefaultCPU
			cpu, _ = alternative.LookupCPU(name)
		}
		if f.explicit("returns-patched") {
			// apply_returns writes ret; int3 only on a CPU without
			// X86_FEATURE_RETHUNK.
			if want := cpu != nil && !cpu.WantsRethunk(); f.cfg.ReturnsPatched != want {
				return nil, nil, usagef("--returns-patched=%v: with --kernel the boot CPU decides the returns, and --cpu %s %s", f.cfg.ReturnsPatched, name, returnsOf(cpu))
			}
		}
		if err := f.preflight(); err != nil { // --modules, before the kernel is read (modules.go)
			return nil, nil, err
		}
		o := load.Options{CPU: name, Record: f.record, NoCache: f.noCache}
		if f.kernelVersion != "" {
			g, err := image.ParseGeneration(f.kernelVersion)
			if err != nil {
				return nil, nil, usagef("--kernel-version: %v", err)
			}
			o.Gen = g
		}
		if f.kconfig != "" {
			kc, err := kconfig.ParseOverrides(f.kconfig, append(slices.Clone(elfload.ConfigOptions), f.kconfigReaders...), elfload.IntConfigOptions)
			if err != nil {
				return nil, nil, usagef("--kconfig: %v", err)
			}
			o.KConfigOverride = kc
		}
		r, err := load.OpenWith(f.kernel, o)
		if err != nil {
			return nil, nil, usagef("--kernel: %v", err)
		}
		f.booted = r.Booted
		if err := f.loadModules(r.Kernel); err != nil {
			return nil, nil, err
		}
		return r.Kernel, nil, nil
	}
	if cpu != nil {
		want := !cpu.WantsRethunk()
		if f.explicit("returns-patched") && f.cfg.ReturnsPatched != want {
			return nil, nil, usagef("--returns-patched=%v contradicts --cpu %s, which %s", f.cfg.ReturnsPatched, cpu.Name, returnsOf(cpu))
		}
		f.cfg.ReturnsPatched = want
	}
	if err := f.mods.synthCheck(); err != nil {
		return nil, nil, err
	}
	// The profile (profileOf) was chosen by --kernel-version; a
	// configuration without a generation (DefaultConfig) is 6.1's.
	gen := f.cfg.Gen
	if gen == image.GenUnknown {
		gen = image.Gen61
	}
	if f.kernelVersion != "" {
		g, err := image.ParseGeneration(f.kernelVersion)
		if err != nil {
			return nil, nil, usagef("--kernel-version: %v", err)
		}
		if g != gen {
			return nil, nil, usagef("--kernel-version %s: the --profile %s image is %s's", g, f.profile, gen)
		}
	}
	if f.kconfig != "" {
		kc, err := kconfig.ParseOverrides(f.kconfig, append(slices.Clone(elfload.ConfigOptions), f.kconfigReaders...), elfload.IntConfigOptions)
		if err != nil {
			return nil, nil, usagef("--kconfig: %v", err)
		}
		for _, o := range slices.Sorted(maps.Keys(kc.Opts)) {
			if !slices.Contains(f.kconfigReaders, o) {
				takes := "no option"
				if len(f.kconfigReaders) > 0 {
					takes = strings.Join(f.kconfigReaders, ", ")
				}
				return nil, nil, usagef("--kconfig %s: on a synthetic image this command takes %s; the image's build options need --kernel (synthetic images take theirs from --ibt, --retpoline, --rethunk)", o, takes)
			}
		}
	}
	f.cfg.Seed = f.seed
	mix, err := parseJumpMix(f.jumpMix)
	if err != nil {
		return nil, nil, usagef("%s", err.Error())
	}
	f.cfg.JumpMix = mix
	k, truth, err := generateCached(f.cfg, f.noCache)
	var ce *synth.ConfigError
	if errors.As(err, &ce) {
		return nil, nil, usagef("%s", err.Error())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generating the image: %w", err)
	}
	k.Config.Gen = gen
	if cpu != nil {
		k.Config.CPU = cpu.Name
		k.Notes = append(k.Notes, fmt.Sprintf("--cpu %s on a synthetic image: the generator emits no paravirt, retpoline or alternative sites; the CPU decides the returns only (%s)", cpu.Name, returnsOf(cpu)))
	}
	return k, truth, nil
}

// returnsOf says what apply_returns leaves on cpu (nil: as built).
func returnsOf(cpu *alternative.CPU) string {
	switch {
	case cpu == nil:
		return "keeps the returns as built (jmp __x86_return_thunk)"
	case cpu.WantsRethunk():
		return "patches the returns to jmp " + cpu.ReturnThunk
	}
	return "patches the returns to ret; int3"
}

func parseJumpMix(s string) ([4]float64, error) { return synth.ParseJumpMix(s) }
