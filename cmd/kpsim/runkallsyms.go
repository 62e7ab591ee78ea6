package main

import (
	"io"
	"os"
	"strings"
	"time"

	flag "github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
)

func runKallsymsScenario(args []string, stdout, stderr io.Writer) error {
	fs, imf := newImageFlagSet("run kallsyms", args, stdout)
	symbols := fs.String("symbols", "", "symbol list (System.map or /proc/kallsyms); default: the synthetic image's symbols")
	o := scenarios.KallsymsOptions{Iters: 100000, Build: kallsymsDefaults}
	fs.IntVar(&o.Iters, "n", o.Iters, "timed passes per measurement (formerly --iters): exactly this many when given, else at most this many within --benchtime")
	fs.DurationVar(&o.Budget, "benchtime", 50*time.Millisecond, "time each measurement's timing loop runs for, its pass count grown as testing.B grows b.N (ignored when --n is given)")
	hits := fs.String("hits", "", "comma-separated names to look up as hits (default: 16 names of the table)")
	misses := fs.String("misses", "", "comma-separated names to look up as misses (default: 8 names the table lacks)")
	variants := fs.String("variants", "", "comma-separated variants (default: all): "+variantNames())
	set := o.Build
	fs.BoolVar(&set.AllSymbols, "all-symbols", set.AllSymbols, "build with --all-symbols (default: the generation's Debian build)")
	fs.BoolVar(&set.AbsolutePercpu, "absolute-percpu", set.AbsolutePercpu, "build with --absolute-percpu (6.1, 6.12)")
	fs.BoolVar(&set.BaseRelative, "base-relative", set.BaseRelative, "build with --base-relative (6.1)")
	fs.BoolVar(&set.PCRelative, "pc-relative", set.PCRelative, "build with --pc-relative (7.3)")
	cf := addCostFlags(fs, "hot", "test_kallsyms_perf repeats its names")
	format := fs.String("format", "table", "output: table, json or csv")
	out := fs.String("out", "", "write the report to this file (written whole or not at all; - is stdout; refused if it is an input file, another output, read-only or a device that takes no write)")
	if err := parseImageFlags(fs, imf, args, stdout, symbols); err != nil {
		return err
	}
	switch *format {
	case "table", "json", "csv", "bench":
	default:
		return usagef("--format: want table, json, csv or bench, got %q", *format)
	}
	if o.Iters < 1 {
		return usagef("--n: must be at least 1 (got %d)", o.Iters)
	}
	kset := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { kset[f.Name] = true })
	switch {
	case kset["n"] && kset["benchtime"]:
		return usagef("--benchtime: conflicts with --n (a fixed pass count)")
	case kset["n"]:
		o.Budget = 0
	case o.Budget <= 0:
		return usagef("--benchtime: must be positive (got %s)", o.Budget)
	}
	var err error
	if o.Costs, err = cf.load(stderr, "run kallsyms"); err != nil {
		return err
	}
	if *cf.regime == "hot" && *cf.file == "" {
		o.Why = "hot by default because test_kallsyms_perf repeats its names (--cost-regime cold for registration's)"
	}
	o.Hits, o.Misses = splitList(*hits), splitList(*misses)
	for _, v := range splitList(*variants) {
		pv, err := kallsyms.ParseVariant(v)
		if err != nil {
			return usagef("--variants: %v", err)
		}
		o.Variants = append(o.Variants, pv)
	}
	files, err := newFileSet(fs, stdout)
	if err != nil {
		return err
	}
	sink, err := files.report(*out)
	if err != nil {
		return err
	}
	defer sink.abort()
	var syms []ktab.Symbol
	var mods []*image.Module
	var kimg *image.Kernel
	kernel := ""
	if *symbols != "" {
		if syms, err = readSymbols(*symbols); err != nil {
			return err
		}
		kernel = *symbols + " (module symbols not modelled for symbol files)"
	} else {
		k, _, err := imf.load()
		if err != nil {
			return err
		}
		syms, mods, kernel, kimg = scenarios.SymbolsOf(k), k.Modules, k.Name, k
	}
	// The generation's scripts/kallsyms (the image's, or --kernel-version's
	// for a symbol file), then the flags the command line set.
	gen := image.Gen61
	if kimg != nil {
		gen = kimg.Config.Gen
	} else if imf.kernelVersion != "" {
		if gen, err = image.ParseGeneration(imf.kernelVersion); err != nil {
			return usagef("--kernel-version: %v", err)
		}
	}
	o.Build = ktab.OptionsFor(gen)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "all-symbols":
			o.Build.AllSymbols = set.AllSymbols
		case "absolute-percpu":
			o.Build.AbsolutePercpu = set.AbsolutePercpu
		case "base-relative":
			o.Build.BaseRelative = set.BaseRelative
		case "pc-relative":
			o.Build.PCRelative = set.PCRelative
		}
	})
	o.Seed = imf.seed
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		o.Progress = &termProgress{w: stderr}
	}
	rep, err := scenarios.RunKallsyms(kernel, syms, mods, o)
	if err != nil {
		return usagef("%v", err)
	}
	if rep.Meta, err = kallsymsMeta(fs, imf, kimg, o.Costs, *cf.file, *symbols, args); err != nil {
		return err
	}
	return emitReport(sink, stdout, func(w io.Writer) error {
		return writeFormat(w, *format, formatted{
			table: func(w io.Writer) error { return report.KallsymsTable(w, rep) },
			json:  func(w io.Writer) error { return report.KallsymsJSON(w, rep) },
			csv:   func(w io.Writer) error { return report.KallsymsCSV(w, rep) },
			bench: func(w io.Writer) error { return report.KallsymsBench(w, rep) },
		})
	})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func variantNames() string {
	var n []string
	for _, v := range kallsyms.AllVariants() {
		n = append(n, v.String())
	}
	return strings.Join(n, ", ")
}
