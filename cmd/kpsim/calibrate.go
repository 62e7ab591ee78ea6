package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/internal/input"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/sim/calibrate"
)

// calibrateCommand is listed in main.go's command table.
var calibrateCommand = command{"calibrate",
	"kpsim calibrate [--out FILE] [--cc CC] [--regime hot|cold|both] [--quick] [--symbols FILE | image flags]",
	"measure the cycle weights on this machine with C microbenchmarks (cc -O2) and write a cost file for --costs",
	runCalibrate}

func runCalibrate(args []string, stdout, stderr io.Writer) error {
	fs, imf := newImageFlagSet("calibrate", args, stdout)
	out := fs.String("out", "", "write the cost file here (written whole or not at all; refused if it is an input file, read-only or a device that takes no write); with --regime both, FILE.hot and FILE.cold. Default and -: stdout")
	cc := fs.String("cc", "", "C compiler command (default $CC, else cc)")
	regime := fs.String("regime", "cold", "hot (a few items repeated), cold (distinct items per call) or both")
	quick := fs.Bool("quick", false, "tiny sizes and 3 repetitions: a smoke test, not weights to use")
	check := fs.Bool("check", false, "also run the C data structures' self-checks")
	symbols := fs.String("symbols", "", "symbol list (System.map or /proc/kallsyms) for the kallsyms tables; default: the image's symbols")
	if err := imf.parse(args, stdout); err != nil {
		return err
	}
	var regimes []string
	switch *regime {
	case "hot", "cold":
		regimes = []string{*regime}
	case "both":
		regimes = calibrate.Regimes
		if *out == "" {
			return usagef("--regime both writes two files: give --out FILE (FILE.hot, FILE.cold)")
		}
	default:
		return usagef("--regime: want hot, cold or both, got %q", *regime)
	}
	if *out == "-" && len(regimes) > 1 {
		return usagef("--out -: --regime both writes two files (FILE.hot, FILE.cold), not stdout")
	}
	files, err := newFileSet(fs, stdout)
	if err != nil {
		return err
	}
	if err := files.stdoutReport(*out); err != nil {
		return err
	}
	sinks := map[string]*atomicFile{}
	for _, r := range regimes {
		if *out == "" {
			continue
		}
		path := *out
		if len(regimes) > 1 {
			path += "." + r
		}
		s, err := files.out("out", path)
		if err != nil {
			return err
		}
		defer s.abort()
		sinks[r] = s
	}
	// The symbol list is read (and validated as kallsyms dump validates
	// it) and the compiler checked before the image is built, so a bad
	// input or a machine without a compiler is known at once.
	var syms []ktab.Symbol
	if *symbols != "" {
		if syms, err = readSymbols(*symbols); err != nil {
			return err
		}
	}
	if err := calibrate.CheckCompiler(*cc); err != nil {
		return usagef("%v", err)
	}
	opt := calibrate.Options{CC: *cc, Regimes: regimes, Quick: *quick, Check: *check, Progress: stderr,
		Command: strings.TrimSpace("kpsim calibrate " + strings.Join(args, " "))}
	if *symbols != "" {
		opt.TablesName = *symbols
	}
	k, _, err := imf.load()
	if err != nil {
		return err
	}
	if ct := k.CoreText(); ct != nil {
		opt.Text = ct.Bytes
	}
	if syms == nil {
		syms, opt.TablesName = scenarios.SymbolsOf(k), k.Name
	}
	var vm []ktab.Symbol
	for _, s := range syms {
		if s.Module == "" {
			vm = append(vm, s)
		}
	}
	if opt.Tables, err = ktab.Build(vm, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true}); err != nil {
		return usagef("%v", err)
	}
	opt.TablesName = fmt.Sprintf("%s (%d symbols, kallsyms_names %d bytes)", opt.TablesName, opt.Tables.NumSyms, len(opt.Tables.Names))
	// The work directory goes on every exit: returns, errors, SIGINT and
	// SIGTERM (installCleanup).
	if opt.Dir, err = makeTempDir("kpsim-calibrate-"); err != nil {
		return err
	}
	defer removeTempDir(opt.Dir)
	res, err := calibrate.Run(opt)
	if errors.Is(err, calibrate.ErrNoCompiler) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	if u := calibrate.UncoveredOps(); len(u) > 0 {
		fmt.Fprintf(stderr, "kpsim calibrate: warning: no benchmark or documented value for %s: their registered weights are kept\n", strings.Join(u, ", "))
	}
	for _, r := range regimes {
		var buf bytes.Buffer
		if err := calibrate.WriteCostFile(&buf, res, r); err != nil {
			return err
		}
		if s := sinks[r]; s != nil {
			if err := s.commit(buf.Bytes()); err != nil {
				return err
			}
			if s.w == nil {
				fmt.Fprintf(stderr, "kpsim calibrate: wrote %s (%s regime)\n", s.path, r)
			}
			continue
		}
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// regimeTables returns the weight tables of every built-in regime, by
// name: what bounds a weight that registers no range of its own.
func regimeTables() (map[string]*sim.CostTable, error) {
	out := map[string]*sim.CostTable{}
	for _, r := range []string{"documented", "hot", "cold"} {
		t, err := calibrate.Builtin(r)
		if err != nil {
			return nil, err
		}
		out[r] = t
	}
	return out, nil
}

// costFlags are the cost-model flags of the scenario commands.
type costFlags struct {
	regime *string
	file   *string
}

func addCostFlags(fs interface {
	String(name, value, usage string) *string
}, defRegime, why string) *costFlags {
	return &costFlags{
		regime: fs.String("cost-regime", defRegime, "built-in weights: hot (a few items repeated), cold (distinct items per call) or documented (the registered defaults); default "+defRegime+": "+why),
		file:   fs.String("costs", "", "cost file (OP CYCLES per line, as kpsim calibrate writes) overriding the --cost-regime weights"),
	}
}

// ghzFlag is --ghz: the clock that turns estimated cycles into estimated
// kernel time in every report of the commands that price attaches (run
// many, sweep, report, the BPF commands).
type ghzFlag struct {
	fs  *flag.FlagSet
	ghz float64
}

func addGHzFlag(fs *flag.FlagSet) *ghzFlag {
	g := &ghzFlag{fs: fs}
	fs.Float64Var(&g.ghz, "ghz", 0, "clock in GHz that converts estimated cycles to estimated kernel time (default: the clock the weights were converted at, from the cost profile's clock header, else the registered weights' 2.6 GHz reference machine; the report's clock: line says which)")
	return g
}

// clock is the clock of costs, or --ghz when given (above 0 and finite,
// else a usage error): one conversion for every command
// (scenarios.ClockFor).
func (g *ghzFlag) clock(costs *sim.CostTable) (scenarios.Clock, error) {
	if g.fs.Changed("ghz") && !(g.ghz > 0 && !math.IsInf(g.ghz, 0)) {
		return scenarios.Clock{}, usagef("--ghz: want a clock frequency in GHz above 0, got %v", g.ghz)
	}
	return scenarios.ClockFor(costs, g.ghz), nil
}

// load returns the cost table the flags select, warning on stderr when a
// cost file was calibrated on another CPU or by a --quick calibration; a
// cost file that sets no weight is refused.
func (c *costFlags) load(stderr io.Writer, cmd string) (*sim.CostTable, error) {
	base, err := calibrate.Builtin(*c.regime)
	if err != nil {
		return nil, usagef("--cost-regime: %v", err)
	}
	if *c.file == "" {
		return base, nil
	}
	f, err := input.Open(*c.file, input.MaxList)
	if err != nil {
		return nil, usagef("--costs: cost file %v", err)
	}
	defer f.Close()
	t, err := sim.ParseCostsOver(base, *c.file, f)
	if err != nil {
		return nil, usagef("--costs: %s", err.Error())
	}
	calibrate.FillFromBenches(t)
	if calibrate.FileWeights(t) == 0 {
		return nil, usagef("--costs: %s: no weights (no \"OP CYCLES\" line, no benchmark header): an empty cost file", *c.file)
	}
	for _, w := range []string{t.ForeignCPU(sim.LocalCPU()), calibrate.QuickWarning(t)} {
		if w != "" {
			fmt.Fprintf(stderr, "kpsim %s: %s\n", cmd, w)
		}
	}
	return t, nil
}
