package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

func runList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stdout)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIOS")
	if len(scenarios.List()) == 0 {
		fmt.Fprintln(tw, "  (none registered in this build)")
	}
	for _, s := range scenarios.List() {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Doc)
	}
	fmt.Fprintln(tw, "\nPATCH SWITCHES\tpatch\trequires\twhat it changes")
	for _, s := range sim.AllSwitches() {
		info := s.Info()
		var req []string
		for _, r := range info.Requires {
			req = append(req, r.String())
		}
		rules := s.Rules()
		if len(rules.RequiresAny) > 0 {
			req = append(req, fmt.Sprintf("one of %d indexes", len(rules.RequiresAny)))
		}
		patch := info.Patch
		switch {
		case rules.Design:
			patch = "design"
		case patch == "":
			patch = "beyond"
		}
		name := info.Name
		if rules.Param != "" {
			name += "=" + rules.Param
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", name, patch, strings.Join(req, ","), info.Doc)
	}
	fmt.Fprintln(tw, "\nPRESETS")
	for _, p := range sim.Presets() {
		names := strings.Join(p.Set.Names(), ",")
		if names == "" {
			names = "(no switch)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, p.Doc, names)
	}
	fmt.Fprintln(tw, "\nFAULT POINTS")
	for _, f := range sim.FaultPoints() {
		fmt.Fprintf(tw, "  %s\t%s\n", f.Name, f.Doc)
	}
	fmt.Fprintln(tw, "\nPHASES")
	for _, p := range sim.Phases() {
		fmt.Fprintf(tw, "  %s\t%s\n", p.Name, p.Doc)
	}
	fmt.Fprintln(tw, "\nCOUNTED OPS\tcycles\twhy that weight")
	for _, o := range sim.Ops() {
		fmt.Fprintf(tw, "  %s\t%g\t%s\n", o.Name, o.Cycles, o.Rationale)
	}
	return tw.Flush()
}
