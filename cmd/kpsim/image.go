package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kpsim/kpsim/image"
)

func runImage(args []string, stdout, stderr io.Writer) error {
	fs, imf := newImageFlagSet("image", args, stdout)
	format := fs.String("format", "table", "output format: table or json")
	sites := fs.String("boot-sites", "", "with --kernel: write every site boot patching visited (TSV: table, address, symbol+offset, action, bytes before, bytes after) to FILE")
	if err := parseImageFlags(fs, imf, args, stdout, nil); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format: want table or json, got %q", *format)
	}
	if *sites != "" && imf.synthetic() {
		return usagef("--boot-sites: needs --kernel (the generator's text is not boot-patched)")
	}
	imf.record = *sites != ""
	files, err := newFileSet(fs, stdout)
	if err != nil {
		return err
	}
	if err := files.stdoutReport(""); err != nil { // the summary goes to stdout
		return err
	}
	sink, err := files.out("boot-sites", *sites)
	if err != nil {
		return err
	}
	defer sink.abort()
	k, _, err := imf.load()
	if err != nil {
		return err
	}
	if sink != nil {
		if err := writeBootSites(sink, k, imf.booted); err != nil {
			return err
		}
	}
	s := k.Summarize()
	if *format == "json" {
		return writeJSON(stdout, s)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\t\n", k, v) }
	fmt.Fprintf(stdout, "kernel image: %s\n%s\nboot CPU: %s\n\n", s.Name, generationLine(s.Config), s.CPU)
	row("functions", s.Functions)
	row("  in .init.text", s.InitFunctions)
	row("symbols", s.Symbols)
	row("text bytes", s.TextBytes)
	row("  core text", s.CoreTextBytes)
	row("  init text", s.InitTextBytes)
	row("jump entries", s.JumpEntries)
	row("static-call sites", s.StaticCallSites)
	row("bug entries", s.BugEntries)
	row("exception entries", s.ExceptionEntries)
	row("blacklist entries", s.BlacklistEntries)
	row("mcount locations", s.McountLocations)
	row("modules", s.Modules)
	tw.Flush()
	fmt.Fprintln(stdout, "\nblacklisted section ranges:")
	for _, r := range s.BlacklistRanges {
		fmt.Fprintf(stdout, "  %-22s %s-%s (%d bytes)\n", r.Name, r.Start, r.End, r.Bytes)
	}
	if len(s.ModuleTables) > 0 {
		fmt.Fprintln(stdout, "\nmodules:")
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "name\tstate\tfunctions\ttext\tinit text\tjump\tstatic call\tbug\tmcount\textable\tblacklist\tranges\t")
		line := func(m image.ModuleSummary) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", m.Name, m.State, m.Functions, m.TextBytes,
				m.InitTextBytes, m.JumpEntries, m.StaticCallSites, m.BugEntries, m.McountLocations, m.ExceptionEntries, m.BlacklistEntries, m.BlacklistRanges)
		}
		for _, m := range s.ModuleTables {
			line(m)
		}
		line(s.ModuleTotals)
		tw.Flush()
	}
	c := s.Config
	fmt.Fprintf(stdout, "\nconfig: ibt=%v retpoline=%v rethunk=%v returns_patched=%v kprobes_on_ftrace=%v bug_verbose=%v cpu=%s\n",
		c.IBT, c.Retpoline, c.RetThunk, c.ReturnsPatched, c.KprobesOnFtrace, c.BugVerbose, s.CPU)
	for _, f := range c.Facts {
		fmt.Fprintf(stdout, "  %s=%s (%s)\n", f.Option, f.Value, f.From)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	return nil
}

// generationLine names the kernel release and the generation kpsim
// models it as.
func generationLine(c image.Config) string {
	return image.ReleaseLine(c.Version, c.Gen.Effective().String())
}
