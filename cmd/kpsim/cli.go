package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/sim"
)

// The command layer: a cobra tree over main.go's command table and run's
// scenario table. Each command still defines its flags in one place, its
// run function; cobra parses none of them (DisableFlagParsing). The seam
// is describe: a run function given a *describer as stdout defines its
// flags, and parse hands the flag set back instead of parsing, so help,
// completion and the deprecated spellings all read the one definition.

// describer is the stdout of a run function asked to describe its flags.
type describer struct{ sets []*flag.FlagSet }

func (d *describer) Write(p []byte) (int, error) { return len(p), nil }

// errDescribe is parse's answer under describe.
var errDescribe = errors.New("describe")

// leaf is one runnable command: kpsim image, kpsim run many, ...
type leaf struct {
	path  string // "run many"
	name  string // the command table's name: "run"
	usage string
	doc   string
	pre   []string // arguments put before the user's: kallsyms "dump", sweep "many"
	run   func(args []string, stdout, stderr io.Writer) error
	also  *leaf // flags this command passes through (sweep and report: run many's)
}

func (l *leaf) call(args []string, stdout, stderr io.Writer) error {
	return l.run(append(slices.Clone(l.pre), args...), stdout, stderr)
}

// describe returns the flag sets the command defines for args (the image
// flags' defaults follow --profile and --kernel-version in args).
func (l *leaf) describe(args []string) []*flag.FlagSet {
	d := &describer{}
	_ = l.call(args, d, io.Discard)
	if l.also != nil {
		d.sets = append(d.sets, l.also.describe(args)...)
	}
	return d.sets
}

// lookup finds a flag in sets.
func lookup(sets []*flag.FlagSet, name string) *flag.Flag {
	for _, fs := range sets {
		if f := fs.Lookup(name); f != nil {
			return f
		}
	}
	return nil
}

// flagAlias is a deprecated spelling that still works for one release:
// --old (or --old=VALUE) is rewritten to --new, or to the flag and value
// new names ("via register_kprobe"). value, when set, makes it a value
// alias: --flag old becomes --flag new.
type flagAlias struct {
	cmd, old, new string
	value         string
}

var flagAliases = []flagAlias{
	{cmd: "soak", old: "workers", new: "jobs"},
	{cmd: "run session", old: "programs", new: "n"},
	{cmd: "run multi", old: "k", new: "n"},
	{cmd: "run crossover", old: "k", new: "n"},
	{cmd: "run tracing-multi", old: "k", new: "n"},
	{cmd: "run kallsyms", old: "iters", new: "n"},
	{cmd: "run many", old: "single", new: "via register_kprobe"},
	{cmd: "explain", old: "text", new: "table", value: "format"},
}

// aliasesOf lists the aliases of l (and of the command it passes flags to).
func aliasesOf(l *leaf) []flagAlias {
	var out []flagAlias
	for _, a := range flagAliases {
		if a.cmd == l.path || l.also != nil && a.cmd == l.also.path {
			out = append(out, a)
		}
	}
	return out
}

// takesValue reports whether flag f consumes the next argument.
func takesValue(f *flag.Flag) bool { return f != nil && f.NoOptDefVal == "" }

