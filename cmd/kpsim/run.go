package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	flag "github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
	"github.com/kpsim/kpsim/sim"
)

// patchList collects repeated --patches flags.
type patchList []string

func (p *patchList) String() string     { return strings.Join(*p, " ") }
func (p *patchList) Set(v string) error { *p = append(*p, v); return nil }
func (p *patchList) Type() string       { return "stringArray" }

// onePatchSet is --patches of a command that runs one switch set: a
// second --patches is refused rather than silently replacing the first.
type onePatchSet struct {
	v   string
	set bool
}

func (p *onePatchSet) String() string { return p.v }
func (p *onePatchSet) Type() string   { return "string" }
func (p *onePatchSet) Set(v string) error {
	if p.set {
		return fmt.Errorf("given twice (%q, then %q): this command runs one switch set (kpsim run many takes several)", p.v, v)
	}
	p.v, p.set = v, true
	return nil
}

// scenario is one scenario kpsim run runs.
type scenario struct {
	name, doc string
	run       func(args []string, stdout, stderr io.Writer) error
}

// scenarioTable lists every scenario, sorted by name: run dispatches
// through it, and kpsim list and run's help print it.
var scenarioTable = []scenario{
	{"crossover", "resolving K names: K kallsyms_lookup_name binary searches vs one ftrace_lookup_symbols walk, per kallsyms variant", runCrossover},
	{"kallsyms", "the kernel's test_kallsyms_perf: name-search hits and misses, sprint_symbol(_no_offset), a full walk, per lookup variant", runKallsymsScenario},
	{"many", "the batch kprobe sample: N generated functions, one kprobe each, register_kprobes then unregister_kprobes", runMany},
	{"multi", "one kprobe.multi link over K functions (pattern and syms forms)", runMultiScenario},
	{"session", "P kprobe.session programs by exact name, one link each, via libbpf; --pairs adds the classic kprobe + kretprobe perf events", runSession},
	{"tracing-multi", "fentry.multi attach by BTF id (7.3): every per-function component (kallsyms, BTF, trampoline, JIT, image, ftrace direct, text pokes) and the kallsyms share of the whole, per kallsyms variant", runTracingMulti},
}

func runRun(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintln(stdout, "usage: kpsim run SCENARIO [flags]\n\nScenarios:")
			for _, sc := range scenarioTable {
				fmt.Fprintf(stdout, "  %-8s %s\n", sc.name, sc.doc)
			}
			return errHelp
		}
		return usagef("missing scenario (kpsim list shows them)")
	}
	for _, sc := range scenarioTable {
		if sc.name == args[0] {
			return sc.run(args[1:], stdout, stderr)
		}
	}
	return usagef("unknown scenario %q (kpsim list shows them)", args[0])
}

func runMany(args []string, stdout, stderr io.Writer) error {
	return runManyWith(args, stdout, stderr, manyCaller{})
}

// manyCaller is what a sweep or report hands run many: where the report
// goes instead of the output, and the pool its runs share with the other
// points'.
type manyCaller struct {
	hook  func(*scenarios.ManyReport)
	pool  *scenarios.Pool
	files *fileSet // the sweep's outputs, which the scenario's inputs are checked against
}

