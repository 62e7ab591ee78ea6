// Command kpsim is a kernel-model simulator of Linux kprobe registration on
// x86-64: it runs the kernel's lookup paths in their upstream (linear) and
// proposed (indexed) forms on a kernel image and reports what each did.
//
// Usage:
//
//	kpsim image  [image flags] [--format table|json]
//	kpsim decode [image flags] [--func NAME | --all] [--summary]
//	kpsim run many [image flags] [--n N] [--patches LIST]... [--ablation] [--format table|json|csv] [--out FILE]
//	kpsim targets [image flags] [--traceable|--blacklisted|--notrace] [--module M] [--format table|json] [GLOB...]
//	kpsim calibrate [--out FILE] [--cc CC] [--regime hot|cold|both] [--quick]
//	kpsim list
//
// Each subcommand has its own flags; `kpsim CMD --help` lists them. Bad usage
// exits with status 2 and a one-line error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type command struct {
	name  string
	usage string
	doc   string
	run   func(args []string, stdout, stderr io.Writer) error
}

var commands []command

func init() {
	commands = []command{
		{"image", "kpsim image [image flags] [--format table|json] [--boot-sites FILE]", "summarise the kernel image", runImage},
		{"decode", "kpsim decode [image flags] [--func NAME | --all] [--summary]", "print instruction boundaries objdump-style", runDecode},
		{"run", "kpsim run many|kallsyms|session|multi|tracing-multi|crossover [image flags] [scenario flags] (kpsim run SCENARIO --help)", "run a scenario under one or more patch sets", runRun},
		{"kallsyms", "kpsim kallsyms dump --symbols FILE [--all-symbols] [--absolute-percpu] [--base-relative] [--what tokens|stats]", "build the compressed kallsyms tables from a symbol list and dump them", runKallsyms},
		{"sweep", sweepUsage, "run a scenario at several N: totals, fits of a + b·N + c·N², growth exponents, plots", runSweep},
		{"report", reportUsage, "write one self-contained HTML (plots inline) or Markdown report of a run or a sweep", runReport},
		calibrateCommand,
		{"targets", targetsUsage, targetsDoc, runTargets},
		{"explain", explainUsage, "print the decision trail of one probe: every check, what it looked at and what it decided", runExplain},
		soakCommand,
		{"list", "kpsim list", "list scenarios, patch switches, presets, fault points, counted ops and phases", runList},
	}
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errHelp: --help was asked for and printed; exit 0.
var errHelp = errors.New("help")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		topUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		printVersion(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, errHelp):
			return 0
		default:
			var ue *usageError
			if errors.As(err, &ue) {
				fmt.Fprintf(stderr, "kpsim %s: %s (see kpsim %s --help)\n", c.name, oneLine(ue.msg), c.name)
				return 2
			}
			fmt.Fprintf(stderr, "kpsim %s: %s\n", c.name, oneLine(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(stderr, "kpsim: unknown command %q (commands: %s)%s\n", args[0], commandNames(), didYouMean(args[0], strings.Split(commandNames(), ", ")))
	return 2
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func commandNames() string {
	var n []string
	for _, c := range commands {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "kpsim: a kernel-model simulator of Linux kprobe registration on x86-64")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.doc)
	}
	fmt.Fprintln(w, "\nRun 'kpsim COMMAND --help' for a command's flags.")
}

// newFlagSet returns a flag set that reports errors as one line instead of
// printing usage, and prints usage to stdout on --help.
func newFlagSet(c string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	_ = stdout
	return fs
}

// parse parses args; --help prints the usage and flags to stdout.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(noFlags(fs, args))
	if errors.Is(err, flag.ErrHelp) {
		for _, c := range commands {
			if c.name == strings.Fields(fs.Name())[0] {
				fmt.Fprintf(stdout, "usage: %s\n\n%s.\n\nFlags:\n", c.usage, c.doc)
			}
		}
		printGroupedDefaults(fs, stdout)
		return errHelp
	}
	if err != nil {
		return usagef("%s%s", err.Error(), flagSuggestion(fs, err))
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
