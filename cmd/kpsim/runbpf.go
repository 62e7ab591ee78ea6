package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
	"github.com/kpsim/kpsim/sim"
)

// bpfFlags are the flags the BPF scenarios share.
type bpfFlags struct {
	imf     *imageFlags
	gen     string
	cpus    int
	patches patchList
	format  string
	out     string
	cf      *costFlags
	ghz     *ghzFlag
	cmd     string
	jobs    int
	jobsSet func() bool
	sink    *atomicFile
	fs      *flag.FlagSet // for the files the flags name (fileSet)
	stdout  io.Writer
	// costInfo names the cost file of the weights start loaded (the
	// reports' costs field).
	costInfo scenarios.CostInfo
	// allowRefusals is --allow-refusals, on the commands that attach.
	allowRefusals bool
}

// addAllowRefusals adds --allow-refusals to a BPF command that attaches.
func (f *bpfFlags) addAllowRefusals(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowRefusals, "allow-refusals", false, allowRefusalsUsage)
}

// bpfRegimeWhy is why the BPF commands price with the cold weights by
// default, as their --cost-regime help says.
const bpfRegimeWhy = "each attach touches distinct items once (kallsyms_lookup_name of distinct names, ftrace_location of distinct addresses, each tracefs or /proc/kallsyms line read once), none repeated as test_kallsyms_perf repeats its names; ftrace_lookup_symbols' whole-table walk is a stream, priced the same in hot and cold (kallsyms.stream.tok)"

// newBPFFlagSet is the flag set of BPF command c with the shared flags.
func newBPFFlagSet(c string, args []string, stdout io.Writer) (*flag.FlagSet, *bpfFlags) {
	fs := newFlagSet(c, stdout)
	f := addBPFFlags(fs, args)
	f.cmd, f.fs, f.stdout = c, fs, stdout
	return fs, f
}

func addBPFFlags(fs *flag.FlagSet, args []string) *bpfFlags {
	f := &bpfFlags{imf: addImageFlagsFor(fs, args)}
	fs.StringVar(&f.gen, "bpf-kernel", "", "check that the image's generation is this one (6.1, 6.12 or 7.3) and refuse to run otherwise; the BPF paths always follow the image's generation (--kernel, --kernel-version)")
	// --kconfig is the image flags' (one set of config overrides); the
	// BPF layer reads FPROBE from it.
	f.imf.kconfigReaders = append(f.imf.kconfigReaders, "CONFIG_FPROBE")
	fs.IntVar(&f.cpus, "possible-cpus", 8, "num_possible_cpus() (fprobe rethook node preallocation), also the online CPUs every text_poke_sync IPIs (no hotplug)")
	fs.Var(&f.patches, "patches", "a run: none or comma-separated switches; repeatable")
	fs.StringVar(&f.format, "format", "table", "output: table or json")
	fs.StringVar(&f.out, "out", "", "write the report to this file (written whole or not at all; - is stdout; refused if it is an input file, another output, read-only or a device that takes no write)")
	f.cf = addCostFlags(fs, "cold", bpfRegimeWhy)
	f.ghz = addGHzFlag(fs)
	fs.IntVar(&f.jobs, "jobs", 0, "independent runs (switch sets, forms, kallsyms variants) to run at once (default: all cores; 1: one after another); the report is the same for every value")
	f.jobsSet = func() bool {
		set := false
		fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "jobs" })
		return set
	}
	return f
}

