package main

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/scenarios/report"
)

const reportUsage = "kpsim report many --out FILE.html|FILE.md [--format html|markdown] [--n N | --n START:STOP:STEP | --n N,N,...] [run many flags]"

// runReport writes one self-contained HTML file (tables, plots inline,
// every parameter, the version, the image digest) or Markdown: of one run
// (--n N) or of a sweep (--n with several values), whose last N gives
// the run tables.
func runReport(args []string, stdout, stderr io.Writer) error {
	hasN := false
	for _, a := range args {
		n := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]
		hasN = hasN || (strings.HasPrefix(a, "-") && n == "n")
	}
	if !hasN && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args, "--n", "20000") // run many's default N
	}
	j, err := parseSweep("report", args, stdout, []string{"html", "markdown"})
	if err != nil {
		return err
	}
	if j.out == "" {
		return usagef("--out: required (FILE.html or FILE.md)")
	}
	set := map[string]bool{}
	for _, a := range args {
		set[strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]] = strings.HasPrefix(a, "-")
	}
	if !set["format"] {
		switch strings.ToLower(filepath.Ext(j.out)) {
		case ".md", ".markdown":
			j.format = "markdown"
		case ".html", ".htm":
			j.format = "html"
		default:
			return usagef("--out: want FILE.html or FILE.md (or give --format), got %q", j.out)
		}
	}
	for _, f := range []string{"plot-phase", "plot-per-probe", "plot-linear"} {
		if set[f] {
			return usagef("--%s: kpsim report draws its own plots (kpsim sweep --plot takes it)", f)
		}
	}
	sink, _, reps, err := j.run(stdout, stderr) // no --plot: report draws its own
	defer sink.abort()
	if err != nil {
		return err
	}
	doc := &report.Document{Report: reps[len(reps)-1]}
	if len(reps) > 1 {
		if doc.Sweep, err = scenarios.NewSweep(reps); err != nil {
			return err
		}
	}
	if m := doc.Report.Meta; m != nil {
		mm := *m
		mm.Command = append([]string{"kpsim", "report"}, j.given...)
		doc.Report.Meta = &mm
	}
	if err := emitReport(sink, stdout, func(w io.Writer) error {
		if j.format == "markdown" {
			return report.Markdown(w, doc)
		}
		return report.HTML(w, doc)
	}); err != nil {
		return err
	}
	warnings := doc.Report.AttachWarnings()
	if doc.Sweep != nil {
		warnings = doc.Sweep.Warnings()
	}
	return attachOutcome(stderr, "report", warnings, j.allowRefusals)
}