// normalizeArgs rewrites the old spellings of args to today's: -name to
// --name (the flag package's single-dash long flags, which pflag reads
// as shorthands) and the deprecated aliases to their flags, with one
// deprecation line each on stderr. An alias given with its flag is
// refused.
func normalizeArgs(l *leaf, sets []*flag.FlagSet, args []string, stderr io.Writer) ([]string, error) {
	aliases := aliasesOf(l)
	said := map[string]bool{}
	note := func(old, new string) {
		if !said[old] {
			said[old] = true
			fmt.Fprintf(stderr, "kpsim: %s is deprecated, write %s\n", old, new)
		}
	}
	var out []string
	given := map[string]string{} // canonical flag name -> spelling used
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "-h" {
			out = append(out, a)
			continue
		}
		body := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, val, hasVal := strings.Cut(body, "=")
		f := lookup(sets, name)
		known := f != nil || name == "help"
		for _, al := range aliases {
			known = known || al.value == "" && al.old == name
		}
		if !strings.HasPrefix(a, "--") && len(name) > 0 && known {
			note("-"+name, "--"+name) // an unknown -x is pflag's to refuse
		}
		if f == nil && strings.HasPrefix(name, "no-") {
			f = lookup(sets, strings.TrimPrefix(name, "no-"))
			if f != nil && !takesValue(f) {
				if !strings.HasPrefix(a, "--") {
					note("-"+name, "--"+name)
				}
				out = append(out, "--"+body)
				continue
			}
			f = nil
		}
		spelled := "--" + name
		repl := []string{"--" + body}
		for _, al := range aliases {
			if al.value == "" && al.old == name {
				newName, newVal, fixed := strings.Cut(al.new, " ")
				f = lookup(sets, newName)
				if fixed { // a boolean that stands for a flag and a value
					note("--"+name, "--"+al.new)
					if hasVal && val == "false" {
						repl = nil
					} else {
						repl = []string{"--" + newName, newVal}
					}
					hasVal = true // consumes nothing more
				} else {
					note("--"+name, "--"+newName)
					repl = []string{"--" + newName}
					if hasVal {
						repl = []string{"--" + newName + "=" + val}
					}
				}
				name = newName
				break
			}
		}
		if prev, ok := given[name]; ok && prev != spelled && f != nil {
			old := spelled
			if old == "--"+name {
				old = prev
			}
			return nil, usagef("%s and %s given together: %s is a deprecated spelling of --%s; give only --%s", prev, spelled, old, name, name)
		}
		given[name] = spelled
		out = append(out, repl...)
		if !hasVal && takesValue(f) && i+1 < len(args) {
			i++
			v := args[i]
			for _, al := range aliases {
				if al.value == name && al.old == v {
					note("--"+name+" "+v, "--"+name+" "+al.new)
					v = al.new
				}
			}
			out = append(out, v)
		} else if hasVal {
			for _, al := range aliases {
				if al.value == name && al.old == val {
					note("--"+name+" "+val, "--"+name+" "+al.new)
					out[len(out)-1] = "--" + name + "=" + al.new
				}
			}
		}
	}
	return out, nil
}

// actions are the subcommands of the commands whose first argument names
// what to do (cache: issue 24's kpsim cache, once it is in the table; its
// actions must call parse for their flags).
var actions = map[string][]string{
	"kallsyms": {"dump"},
	"sweep":    {"many"},
	"report":   {"many"},
	"cache":    {"list", "size", "clean"},
}

