package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/sim/calibrate"
)

// listOps prints every counted op with its documented weight (and why),
// the built-in hot and cold weights and the benchmark they came from.
func listOps(tw *tabwriter.Writer) error {
	hot, err := calibrate.Builtin("hot")
	if err != nil {
		return err
	}
	cold, err := calibrate.Builtin("cold")
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "\nCOUNTED OPS\tdocumented\thot\tcold\tcalibrated by\twhy the documented weight\n")
	for i, o := range sim.Ops() {
		op := sim.OpAt(i)
		kind, what := calibrate.Classify(o)
		by := ""
		switch kind {
		case calibrate.Measured:
			by = what
			if hot.Source(op) == "default" || cold.Source(op) == "default" {
				by += " (not in the built-in profile: documented weight used)"
			}
		case calibrate.Documented:
			by = "documented: not measurable from user space"
		case calibrate.Metric:
			by = "metric, never priced"
		default:
			by = "uncovered: documented weight used"
		}
		why := o.Rationale
		if o.RangeSource != "" {
			why += fmt.Sprintf(" [range %g-%g]", o.Lo, o.Hi)
		}
		if o.Context != sim.Task {
			why += " [runs in " + o.Context.String() + "]"
		}
		fmt.Fprintf(tw, "  %s\t%g\t%g\t%g\t%s\t%s\n", o.Name, o.Cycles, hot.Weight(op), cold.Weight(op), by, why)
	}
	fmt.Fprintf(tw, "\n  hot/cold: %s; %s\n", hot.Describe(), cold.Describe())
	fmt.Fprintln(tw, "  run kallsyms uses hot by default, run many cold; --cost-regime documented uses the documented column")
	return tw.Flush()
}

func runList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stdout)
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIOS")
	for _, sc := range scenarioTable {
		fmt.Fprintf(tw, "  %s\t%s\n", sc.name, sc.doc)
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
	fmt.Fprintf(tw, "\nSWITCHES BY GENERATION\tthe series were written on %s; each switch on an older kernel models a backport (docs/series.md)\n", sim.SeriesBase)
	for _, s := range sim.AllSwitches() {
		var on []string
		for _, g := range []string{"6.1", "6.12", sim.SeriesBase} {
			switch a := s.On(g); {
			case a.Upstream:
				on = append(on, g+": upstream already")
			case a.Backport != "" && strings.HasPrefix(a.Backport, "a backport"):
				on = append(on, g+": backport, hunks redone")
			case g == sim.SeriesBase && a.Backport != "":
				on = append(on, g+": "+a.Backport)
			case a.Backport != "":
				on = append(on, g+": applies as written")
			default:
				on = append(on, g+": the base")
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\n", s.String(), strings.Join(on, "; "))
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
	docs := map[string]string{}
	for _, p := range sim.Phases() {
		docs[p.Name] = p.Doc
		if p.Context != sim.Task {
			docs[p.Name] += " [runs in " + p.Context.String() + ": not in perf stat CMD's count]"
		}
	}
	for _, name := range scenarios.PhaseNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", name, docs[name])
	}
	return listOps(tw)
}
