// Package report renders the reports package scenarios makes: tables for
// a terminal (at most TableWidth columns), JSON, CSV, Go benchmark lines
// for benchstat, one self-contained HTML file or Markdown, sweep plots
// (SVG, PNG) and the per-probe listing.
//
// Every renderer is a function of a writer and the report it writes,
// named by the report and the form; the run many report
// (*scenarios.ManyReport), the one most commands print, goes unprefixed:
//
//	Table, JSON, CSV, Bench, DesignTable, Probes     *scenarios.ManyReport
//	SweepTable, SweepJSON, SweepCSV, SweepBench      *scenarios.Sweep
//	KallsymsTable, KallsymsJSON, KallsymsCSV, KallsymsBench
//	BPFTable (run session, run multi), CrossoverTable, TracingMultiTable
//	HTML, Markdown                                   *Document (a run, or a sweep and its last run)
//	Plot, PlotPoints                                 *scenarios.Sweep (bytes, not a writer)
//
// Renderers only read the reports: what a run counted, decided and
// measured is fixed when scenarios returns it, and every form prints the
// same figures (cycles rounded to integers by scenarios.Cycles). The JSON
// forms carry scenarios.SchemaVersion.
package report