// newRoot builds the command tree; *name is set to the path of the
// command that runs ("run many"), for its error lines.
func newRoot(stdout, stderr io.Writer, name *string) *cobra.Command {
	var ver strings.Builder
	printVersion(&ver)
	root := &cobra.Command{
		Use:           "kpsim",
		Short:         "a kernel-model simulator of Linux kprobe registration on x86-64",
		Long:          "kpsim: a kernel-model simulator of Linux kprobe registration on x86-64.\n\nEach command's --help lists its flags; kpsim completion bash|zsh|fish prints a shell completion script.",
		Version:       strings.TrimSpace(ver.String()),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, c := range commands {
		switch c.name {
		case "run":
			p := parentCmd(c, name)
			for _, sc := range scenarioTable {
				p.AddCommand(leafCmd(&leaf{path: "run " + sc.name, name: "run", usage: "kpsim run " + sc.name + " [image flags] [flags]", doc: sc.doc, run: sc.run}, stderr, name))
			}
			root.AddCommand(p)
		case "kallsyms", "sweep", "report", "cache":
			// A command whose first argument is an action: one leaf
			// each. sweep and report pass run many's flags through.
			p := parentCmd(c, name)
			for _, act := range actions[c.name] {
				l := &leaf{path: c.name + " " + act, name: c.name, usage: c.usage, doc: c.doc, pre: []string{act}, run: c.run}
				if c.name == "sweep" || c.name == "report" {
					l.also = &leaf{path: "run many", run: runMany}
				}
				p.AddCommand(leafCmd(l, stderr, name))
			}
			root.AddCommand(p)
		default:
			root.AddCommand(leafCmd(&leaf{path: c.name, name: c.name, usage: c.usage, doc: c.doc, run: c.run}, stderr, name))
		}
	}
	return root
}

// parentCmd is a command whose subcommands run (run, kallsyms, sweep,
// report); given anything else it runs the command itself, which names
// what is missing.
func parentCmd(c command, name *string) *cobra.Command {
	return &cobra.Command{
		Use:                c.name,
		Short:              c.doc,
		Long:               "usage: " + c.usage + "\n\n" + c.doc + ".",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
				_ = cmd.Help()
				return errHelp
			}
			*name = c.name
			return c.run(args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// leafCmd is the cobra command of l: it rewrites the old spellings, runs
// l, prints its help from the flags l defines, and completes them.
func leafCmd(l *leaf, stderr io.Writer, name *string) *cobra.Command {
	use := l.path[strings.LastIndex(l.path, " ")+1:]
	cmd := &cobra.Command{
		Use:                use,
		Short:              l.doc,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			*name = l.path
			args, err := normalizeArgs(l, l.describe(args), args, stderr)
			if err != nil {
				return err
			}
			err = l.call(args, cmd.OutOrStdout(), stderr)
			if errors.Is(err, errHelp) {
				leafHelp(cmd.OutOrStdout(), l, args)
			}
			return err
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeLeaf(l, args, toComplete)
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) { leafHelp(c.OutOrStdout(), l, nil) })
	return cmd
}

// leafHelp prints l's usage and the flags it defines for args.
func leafHelp(w io.Writer, l *leaf, args []string) {
	var rest []string
	for _, a := range args {
		if a != "-h" && a != "--help" {
			rest = append(rest, a)
		}
	}
	fmt.Fprintf(w, "usage: %s\n\n%s.\n\nFlags:\n", l.usage, l.doc)
	printGroupedDefaults(union(l.describe(rest)), w)
	if l.also != nil {
		fmt.Fprintf(w, "\nEvery flag but %s's own is kpsim %s's.\n", l.name, l.also.path)
	}
	if as := aliasesOf(l); len(as) > 0 {
		var old []string
		for _, a := range as {
			if a.value != "" {
				old = append(old, fmt.Sprintf("--%s %s (--%s %s)", a.value, a.old, a.value, a.new))
			} else {
				old = append(old, fmt.Sprintf("--%s (--%s)", a.old, a.new))
			}
		}
		fmt.Fprintf(w, "\nDeprecated spellings, read for one more release: %s.\n", strings.Join(old, ", "))
	}
}

// union is one flag set of every flag in sets, the first definition of a
// name winning.
func union(sets []*flag.FlagSet) *flag.FlagSet {
	if len(sets) == 1 {
		return sets[0]
	}
	u := flag.NewFlagSet("", flag.ContinueOnError)
	for _, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			if u.Lookup(f.Name) == nil {
				u.AddFlag(f)
			}
		})
	}
	return u
}