func (f *bpfFlags) options(defaults []string, stderr io.Writer) (scenarios.BPFOptions, []scenarios.RunSpec, *sim.CostTable, error) {
	o := scenarios.DefaultBPFOptions()
	if _, err := f.bpfGen(); err != nil {
		return o, nil, nil, err
	}
	var err error
	if o.Kconfig, err = scenarios.ParseKconfig(f.imf.kconfig); err != nil {
		return o, nil, nil, usagef("%s", err.Error())
	}
	if f.cpus <= 0 || f.cpus > 8192 {
		return o, nil, nil, usagef("--possible-cpus: want 1..8192 (NR_CPUS), got %d", f.cpus)
	}
	o.PossibleCPUs = f.cpus
	if f.jobs < 0 || f.jobs == 0 && f.jobsSet() {
		return o, nil, nil, usagef("--jobs: must be at least 1 (got %d)", f.jobs)
	}
	o.Jobs = f.jobs
	switch f.format {
	case "table", "json":
	default:
		return o, nil, nil, usagef("--format: want table or json, got %q", f.format)
	}
	costs, err := f.cf.load(stderr, f.cmd)
	if err != nil {
		return o, nil, nil, err
	}
	if f.costInfo, err = costsInfo(costs, *f.cf.file); err != nil {
		return o, nil, nil, err
	}
	if f.costInfo.Clock, err = f.ghz.clock(costs); err != nil {
		return o, nil, nil, err
	}
	o.Clock = f.costInfo.Clock
	ps := []string(f.patches)
	if len(ps) == 0 {
		ps = defaults
	}
	var specs []scenarios.RunSpec
	for _, p := range ps {
		ss, err := sim.ParseSwitches(p)
		if err != nil {
			return o, nil, nil, usagef("--patches %q: %s", p, err.Error())
		}
		specs = append(specs, scenarios.RunSpec{Name: ss.Name(), Switches: ss})
	}
	return o, specs, costs, nil
}

// bpfGen parses --bpf-kernel: "" (the image's generation) or one of the
// modelled generations. "6.10", the flag's old default (the rethook-era
// model of the session patches), is refused with its new name.
func (f *bpfFlags) bpfGen() (image.Generation, error) {
	if f.gen == "" {
		return image.GenUnknown, nil
	}
	if f.gen == "6.10" {
		return image.GenUnknown, usagef("--bpf-kernel 6.10: that model is now generation 6.12 (6.12.117), and the BPF paths follow the image's generation; give --kernel a 6.12 image (or name it with --kernel-version 6.12)")
	}
	g, err := image.ParseGeneration(f.gen)
	if err != nil {
		return image.GenUnknown, usagef("--bpf-kernel: %v", err)
	}
	return g, nil
}

// checkGen refuses a --bpf-kernel that contradicts the image's
// generation: the BPF layer (bpf, ftrace, fprobe) always follows the
// image, so the flag only asserts it.
func (f *bpfFlags) checkGen(k *image.Kernel) error {
	want, err := f.bpfGen()
	if err != nil || want == image.GenUnknown {
		return err
	}
	if have := k.Config.Gen.Effective(); have != want {
		how := "give --kernel an image of that generation (its generation is read from it; --kernel-version names it)"
		if f.imf.synthetic() {
			how = "the synthetic generator builds 6.1-shaped images only; give --kernel an image of that generation"
		}
		return usagef("--bpf-kernel %s contradicts the image's generation %s: the BPF paths follow the image; %s", want, have, how)
	}
	return nil
}

// start is every BPF command's preamble: the runs and weights, --out
// checked before any work, and the kernel loaded. The caller defers
// f.closeOut (also on error).
func (f *bpfFlags) start(defaults []string, stderr io.Writer) (scenarios.BPFOptions, []scenarios.RunSpec, *sim.CostTable, *image.Kernel, error) {
	o, specs, costs, err := f.options(defaults, stderr)
	if err != nil {
		return o, nil, nil, nil, err
	}
	if err := f.openOut(); err != nil {
		return o, nil, nil, nil, err
	}
	k, _, err := f.imf.load()
	if err != nil {
		return o, nil, nil, nil, err
	}
	if err := f.checkGen(k); err != nil {
		return o, nil, nil, nil, err
	}
	if err := kallsymsCached(k, f.imf.noCache); err != nil {
		return o, nil, nil, nil, err
	}
	return o, specs, costs, k, nil
}

// bpfRun runs a BPF scenario on what start gave and returns its report
// (written as JSON) and the report's table writer (scenarios/report).
type bpfRun func(o scenarios.BPFOptions, specs []scenarios.RunSpec, costs *sim.CostTable, k *image.Kernel) (rep any, table func(io.Writer) error, err error)

