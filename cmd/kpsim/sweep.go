package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	flag "github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
	"github.com/kpsim/kpsim/sim"
)

const sweepUsage = "kpsim sweep many --n START:STOP:STEP|N,N,... [--vias DOOR,...] [--allow-refusals] [--format table|json|csv|bench] [--out FILE] [--plot FILE.svg|.png] [--plot-phase PHASE] [--plot-per-probe] [--plot-linear] [run many flags]"

// sweepFlags are the flags sweep (and report) take for themselves; every
// other flag goes to the scenario. bool says whether the flag takes no
// value.
var sweepFlags = map[string]bool{"n": false, "format": false, "out": false, "plot": false, "plot-phase": false, "plot-per-probe": true, "plot-linear": true, "vias": false, "jobs": false, "allow-refusals": true}

// splitFlags separates the flags in own from the rest, keeping order.
func splitFlags(args []string, own map[string]bool) (mine, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if !strings.HasPrefix(a, "-") || name == "" {
			rest = append(rest, a)
			continue
		}
		name, _, hasVal := strings.Cut(name, "=")
		isBool, ok := own[name]
		if !ok {
			rest = append(rest, a)
			continue
		}
		mine = append(mine, a)
		if !hasVal && !isBool && i+1 < len(args) {
			i++
			mine = append(mine, args[i])
		}
	}
	return mine, rest
}

// sweepJob is a parsed sweep: its own flags and the scenario's.
type sweepJob struct {
	ns                  []int
	jobs                int
	vias                []string // front doors to sweep each run through (--vias)
	format, out, plot   string
	allowRefusals       bool
	plotOpts            report.PlotOptions
	scenarioArgs, given []string
}

func parseSweep(name string, args []string, stdout io.Writer, formats []string) (*sweepJob, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			args = append([]string{"many"}, args...)
		} else {
			return nil, usagef("missing scenario (sweep runs many)")
		}
	}
	if args[0] != "many" {
		return nil, usagef("scenario %q has no probe count to sweep (sweep runs many)", args[0])
	}
	mine, rest := splitFlags(args[1:], sweepFlags)
	for _, a := range rest {
		if a == "-h" || a == "--help" || a == "-help" {
			mine = append(mine, a)
		}
		if n := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-"); n == "probes" && strings.HasPrefix(a, "-") {
			return nil, usagef("--probes: a sweep writes no per-probe file (use kpsim run many --n N --probes FILE)")
		}
	}
	fs := newFlagSet(name, stdout)
	j := &sweepJob{scenarioArgs: rest, given: args}
	nspec := fs.String("n", "", "probe counts: START:STOP:STEP (STOP included) or N,N,... (each N is a full run of the scenario)")
	fs.StringVar(&j.format, "format", formats[0], "output: "+strings.Join(formats, ", "))
	fs.StringVar(&j.out, "out", "", "write the output to this file (written whole or not at all; - is stdout; refused if it is an input file, another output, read-only or a device that takes no write)")
	if name == "sweep" {
		fs.StringVar(&j.plot, "plot", "", "also draw the sweep to FILE.svg or FILE.png (one curve per run)")
	}
	fs.StringVar(&j.plotOpts.Phase, "plot-phase", "total", "the phase the plot shows (total or a phase name, kpsim list)")
	fs.BoolVar(&j.plotOpts.PerProbe, "plot-per-probe", false, "plot cycles per probe (cycles / N)")
	fs.BoolVar(&j.plotOpts.Linear, "plot-linear", false, "linear axes (default log-log, where the slope is the growth exponent)")
	fs.IntVar(&j.jobs, "jobs", 0, "runs to run at once over all the points (default: all cores, GOMAXPROCS; 1: one after another); the points' images are prepared as many at a time")
	fs.BoolVar(&j.allowRefusals, "allow-refusals", false, allowRefusalsUsage+"; a point that attached nothing is left out of the fits, exponents, per-probe figures and plots either way")
	vias := fs.String("vias", "", "sweep every run through each of these front doors (comma-separated --via values); the runs are named RUN@DOOR")
	if err := parse(fs, mine, stdout); err != nil {
		return nil, err // help: the command layer lists run many's flags too
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if j.jobs < 0 || set["jobs"] && j.jobs == 0 {
		return nil, usagef("--jobs: must be at least 1 (got %d)", j.jobs)
	}
	for _, v := range splitList(*vias) {
		switch doors.Via(v) {
		case doors.ViaRegisterKprobes, doors.ViaRegisterKprobe, doors.ViaKprobeEvents, doors.ViaPerfKprobe:
		default:
			return nil, usagef("--vias: %q is not a front door (register_kprobes, register_kprobe, kprobe_events, perf_kprobe)", v)
		}
		j.vias = append(j.vias, v)
	}
	for _, a := range rest {
		if n := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-"); len(j.vias) > 0 && strings.HasPrefix(a, "-") && (n == "via" || n == "single") {
			return nil, usagef("--%s: conflicts with --vias (one front door per run)", n)
		}
	}
	if _, ok := sim.LookupPhase(j.plotOpts.Phase); !ok && j.plotOpts.Phase != "total" {
		return nil, usagef("--plot-phase: unknown phase %q (kpsim list shows them)", j.plotOpts.Phase)
	}
	if !set["n"] {
		return nil, usagef("--n: required (e.g. --n 5000:50000:5000)")
	}
	var err error
	if j.ns, err = scenarios.ParseNs(*nspec); err != nil {
		if name == "report" && !strings.ContainsAny(*nspec, ":,") {
			n, perr := strconv.Atoi(*nspec)
			if perr != nil || n < 1 {
				return nil, usagef("--n: %s", err.Error())
			}
			j.ns = []int{n}
		} else {
			return nil, usagef("--n: %s", err.Error())
		}
	}
	ok := false
	for _, f := range formats {
		ok = ok || f == j.format
	}
	if !ok {
		return nil, usagef("--format: want %s, got %q", strings.Join(formats, ", "), j.format)
	}
	if j.plot != "" {
		switch strings.ToLower(filepath.Ext(j.plot)) {
		case ".svg":
			j.plotOpts.Format = "svg"
		case ".png":
			j.plotOpts.Format = "png"
		default:
			return nil, usagef("--plot: want a .svg or .png file, got %q", j.plot)
		}
	} else if name == "sweep" {
		for _, f := range []string{"plot-phase", "plot-per-probe", "plot-linear"} {
			if set[f] {
				return nil, usagef("--%s: applies with --plot only", f)
			}
		}
	}
	return j, nil
}