// completeLeaf completes l's flag names (with the first clause of their
// help) and the values of the flags whose values are a known list.
func completeLeaf(l *leaf, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	sets := l.describe(args)
	if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "-") && !strings.Contains(args[n-1], "=") {
		if f := lookup(sets, strings.TrimLeft(args[n-1], "-")); takesValue(f) {
			return completeValue(f, toComplete, "")
		}
	}
	if !strings.HasPrefix(toComplete, "-") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if name, val, ok := strings.Cut(strings.TrimLeft(toComplete, "-"), "="); ok {
		if f := lookup(sets, name); f != nil {
			return completeValue(f, val, "--"+name+"=")
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	union(sets).VisitAll(func(f *flag.Flag) {
		if f.Hidden || !strings.HasPrefix("--"+f.Name, toComplete) {
			return
		}
		out = append(out, cobra.CompletionWithDesc("--"+f.Name, firstClause(f.Usage)))
	})
	return out, cobra.ShellCompDirectiveNoFileComp
}

// firstClause is a flag's help up to its first colon or semicolon.
func firstClause(s string) string {
	if i := strings.IndexAny(s, ":;("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// fileFlags are the flags whose values are paths.
var fileFlags = []string{"kernel", "out", "probes", "targets", "costs", "symbols", "plot", "boot-sites", "replay", "out-dir", "modules-dir", "with"}

// listFlags take comma-separated values.
var listFlags = []string{"patches", "vias", "faults"}

// formatWords reads the values a --format help lists ("output: table,
// json, csv or bench (...)").
var formatWords = regexp.MustCompile(`^[a-z ]*: ([a-z]+(?:(?:, | or )[a-z]+)*)`)

// flagValues is the list of values flag f takes, if it is a known list.
func flagValues(f *flag.Flag) []string {
	switch f.Name {
	case "patches":
		var v []string
		for _, p := range sim.Presets() {
			v = append(v, p.Name)
		}
		for _, s := range sim.AllSwitches() {
			v = append(v, s.String())
		}
		return v
	case "via", "vias":
		return []string{string(doors.ViaRegisterKprobes), string(doors.ViaRegisterKprobe), string(doors.ViaKprobeEvents), string(doors.ViaPerfKprobe)}
	case "profile":
		return synth.ProfileNames
	case "kernel-version", "bpf-kernel":
		var v []string
		for _, g := range image.Generations {
			v = append(v, g.String())
		}
		return v
	case "cpu":
		return append(alternative.CPUNames(), "host", alternative.CPUNone)
	case "placement":
		return []string{"entry", "after-fentry", "offset"}
	case "order":
		return []string{"file", "sorted", "shuffle"}
	case "enable":
		return []string{"none", "each", "group"}
	case "regime", "cost-regime":
		return []string{"hot", "cold", "both"}
	case "what":
		return []string{"tokens", "stats"}
	case "padding":
		return []string{"toolchain", "int3"}
	case "targets":
		return []string{"generated", "all-functions", "traceable"}
	case "kernel":
		return []string{"synthetic"}
	case "faults":
		var v []string
		for _, p := range sim.FaultPoints() {
			v = append(v, p.Name)
		}
		return v
	case "plot-phase":
		v := []string{"total"}
		for _, p := range sim.Phases() {
			v = append(v, p.Name)
		}
		return v
	case "format":
		if m := formatWords.FindStringSubmatch(f.Usage); m != nil {
			return strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ","), func(r rune) bool { return r == ',' || r == ' ' })
		}
	}
	return nil
}

// completeValue completes the value of f after prefix ("" or "--f=");
// a list flag completes its last comma-separated part.
func completeValue(f *flag.Flag, toComplete, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	vals := flagValues(f)
	dir := cobra.ShellCompDirectiveNoFileComp
	if slices.Contains(fileFlags, f.Name) {
		dir = cobra.ShellCompDirectiveDefault
	}
	head, part := "", toComplete
	if slices.Contains(listFlags, f.Name) {
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			head, part = toComplete[:i+1], toComplete[i+1:]
		}
		if len(vals) > 0 {
			dir |= cobra.ShellCompDirectiveNoSpace
		}
	}
	var out []cobra.Completion
	for _, v := range vals {
		if strings.HasPrefix(v, part) {
			out = append(out, prefix+head+v)
		}
	}
	return out, dir
}

// knownCommand reports whether s is a command of the tree (or cobra's).
func knownCommand(s string) bool {
	switch s {
	case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return true
	}
	for _, c := range commands {
		if c.name == s {
			return true
		}
	}
	return false
}