// report is every BPF command's body: start, the scenario run, and the
// report it returns emitted.
func (f *bpfFlags) report(stdout, stderr io.Writer, defaults []string, run bpfRun) error {
	o, specs, costs, k, err := f.start(defaults, stderr)
	defer f.closeOut()
	if err != nil {
		return err
	}
	rep, table, err := run(o, specs, costs, k)
	if err != nil {
		return err
	}
	if err := f.emit(stdout, rep, table); err != nil {
		return err
	}
	var warnings []string
	switch r := rep.(type) {
	case *scenarios.BPFReport:
		warnings = r.AttachWarnings()
	case *scenarios.TracingMultiReport:
		if r.K == 0 {
			warnings = []string{"attached no function: the image has no uniquely named traceable function to attach"}
		}
	}
	return attachOutcome(stderr, f.cmd, warnings, f.allowRefusals)
}

// openOut checks --out before any work (a bad path costs nothing); the
// caller defers f.closeOut.
func (f *bpfFlags) openOut() error {
	files, err := newFileSet(f.fs, f.stdout)
	if err != nil {
		return err
	}
	f.sink, err = files.report(f.out)
	return err
}

func (f *bpfFlags) closeOut() { f.sink.abort() }

// emit writes a report as table or JSON to stdout or --out.
func (f *bpfFlags) emit(stdout io.Writer, v any, table func(io.Writer) error) error {
	return emitReport(f.sink, stdout, func(w io.Writer) error {
		if f.format == "json" {
			return writeJSON(w, v)
		}
		return table(w)
	})
}

var sessionDefaultRuns = []string{"none", "libbpf-exact-syms", "libbpf-exact-syms,ftrace-single-lookup"}

func runSession(args []string, stdout, stderr io.Writer) error {
	fs, f := newBPFFlagSet("run session", args, stdout)
	f.addAllowRefusals(fs)
	programs := fs.Int("n", 50, "kprobe.session programs (formerly --programs), each on one distinct traceable function by exact name")
	pairs := fs.Bool("pairs", false, "add a run of the classic kprobe + kretprobe perf events on the same functions (2P events)")
	if err := f.imf.parse(args, stdout); err != nil {
		return err
	}
	if *programs <= 0 || *programs > 1<<20 {
		return usagef("--n: want 1..%d, got %d", 1<<20, *programs)
	}
	return f.report(stdout, stderr, sessionDefaultRuns, func(o scenarios.BPFOptions, specs []scenarios.RunSpec, costs *sim.CostTable, k *image.Kernel) (any, func(io.Writer) error, error) {
		rep, err := scenarios.RunSession(k, scenarios.SessionOptions{BPF: o, Programs: *programs, Pairs: *pairs, Runs: specs}, costs)
		if rep != nil {
			rep.Costs = f.costInfo
		}
		return rep, func(w io.Writer) error { return report.BPFTable(w, rep) }, err
	})
}

func runMultiScenario(args []string, stdout, stderr io.Writer) error {
	fs, f := newBPFFlagSet("run multi", args, stdout)
	f.addAllowRefusals(fs)
	pattern := fs.String("pattern", "", "a glob (libbpf's pattern path); empty: only the syms form")
	k0 := fs.Int("n", 0, "K (formerly --k): functions in the syms form (0 = every traceable function)")
	if err := f.imf.parse(args, stdout); err != nil {
		return err
	}
	for _, a := range args {
		if a == "--pattern" || a == "-pattern" || strings.HasPrefix(a, "--pattern=") || strings.HasPrefix(a, "-pattern=") {
			if *pattern == "" {
				return usagef("--pattern: empty pattern (libbpf: kprobe multi pattern is invalid)")
			}
		}
	}
	if *k0 < 0 || *k0 > bpf.MaxKprobeMultiCnt {
		return usagef("--n: want 0..%d (MAX_KPROBE_MULTI_CNT), got %d", bpf.MaxKprobeMultiCnt, *k0)
	}
	return f.report(stdout, stderr, []string{"none", "libbpf-exact-syms,ftrace-single-lookup"}, func(o scenarios.BPFOptions, specs []scenarios.RunSpec, costs *sim.CostTable, k *image.Kernel) (any, func(io.Writer) error, error) {
		rep, err := scenarios.RunMulti(k, scenarios.SessionOptions{BPF: o, Pattern: *pattern, Functions: *k0, Runs: specs}, costs)
		if rep != nil {
			rep.Costs = f.costInfo
		}
		return rep, func(w io.Writer) error { return report.BPFTable(w, rep) }, err
	})
}