func runManyWith(args []string, stdout, stderr io.Writer, caller manyCaller) error {
	fs, imf := newImageFlagSet("run many", args, stdout)
	o := scenarios.DefaultManyOptions()
	fs.IntVar(&o.N, "n", o.N, "with --targets generated: number of generated probe-target functions, one kprobe each")
	placement := fs.String("placement", string(o.Placement), "where each probe sits (every target kind; a target's own +OFF wins): entry, after-fentry or offset")
	fs.IntVar(&o.Offset, "offset", 0, "with --placement offset: the byte offset into each target")
	fs.BoolVar(&o.Traced, "traced", false, "build the generated targets with __fentry__ calls (entry probes then use kprobes on ftrace)")
	fs.IntVar(&o.ImageProbes, "image-probes", 0, "also probe this many of the image's own functions")
	fs.BoolVar(&o.Mixed, "mixed", false, "draw the image probes from every awkward class (mid-function, aggregated, blacklisted, reserved, ftrace, module, inside optimized regions)")
	fs.IntVar(&o.OptimizeEvery, "optimize-every", o.OptimizeEvery, "run the deferred optimizer after every N registrations (or enables)")
	fs.IntVar(&o.CPUs, "cpus", o.CPUs, "online CPUs: every text_poke_sync and every set_memory_* TLB flush interrupts the others (their per-CPU cycles scale with it)")
	targets := fs.String("targets", "generated", "generated (N sample functions added to the image), all-functions (every function), traceable (available_filter_functions, one line per ftrace record), or a FILE of targets (- for stdin): SYM, SYM+OFF, kprobe_events lines, available_filter_functions lines")
	fs.BoolVar(&o.ByAddress, "by-address", false, "with --targets all-functions: register by address instead of by name")
	order := fs.String("order", "file", "attach order: file (as listed), sorted (C-locale strcmp) or shuffle (Fisher-Yates with --seed)")
	via := fs.String("via", "", "front door: register_kprobes (default for generated targets), register_kprobe (default otherwise), kprobe_events (tracefs) or perf_kprobe (perf kprobe PMU)")
	enable := fs.String("enable", "none", "with --via kprobe_events: enable the events after registration: none, each (one write per event) or group (events/GRP/enable)")
	fs.IntVar(&o.LinesPerWrite, "lines-per-write", o.LinesPerWrite, "with --via kprobe_events: lines per write() (a failing line ends its write; the lines after it are lost, as in the kernel)")
	fs.IntVar(&o.BatchReport, "batch-report", 0, "report the cycles per probe of every batch of K accepted probes, fitted to a + b·N")
	probes := fs.String("probes", "", "write one line per target to FILE (- for stdout, with --out FILE for the report): target, address, symbol+offset, result, state and the deciding check (TSV; JSON lines with --format json)")
	var patches patchList
	fs.Var(&patches, "patches", "a run: a preset (none, series, all) or comma-separated switches; repeatable (default: none and series)")
	ablation := fs.Bool("ablation", false, "add, for every switch, a run with it alone and a run with the series minus it; the table starts with a summary, one line per switch (--detail adds the per-phase and per-run tables)")
	detail := fs.Bool("detail", false, "with --ablation and --format table: also print the per-phase, per-context and per-run tables of every run (json, csv and bench hold them anyway)")
	designs := fs.Bool("compare-designs", false, "run upstream, the series and the alternative designs (bigger hash, rhashtable, B-trees) side by side")
	format := fs.String("format", "table", "output: table, json, csv or bench (Go benchmark format for benchstat: -col /patches)")
	out := fs.String("out", "", "write the report to this file (written whole or not at all; - is stdout; refused if it is an input file, another output, read-only or a device that takes no write)")
	faults := fs.String("faults", "", "fault injection: POINT or POINT@N, comma-separated (kpsim list shows the points)")
	fs.IntVar(&o.Jobs, "jobs", 0, "runs to run at once (default: all cores, GOMAXPROCS; 1 runs them one after another); counts and digests are the same for every value")
	cf := addCostFlags(fs, "cold", "registration probes distinct functions")
	ghz := addGHzFlag(fs)
	allowRefusals := fs.Bool("allow-refusals", false, allowRefusalsUsage)
	sens := fs.Bool("sensitivity", false, "add a sensitivity table: how the headline ratio (the first run's task cycles over the series run's) moves as each weight crosses its documented range, and its range with every weight free at once (table and json formats)")
	if err := parseImageFlags(fs, imf, args, stdout, nil); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Jobs < 0 || set["jobs"] && o.Jobs == 0 {
		return usagef("--jobs: must be at least 1 (got %d)", o.Jobs)
	}
	o.Placement = scenarios.Placement(*placement)
	o.Order = scenarios.Order(*order)
	o.Enable = doors.EnableMode(*enable)
	o.Via = doors.Via(*via)
	kind, path := scenarios.ParseTargetKind(*targets)
	o.Targets = kind
	if kind != scenarios.TargetsGenerated {
		if set["n"] {
			return usagef("--n: applies to --targets generated only (the list gives %s's targets)", *targets)
		}
		if set["traced"] {
			return usagef("--traced: applies to --targets generated only")
		}
	}
	if set["offset"] && o.Placement != scenarios.PlaceOffset {
		return usagef("--offset: applies with --placement offset only")
	}
	if set["lines-per-write"] && o.FrontDoor() != doors.ViaKprobeEvents {
		return usagef("--lines-per-write: applies to --via kprobe_events only")
	}
	switch *format {
	case "table", "json", "csv", "bench":
	default:
		return usagef("--format: want table, json, csv or bench, got %q", *format)
	}
	if *detail && (!*ablation || *format != "table") {
		return usagef("--detail: applies to --ablation with --format table (the other reports hold every table already)")
	}
	if *sens && (*format == "csv" || *format == "bench" || *designs) {
		return usagef("--sensitivity: shown by --format table and json, not by --format %s%s", *format, map[bool]string{true: " or --compare-designs"}[*designs])
	}
	// The files are checked against each other before any is read.
	files := caller.files
	if files == nil {
		files = &fileSet{stdout: stdout}
	}
	if err := files.inputsOf(fs); err != nil {
		return err
	}
	if caller.hook == nil {
		if err := files.stdoutReport(*out); err != nil {
			return err
		}
	}
	sink, err := files.out("out", *out)
	if err != nil {
		return err
	}
	defer sink.abort()
	probeSink, err := files.out("probes", *probes)
	if err != nil {
		return err
	}
	defer probeSink.abort()
	if kind == scenarios.TargetsFile {
		ts, err := scenarios.ReadTargetFile(path, os.Stdin)
		if err != nil {
			return usagef("--targets: %s", err.Error())
		}
		o.FileTargets = ts
	}
	if err := o.Validate(); err != nil {
		return usagef("%s", err.Error())
	}
	if _, err := sim.ParseFaults(*faults); err != nil {
		return usagef("--faults: %s", err.Error())
	}
	costs, err := cf.load(stderr, "run many")
	if err != nil {
		return err
	}
	clock, err := ghz.clock(costs)
	if err != nil {
		return err
	}
	var specs []scenarios.RunSpec
	if *designs {
		specs = scenarios.CompareDesignSpecs()
	} else if len(patches) == 0 {
		patches = patchList{"none", "series"}
	}
	for _, p := range patches {
		ss, err := sim.ParseSwitches(p)
		if err != nil {
			if spec, ok := ablationSpec(p); ok { // an --ablation run's name
				specs = append(specs, spec)
				continue
			}
			return usagef("--patches %q: %s%s", p, err.Error(), switchSuggestion(p))
		}
		specs = append(specs, scenarios.RunSpec{Name: ss.Name(), Switches: ss})
	}
	if *ablation {
		specs = append(specs, scenarios.AblationSpecs()...)
	}
	if *sens && len(specs) < 2 {
		return usagef("--sensitivity: compares two runs (the first and the series, or the last), and --patches gives %d", len(specs))
	}
	imf.cfg.Seed = imf.seed
	mix, err := parseMix(imf)
	if err != nil {
		return err
	}
	o.Image = imf.cfg
	o.Image.JumpMix = mix
	o.Seed = imf.seed
	var setup *scenarios.ManySetup
	switch {
	case !imf.synthetic():
		k, _, err := imf.load()
		if err != nil {
			return err
		}
		if setup, err = scenarios.PrepareManyFor(k, o); err != nil {
			return usagef("%s", err.Error())
		}
	default:
		k, _, err := generateCached(scenarios.ManyImageConfig(o), imf.noCache)
		if err != nil {
			return usagef("%s", err.Error())
		}
		if setup, err = scenarios.PrepareManyOn(k, o); err != nil {
			return usagef("%s", err.Error())
		}
	}
	if err := kallsymsCached(setup.Kernel, imf.noCache); err != nil {
		return err
	}
	setup.Opts.Pool, setup.Opts.Jobs = caller.pool, o.Jobs
	var prog scenarios.Progress
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) && caller.hook == nil {
		prog = &termProgress{w: stderr}
	}
	rep, err := scenarios.RunMany(setup, specs, machine.Wire, costs, *faults, prog)
	if err != nil {
		return err
	}
	if rep.Meta, err = reportMeta(fs, imf, setup.Kernel, costs, *cf.file, *faults, "run many", args); err != nil {
		return err
	}
	rep.Meta.Costs.Clock = clock
	if *sens {
		alts, err := regimeTables()
		if err != nil {
			return err
		}
		rep.Sensitivity = scenarios.Sensitivity(rep, alts)
	}
	if caller.hook != nil { // a sweep or report collects the report itself
		caller.hook(rep)
		return nil
	}
	if err := emitReport(sink, stdout, func(w io.Writer) error {
		var err error
		switch *format {
		case "json":
			err = report.JSON(w, rep)
		case "csv":
			err = report.CSV(w, rep, costs)
		case "bench":
			err = report.Bench(w, rep)
		default:
			if *designs {
				err = report.DesignTable(w, rep)
			} else {
				err = report.TableWith(w, rep, report.TableOptions{Detail: *detail})
			}
		}
		if err != nil || probeSink == nil {
			return err
		}
		var pb bytes.Buffer
		if err := report.Probes(&pb, rep, setup.Kernel, *format == "json"); err != nil {
			return err
		}
		return probeSink.commit(pb.Bytes())
	}); err != nil {
		return err
	}
	return attachOutcome(stderr, "run many", rep.AttachWarnings(), *allowRefusals)
}

func parseMix(imf *imageFlags) ([4]float64, error) {
	mix, err := parseJumpMix(imf.jumpMix)
	if err != nil {
		return mix, usagef("%s", err.Error())
	}
	return mix, nil
}

// termProgress shows a progress bar on a terminal for runs longer than a
// second (progressbar's OptionThrottle plus its own delay).
type termProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *termProgress) Start(run string, total int) {
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("run "+run),
		progressbar.OptionShowCount(),
		progressbar.OptionSetVisibility(true),
		progressbar.OptionSetRenderBlankState(false),
		progressbar.OptionThrottle(200e6),
		progressbar.OptionClearOnFinish(),
	)
}

func (p *termProgress) Update(done int) {
	if p.bar != nil {
		_ = p.bar.Set(done)
	}
}

func (p *termProgress) Done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
}
