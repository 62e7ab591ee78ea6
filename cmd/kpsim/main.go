// Command kpsim is a kernel-model simulator of Linux kprobe registration on
// x86-64: it runs the kernel's lookup paths in their upstream (linear) and
// proposed (indexed) forms on a kernel image and reports what each did.
//
// Usage:
//
//	kpsim image  [image flags] [--format table|json]
//	kpsim decode [image flags] [--func NAME | --all] [--summary]
//	kpsim run many [image flags] [--n N] [--patches LIST]... [--ablation [--detail]] [--ghz F] [--format table|json|csv|bench] [--out FILE]
//	kpsim targets [image flags] [--traceable|--blacklisted|--notrace] [--module M] [--format table|json] [GLOB...]
//	kpsim calibrate [--out FILE] [--cc CC] [--regime hot|cold|both] [--quick]
//	kpsim cache list|size|clean [--older-than DURATION] [--all] [--max SIZE]
//	kpsim list
//	kpsim help CMD | kpsim completion bash|zsh|fish | kpsim --version
//
// Each subcommand has its own flags; `kpsim CMD --help` lists them. Bad usage
// exits with status 2 and a one-line error; a complete report of a run
// whose front door attached nothing or left targets unattempted exits 3
// (--allow-refusals: 0). The command tree, help and completion are
// cli.go's (spf13/cobra; flags are spf13/pflag's).
package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	flag "github.com/spf13/pflag"
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
		cacheCommand,
		{"list", "kpsim list", "list scenarios, patch switches, presets, fault points, counted ops and phases", runList},
	}
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errHelp: --help was asked for and printed; exit 0.
var errHelp = errors.New("help")

// errRefusals: the command ran and its output is complete, but a figure
// covers a run whose front door attached nothing, left targets
// unattempted or failed every attach; the warnings are on stderr
// already. Exit status 3 (--allow-refusals: 0).
var errRefusals = errors.New("refusals")

// allowRefusalsUsage is --allow-refusals' help, the same on every
// command that attaches probes.
const allowRefusalsUsage = "exit 0, not 3, when a run's front door attached nothing, left targets unattempted or failed every attach (the warnings still print, and the report still flags the run)"

// attachOutcome prints one warning line per flagged run and cause, after
// the report, and returns errRefusals (exit 3) unless allow.
func attachOutcome(stderr io.Writer, cmd string, warnings []string, allow bool) error {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "kpsim %s: warning: %s\n", cmd, oneLine(w))
	}
	if len(warnings) > 0 && !allow {
		return errRefusals
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs kpsim with args on the cobra command tree (cli.go) and returns
// the exit status: 0, 1 for a runtime error, 2 for bad usage, 3 for a
// complete report of a run that attached nothing or left targets
// unattempted (without --allow-refusals).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_ = newRoot(stdout, stderr, new(string)).Help()
		return 2
	}
	if args[0] == "-version" || args[0] == "-help" { // the flag package's spellings
		fmt.Fprintf(stderr, "kpsim: %s is deprecated, write -%s\n", args[0], args[0])
		args = append([]string{"-" + args[0]}, args[1:]...)
	}
	if args[0] == "version" {
		printVersion(stdout)
		return 0
	}
	if !strings.HasPrefix(args[0], "-") && !knownCommand(args[0]) {
		fmt.Fprintf(stderr, "kpsim: unknown command %q (commands: %s)%s\n", args[0], commandNames(), didYouMean(args[0], strings.Split(commandNames(), ", ")))
		return 2
	}
	name := ""
	sw := &stdoutWriter{w: stdout}
	root := newRoot(sw, stderr, &name)
	root.SetArgs(args)
	err := root.Execute()
	var ue *usageError
	var se *errStdout
	if sw.err != nil && (err == nil || errors.Is(err, errHelp) || errors.As(err, &se)) {
		// stdout did not take the output (a full disk, /dev/full): a
		// runtime error, even for a command that ignored it.
		fmt.Fprintf(stderr, "kpsim %s: %s\n", cmp.Or(name, "kpsim"), sw.err)
		return 1
	}
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errRefusals): // the report is out; the warnings were printed
		return 3
	case name == "": // cobra's own: an unknown flag of kpsim itself
		fmt.Fprintf(stderr, "kpsim: %s (see kpsim --help)\n", oneLine(err.Error()))
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kpsim %s: %s (see kpsim %s --help)\n", name, oneLine(ue.msg), name)
		return 2
	}
	fmt.Fprintf(stderr, "kpsim %s: %s\n", name, oneLine(err.Error()))
	return 1
}

// oneLine is s on one line, its non-printable bytes (binary input quoted
// back in an error) escaped as %q escapes them.
func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

func commandNames() string {
	var n []string
	for _, c := range commands {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
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

// parse parses args; --help returns errHelp, and the command layer
// (cli.go) prints the help from this flag set. Under describe (cli.go)
// it hands the defined flag set back instead of parsing.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	pos, err := parseArgs(fs, args, stdout)
	if err == nil && len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return err
}

// parseArgs is parse for a command that takes arguments besides its
// flags: it returns them (before, between or after the flags; after "--"
// every word is one).
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	if d, ok := stdout.(*describer); ok {
		d.sets = append(d.sets, fs)
		return nil, errDescribe
	}
	err := fs.Parse(noFlags(fs, args))
	if errors.Is(err, flag.ErrHelp) {
		return nil, errHelp
	}
	if err != nil {
		return nil, usagef("%s%s", err.Error(), flagSuggestion(fs, err))
	}
	return fs.Args(), nil
}