func parseKList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "max" {
			out = append(out, scenarios.KMax)
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, usagef("--n: %q is not a number", p)
		}
		if v <= 0 || v > bpf.MaxKprobeMultiCnt {
			return nil, usagef("--n: %d out of range 1..%d", v, bpf.MaxKprobeMultiCnt)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseVariantList(s string) ([]kallsyms.Variant, error) {
	if s == "" {
		return kallsyms.AllVariants(), nil
	}
	var out []kallsyms.Variant
	for _, p := range strings.Split(s, ",") {
		v, err := kallsyms.ParseVariant(p)
		if err != nil {
			return nil, usagef("--variants: %s", err.Error())
		}
		out = append(out, v)
	}
	return out, nil
}

func runCrossover(args []string, stdout, stderr io.Writer) error {
	fs, f := newBPFFlagSet("run crossover", args, stdout)
	klist := fs.String("n", "1,10,100,500,1000,5000,10000,max", "batch sizes K (formerly --k), comma-separated; max = every uniquely named traceable function")
	variants := fs.String("variants", "", "kallsyms variants (default: all)")
	if err := f.imf.parse(args, stdout); err != nil {
		return err
	}
	ks, err := parseKList(*klist)
	if err != nil {
		return err
	}
	vs, err := parseVariantList(*variants)
	if err != nil {
		return err
	}
	return f.report(stdout, stderr, []string{"none"}, func(_ scenarios.BPFOptions, _ []scenarios.RunSpec, costs *sim.CostTable, k *image.Kernel) (any, func(io.Writer) error, error) {
		rep, err := scenarios.RunCrossover(k, ks, vs, costs, f.jobs)
		if err != nil {
			return nil, nil, usagef("%s", err.Error())
		}
		rep.Costs = f.costInfo
		return rep, func(w io.Writer) error { return report.CrossoverTable(w, rep) }, nil
	})
}

func runTracingMulti(args []string, stdout, stderr io.Writer) error {
	fs, f := newBPFFlagSet("run tracing-multi", args, stdout)
	f.addAllowRefusals(fs)
	k0 := fs.Int("n", 0, "K functions (formerly --k; 0 = every uniquely named traceable function; more than the image has attaches them all)")
	nrArgs := fs.Int("nr-args", scenarios.TracingMultiNrArgs, "arguments of every function (8 bytes each; the image has no BTF): the trampoline's size and JIT work")
	variants := fs.String("variants", "", "kallsyms variants (default: all)")
	if err := f.imf.parse(args, stdout); err != nil {
		return err
	}
	if *k0 < 0 || *k0 > bpf.MaxTracingMultiCnt {
		return usagef("--n: want 0..%d (MAX_TRACING_MULTI_CNT), got %d", bpf.MaxTracingMultiCnt, *k0)
	}
	if *nrArgs < 0 || *nrArgs > 6 {
		return usagef("--nr-args: want 0..6 (register arguments), got %d", *nrArgs)
	}
	vs, err := parseVariantList(*variants)
	if err != nil {
		return err
	}
	return f.report(stdout, stderr, []string{"none"}, func(_ scenarios.BPFOptions, _ []scenarios.RunSpec, costs *sim.CostTable, k *image.Kernel) (any, func(io.Writer) error, error) {
		rep, err := scenarios.RunTracingMulti(k, *k0, *nrArgs, vs, costs, f.jobs)
		if errors.Is(err, scenarios.ErrNoTracingMulti) {
			return nil, nil, usagef("run tracing-multi: %s", err.Error())
		}
		if err != nil {
			return nil, nil, err
		}
		rep.Weights, rep.Costs = costs.Describe(), f.costInfo
		return rep, func(w io.Writer) error {
			if err := report.TracingMultiTable(w, rep); err != nil {
				return err
			}
			fmt.Fprintln(w)
			report.WriteWeights(w, rep.Costs, rep.Weights)
			return nil
		}, nil
	})
}