// run opens the outputs (--out, and --plot for kpsim sweep) before the
// slow part, so a bad path fails at once, then runs every point. The
// caller aborts the files it gets back, on error too.
func (j *sweepJob) run(stdout, stderr io.Writer) (out, plot *atomicFile, reps []*scenarios.ManyReport, err error) {
	files := &fileSet{stdout: stdout}
	if out, err = files.report(j.out); err != nil {
		return nil, nil, nil, err
	}
	if plot, err = files.out("plot", j.plot); err != nil {
		return out, nil, nil, err
	}
	reps, err = j.reports(stderr, files)
	return out, plot, reps, err
}

// reports runs the scenario at every N (and through every --vias door):
// the points run at once, --jobs of them preparing their images at a time,
// and all their runs share one pool of --jobs slots; the reports come back
// in N order, and the first failing point's error is the one returned.
func (j *sweepJob) reports(stderr io.Writer, files *fileSet) ([]*scenarios.ManyReport, error) {
	tty := false
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = true
	}
	vias := j.vias
	if len(vias) == 0 {
		vias = []string{""}
	}
	pool := scenarios.NewPool(j.jobs)
	points := make(chan struct{}, pool.Size())
	got := make([][]*scenarios.ManyReport, len(j.ns))
	errs := make([][]error, len(j.ns))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, n := range j.ns {
		got[i], errs[i] = make([]*scenarios.ManyReport, len(vias)), make([]error, len(vias))
		for d, via := range vias {
			points <- struct{}{}
			if failed.Load() { // a point before this one failed: its error is the answer
				<-points
				break
			}
			if tty {
				mu.Lock()
				fmt.Fprintf(stderr, "sweep: n=%d (%d of %d)\n", n, i+1, len(j.ns))
				mu.Unlock()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-points }()
				args := append(append([]string(nil), j.scenarioArgs...), "--n", strconv.Itoa(n))
				if via != "" {
					args = append(args, "--via", via)
				}
				hook := func(r *scenarios.ManyReport) { got[i][d] = r }
				errs[i][d] = runManyWith(args, io.Discard, stderr, manyCaller{hook: hook, pool: pool, files: files})
				if errs[i][d] != nil {
					failed.Store(true)
				}
			}()
		}
	}
	wg.Wait()
	var reps []*scenarios.ManyReport
	for i, n := range j.ns {
		var merged *scenarios.ManyReport
		for d, via := range vias {
			if errs[i][d] != nil {
				return nil, errs[i][d]
			}
			r := got[i][d]
			if r == nil {
				return nil, fmt.Errorf("n=%d: the scenario made no report", n)
			}
			if via == "" {
				merged = r
				continue
			}
			// One report per N with every door's runs, named RUN@DOOR.
			for _, run := range r.Runs {
				run.Name += "@" + via
			}
			if merged == nil {
				merged = r
				merged.Params["via"] = strings.Join(j.vias, ",")
				merged.Via = doors.Via(strings.Join(j.vias, ","))
			} else {
				merged.Runs = append(merged.Runs, r.Runs...)
			}
		}
		reps = append(reps, merged)
	}
	return reps, nil
}

func runSweep(args []string, stdout, stderr io.Writer) error {
	j, err := parseSweep("sweep", args, stdout, []string{"table", "json", "csv", "bench"})
	if err != nil {
		return err
	}
	sink, plotSink, reps, err := j.run(stdout, stderr)
	defer sink.abort()
	defer plotSink.abort()
	if err != nil {
		return err
	}
	sw, err := scenarios.NewSweep(reps)
	if err != nil {
		return err
	}
	if sw.Meta != nil {
		m := *sw.Meta
		m.Command = append([]string{"kpsim", "sweep"}, j.given...)
		sw.Meta = &m
	}
	var plotBytes []byte
	if plotSink != nil {
		if plotBytes, err = report.Plot(sw, j.plotOpts); err != nil {
			return usagef("%s", err.Error())
		}
	}
	if err := emitReport(sink, stdout, func(w io.Writer) error {
		if err := writeFormat(w, j.format, formatted{
			table: func(w io.Writer) error { return report.SweepTable(w, sw) },
			json:  func(w io.Writer) error { return report.SweepJSON(w, sw) },
			csv:   func(w io.Writer) error { return report.SweepCSV(w, sw) },
			bench: func(w io.Writer) error { return report.SweepBench(w, sw) },
		}); err != nil || plotSink == nil {
			return err
		}
		return plotSink.commit(plotBytes)
	}); err != nil {
		return err
	}
	return attachOutcome(stderr, "sweep", sw.Warnings(), j.allowRefusals)
}
