package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

const targetsUsage = "kpsim targets [image flags] [--traceable|--blacklisted|--notrace] [--module M] [--format table|json] [GLOB...]"

const targetsDoc = "list the image's probe targets matching shell globs (as perf probe -F, bpftrace -l 'kprobe:GLOB'): module, traceable, blacklisted and why, notrace"

// probeTarget is one function kpsim targets lists.
type probeTarget struct {
	Name   string `json:"name"`
	Module string `json:"module"` // "vmlinux" or the module's name
	Addr   string `json:"addr"`
	// Traceable: the function has an ftrace record (available_filter_functions
	// lists it): ftrace_location_range over its kallsyms extent.
	Traceable bool `json:"traceable"`
	// Blacklisted: within_kprobe_blacklist (register_kprobe refuses it,
	// -EINVAL); Blacklist says which part of the blacklist covers it.
	Blacklisted bool   `json:"blacklisted"`
	Blacklist   string `json:"blacklist,omitempty"`
	// Notrace: within_notrace_func (kprobe_events and perf_kprobe refuse
	// it, -EINVAL): no ftrace record, unless a suffixed copy of a
	// traceable base.
	Notrace bool `json:"notrace"`
}

// targetsSummary is the count line's numbers.
type targetsSummary struct {
	Matched     int `json:"matched"`
	Traceable   int `json:"traceable"`
	Blacklisted int `json:"blacklisted"`
	Notrace     int `json:"notrace"`
}

func runTargets(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("targets", stdout)
	imf := addImageFlagsFor(fs, args)
	traceable := fs.Bool("traceable", false, "only functions with an ftrace record (listed in available_filter_functions)")
	blacklisted := fs.Bool("blacklisted", false, "only functions in the kprobe blacklist (within_kprobe_blacklist: register_kprobe refuses them)")
	notrace := fs.Bool("notrace", false, "only notrace functions (within_notrace_func: kprobe_events and perf_kprobe refuse them)")
	module := fs.String("module", "", "only functions of module M (vmlinux: the core kernel's)")
	format := fs.String("format", "table", "output format: table or json")
	globs, err := parseTargetsArgs(fs, imf, args, stdout)
	if err != nil {
		return err
	}
	var only []string
	for name, on := range map[string]bool{"traceable": *traceable, "blacklisted": *blacklisted, "notrace": *notrace} {
		if on {
			only = append(only, "--"+name)
		}
	}
	if len(only) > 1 {
		return usagef("--traceable, --blacklisted and --notrace are mutually exclusive (give one)")
	}
	if *format != "table" && *format != "json" {
		return usagef("--format: want table or json, got %q", *format)
	}
	for _, g := range globs {
		if g == "" {
			return usagef("empty GLOB (give a shell glob such as 'vfs_*')")
		}
	}
	if len(globs) == 0 {
		globs = []string{"*"}
	}
	k, _, err := imf.load()
	if err != nil {
		return err
	}
	if *module != "" && *module != "vmlinux" && !slices.ContainsFunc(k.Modules, func(m *image.Module) bool { return m.Name == *module }) {
		return usagef("--module %s: no such module in the image (%s)", *module, moduleNames(k))
	}
	ts, err := listTargets(k, globs, *module)
	if err != nil {
		return err
	}
	var out []probeTarget
	var sum targetsSummary
	for _, t := range ts {
		switch {
		case *traceable && !t.Traceable, *blacklisted && !t.Blacklisted, *notrace && !t.Notrace:
			continue
		}
		out = append(out, t)
		sum.Matched++
		if t.Traceable {
			sum.Traceable++
		}
		if t.Blacklisted {
			sum.Blacklisted++
		}
		if t.Notrace {
			sum.Notrace++
		}
	}
	if *format == "json" {
		if out == nil {
			out = []probeTarget{}
		}
		return writeJSON(stdout, struct {
			Kernel  string         `json:"kernel"`
			Globs   []string       `json:"globs"`
			Targets []probeTarget  `json:"targets"`
			Summary targetsSummary `json:"summary"`
		}{k.Name, globs, out, sum})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "function\tmodule\ttraceable\tnotrace\tblacklisted")
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "-"
	}
	for _, t := range out {
		bl := "-"
		if t.Blacklisted {
			bl = strings.TrimSpace("yes " + t.Blacklist)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, bracketModule(t.Module), yn(t.Traceable), yn(t.Notrace), bl)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d matched: %d traceable, %d blacklisted, %d notrace\n", sum.Matched, sum.Traceable, sum.Blacklisted, sum.Notrace)
	return err
}

// bracketModule is the module as available_filter_functions prints it:
// [name], or vmlinux for the core kernel.
func bracketModule(m string) string {
	if m == "vmlinux" {
		return m
	}
	return "[" + m + "]"
}

func moduleNames(k *image.Kernel) string {
	names := []string{"vmlinux"}
	for _, m := range k.Modules {
		names = append(names, m.Name)
	}
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return strings.Join(names, ", ")
}

// parseTargetsArgs parses the flags with GLOBs among them (a GLOB may come
// before, between or after the flags; after "--" every argument is one).
func parseTargetsArgs(fs *flag.FlagSet, imf *imageFlags, args []string, stdout io.Writer) ([]string, error) {
	if imf.err != nil {
		return nil, imf.err
	}
	globs, err := parseArgs(fs, args, stdout)
	if err != nil {
		return nil, err
	}
	return globs, refuseSynthFlags(fs, imf, "")
}

// listTargets boots k (no switch: the decisions are the same under every
// set) and classifies every function matching a glob, as the front doors
// decide: the blacklist by within_kprobe_blacklist (its part named as a
// refusal's reason names it), traceable and notrace by trace_kprobe's
// checks. Functions are the sized text symbols (scenarios.AllFunctionTargets:
// vmlinux, then each module), matched by name with libbpf's glob_match.
func listTargets(k *image.Kernel, globs []string, module string) ([]probeTarget, error) {
	m, err := scenarios.Boot(k, 0, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("booting the image: %w", err)
	}
	tr := doors.New(m).Tracing()
	c := sim.NewCounters(false)
	named := scenarios.AllFunctionTargets(k, false)
	addrs := scenarios.AllFunctionTargets(k, true)
	if len(named) != len(addrs) {
		return nil, errors.New("kpsim targets: function lists differ") // cannot happen: one walk
	}
	var out []probeTarget
	for i, t := range named {
		name, mod := t.Symbol, "vmlinux"
		if mn, sym, ok := strings.Cut(t.Symbol, ":"); ok {
			name, mod = sym, mn
		}
		if module != "" && mod != module {
			continue
		}
		if !matchAny(name, globs) {
			continue
		}
		addr := addrs[i].Addr
		p := probeTarget{Name: name, Module: mod, Addr: fmt.Sprintf("%#x", addr),
			Traceable: tr.HasFtraceLocation(addr), Notrace: tr.WithinNotraceFunc(addr),
			Blacklisted: m.Blacklist.WithinKprobeBlacklist(c, addr)}
		if p.Blacklisted {
			p.Blacklist = strings.TrimPrefix(m.KP.BlacklistDetail(addr), "blacklisted ")
		}
		out = append(out, p)
	}
	return out, nil
}

// matchAny: libbpf's glob_match against any glob.
func matchAny(name string, globs []string) bool {
	for _, g := range globs {
		if ok, _ := libbpf.GlobMatch(name, g); ok {
			return true
		}
	}
	return false
}
