package main

import (
	"fmt"
	"io"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

// synthOnlyFlags are the generator flags a real image (--kernel PATH) or a
// symbol file (--symbols) would ignore: they shape the synthetic image
// only. --seed, --sample-functions and --padding shape the sample's
// targets that are added to a real kernel too, --returns-patched and
// --cpu its boot patching, --modules its modules, so they are not here.
var synthOnlyFlags = []string{
	"functions", "init-functions", "size-median", "size-sigma", "min-size", "max-size",
	"jump-entries", "jump-keys", "jump-mix", "jump-branch-percent", "static-calls", "static-call-keys",
	"static-call-tail-percent", "bug-entries", "blacklist", "entry-functions", "irqentry-functions",
	"noinstr-functions", "kprobes-text-functions", "module-functions", "module-init-functions",
	"module-jump-entries", "module-static-calls", "module-bug-entries", "traced-percent", "uaccess-percent",
	"loop-to-entry-percent", "indirect-jump-percent", "vzeroupper-percent", "dup-name-percent",
	"clone-percent", "ibt", "retpoline", "rethunk", "probe-targets", "probe-targets-traced", "probe-targets-at",
	"object-functions-median", "object-functions-sigma", "profile",
}

// refuseSynthFlags is the error for a generator flag given with a real
// image or a symbol file, naming the flag and why (nil when none is).
func refuseSynthFlags(fs *flag.FlagSet, imf *imageFlags, symbols string) error {
	if imf.synthetic() && symbols == "" {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range synthOnlyFlags {
		if !set[name] {
			continue
		}
		if symbols != "" {
			return usagef("--%s: shapes the synthetic image only; --symbols %s gives the symbols", name, symbols)
		}
		return usagef("--%s: shapes the synthetic image only; --kernel %s is read as built", name, imf.kernel)
	}
	if symbols != "" && set["kernel"] {
		return usagef("--kernel: conflicts with --symbols %s (one symbol source)", symbols)
	}
	return nil
}

// parseImageFlags parses the flags of a command that reads an image, then
// refuses the generator's flags where a real image, or the symbol file
// of flag symbols (nil: the command has none), is read.
func parseImageFlags(fs *flag.FlagSet, imf *imageFlags, args []string, stdout io.Writer, symbols *string) error {
	if err := imf.parse(args, stdout); err != nil {
		return err
	}
	if symbols == nil {
		return refuseSynthFlags(fs, imf, "")
	}
	return refuseSynthFlags(fs, imf, *symbols)
}

// refuseZeroAddresses is the error for a symbol list whose addresses are
// all zero: /proc/kallsyms read without CAP_SYSLOG under kptr_restrict.
func refuseZeroAddresses(path string, syms []ktab.Symbol) error {
	if len(syms) == 0 {
		return nil
	}
	for _, s := range syms {
		if s.Addr != 0 {
			return nil
		}
	}
	return usagef("--symbols: %s: every address is 0 (an unprivileged read of /proc/kallsyms under kptr_restrict); read it as root or use System.map", path)
}

// printVersion prints the build's version (kpsim --version).
func printVersion(w io.Writer) {
	v := scenarios.BuildVersion()
	fmt.Fprintf(w, "%s\nmodule %s\n", v, v.Module)
	if v.Revision != "" {
		fmt.Fprintf(w, "vcs.revision %s\nvcs.modified %v\n", v.Revision, v.Modified)
		if v.Time != "" {
			fmt.Fprintf(w, "vcs.time %s\n", v.Time)
		}
	}
}

// didYouMean suggests the closest of known to s (edit distance at most
// 2, or a prefix), as "; did you mean X?", or "".
func didYouMean(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if k == s { // the token itself was refused: no suggestion
			return ""
		}
		d := editDistance(s, k)
		if strings.HasPrefix(k, s) && len(s) >= 3 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// switchSuggestion suggests a switch or preset for the unknown parts of a
// --patches value (ablation run names such as series-kprobe-tree are
// accepted by patchSpec itself).
func switchSuggestion(p string) string {
	var known []string
	for _, s := range sim.AllSwitches() {
		known = append(known, s.String())
	}
	for _, pr := range sim.Presets() {
		known = append(known, pr.Name)
	}
	for _, part := range strings.Split(p, ",") {
		part = strings.TrimSpace(part)
		if _, err := sim.ParseSwitches(part); err != nil && part != "" {
			if s := didYouMean(part, known); s != "" {
				return s
			}
		}
	}
	return ""
}

// ablationSpec resolves an ablation run name (kpsim run many --ablation
// prints them: "series-kprobe-tree", "kprobe-tree+iter-can-probe") to its
// switch set, so that any run of a report can be rerun alone.
func ablationSpec(name string) (scenarios.RunSpec, bool) {
	for _, s := range scenarios.AblationSpecs() {
		if s.Name == name {
			return s, true
		}
	}
	return scenarios.RunSpec{}, false
}

// realKernelFlags are the image flags that apply to a real kernel too.
var realKernelFlags = []string{"kernel", "kernel-version", "kconfig", "seed", "sample-functions", "padding", "returns-patched", "cpu", "modules", "modules-dir", "no-cache"}

// printGroupedDefaults prints a command's flags in three groups: its own
// (scenario) flags, the real-kernel flags and the synthetic-image flags,
// each alphabetical; a boolean flag that is on by default says that
// --no-X turns it off. Hidden flags are left out.
func printGroupedDefaults(fs *flag.FlagSet, w io.Writer) {
	group := map[string]int{}
	for _, n := range realKernelFlags {
		group[n] = 1
	}
	for _, n := range synthOnlyFlags {
		group[n] = 2
	}
	titles := []string{"", "Kernel flags (a real image or the generator):", "Synthetic-image flags (the generator only; refused with --kernel PATH):"}
	for g, title := range titles {
		sub := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		fs.VisitAll(func(f *flag.Flag) {
			if group[f.Name] != g {
				return
			}
			c := *f
			if c.NoOptDefVal == "true" && c.DefValue == "true" {
				c.Usage += " (on by default; --no-" + f.Name + " or --" + f.Name + "=false turns it off)"
			}
			sub.AddFlag(&c)
		})
		if !sub.HasAvailableFlags() {
			continue
		}
		if title != "" { // the first group sits under "Flags:"
			fmt.Fprintln(w)
			fmt.Fprintln(w, title)
		}
		fmt.Fprint(w, sub.FlagUsagesWrapped(100))
	}
}

// flagSuggestion suggests a defined flag for pflag's "unknown flag: --X"
// error; never the rejected name itself.
func flagSuggestion(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: ")
	if !ok {
		return ""
	}
	var known []string
	fs.VisitAll(func(f *flag.Flag) {
		if !f.Hidden {
			known = append(known, f.Name)
		}
	})
	if s := didYouMean(strings.TrimLeft(name, "-"), known); s != "" {
		return strings.Replace(s, `"`, `"--`, 1)
	}
	return ""
}

// noFlags rewrites --no-X to --X=false for a boolean flag X that has no
// --no-X of its own, so both spellings turn a default-on flag off.
func noFlags(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), "no-")
		if ok && strings.HasPrefix(a, "-") && !strings.Contains(name, "=") && fs.Lookup("no-"+name) == nil {
			if f := fs.Lookup(name); f != nil {
				if bf, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && bf.IsBoolFlag() {
					out = append(out, "--"+name+"=false")
					continue
				}
			}
		}
		out = append(out, a)
	}
	return out
}
