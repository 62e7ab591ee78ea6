package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
)

// Document is what kpsim report writes: one run (Report) and, for a
// sweep, the sweep across N (Sweep, whose last N is Report).
type Document struct {
	Report *scenarios.ManyReport
	Sweep  *scenarios.Sweep
}

type docRow struct {
	Label string
	Cells []string
}

type docTable struct {
	Title string
	Head  []string
	Rows  []docRow
}

type docPlot struct {
	Title string
	SVG   template.HTML
}

type docData struct {
	Title  string
	Meta   []docRow
	Params []docRow
	Tables []docTable
	Plots  []docPlot
	Notes  []string
	Text   string
}

// build lays the document out once for both HTML and Markdown.
func (d *Document) build() (*docData, error) {
	r := d.Report
	dd := &docData{Title: fmt.Sprintf("kpsim: %d probes via %s (scenario %s)", r.N, r.Via, r.Scenario)}
	if d.Sweep != nil {
		dd.Title = fmt.Sprintf("kpsim sweep: scenario %s via %s, N = %s", r.Scenario, r.Via, joinInts(d.Sweep.Ns))
	}
	if m := r.Meta; m != nil {
		faults := m.Faults
		if faults == "" {
			faults = "none"
		}
		dd.Meta = []docRow{
			{"kpsim", []string{m.Kpsim.String()}},
			{"kernel", []string{m.Kernel.String()}},
			{"kernel text sha256", []string{m.Kernel.TextSHA256}},
		}
		if m.Kernel.SHA256 != "" {
			dd.Meta = append(dd.Meta, docRow{"image file sha256", []string{m.Kernel.SHA256}})
		}
		dd.Meta = append(dd.Meta,
			docRow{"modules", []string{fmt.Sprintf("%d: %s", len(m.Kernel.Modules), strings.Join(m.Kernel.Modules, " "))}},
			docRow{"costs", []string{m.Costs.String()}},
			docRow{"weights", []string{r.Weights}},
			docRow{"faults", []string{faults}},
			docRow{"clock", []string{m.Costs.Clock.Line()}},
			docRow{"cpu assumed", []string{m.CPU}},
			docRow{"sim wall on", []string{m.Host + " (kpsim's own run time, not the kernel's)"}},
			docRow{"command", []string{strings.Join(m.Command, " ")}},
		)
	}
	for _, k := range sortedKeys(r.Params) {
		dd.Params = append(dd.Params, docRow{k, []string{kvValue(r.Params[k])}})
	}
	if len(r.Runs) == 0 {
		return dd, nil
	}
	base, series := r.Runs[0], seriesRun(r)
	// Summary: one row per run.
	sum := docTable{Title: fmt.Sprintf("Runs at N = %d (task: the registering task's cycles, what perf stat CMD counts; system: every context's, perf stat -a)", r.N),
		Head: []string{"run", "ops", "task cycles", "task time (est.)", base.Name + "/run (task)"}}
	if series != nil {
		sum.Head = append(sum.Head, "series/run (task)")
	}
	clk := clockOf(r.Meta)
	sum.Head = append(sum.Head, "system cycles", "system time (est.)", base.Name+"/run (system)", "sim wall", "registered", "optimized", "rejected", "not attempted", "targets", "decisions digest")
	for _, run := range r.Runs {
		c := []string{group(run.TotalOps), group(uint64(scenarios.Cycles(run.TaskCycles))), estTime(clk.NS(run.TaskCycles)), ratio(base.TaskCycles, run.TaskCycles)}
		if series != nil {
			c = append(c, ratio(series.TaskCycles, run.TaskCycles))
		}
		c = append(c, group(uint64(scenarios.Cycles(run.EstCycles))), estTime(clk.NS(run.EstCycles)), ratio(base.EstCycles, run.EstCycles))
		same := "= " + base.Name
		if run.Digest != base.Digest {
			same = "DIFFERENT"
		}
		c = append(c, simWall(run.WallNS), strconv.Itoa(run.Registered), strconv.Itoa(run.Optimized), rejected(run.Rejected),
			strconv.Itoa(run.NotTried), strconv.Itoa(run.Registered+refusedCount(run)+run.NotTried), run.Digest[:16]+" "+same)
		sum.Rows = append(sum.Rows, docRow{run.Name, c})
	}
	dd.Tables = append(dd.Tables, sum)
	var warn docTable
	warn.Title, warn.Head = fmt.Sprintf("WARNING: runs at N = %d whose figures are not of the probes asked for", r.N), []string{"run", "warning"}
	for _, run := range r.Runs {
		for _, aw := range run.AttachWarnings {
			warn.Rows = append(warn.Rows, docRow{run.Name, []string{aw.Text}})
		}
	}
	if sw := d.Sweep; sw != nil {
		warn.Title = "WARNING: sweep points whose figures are not of the probes asked for (left out of the fits and plots when nothing attached)"
		warn.Rows = nil
		for _, l := range sw.Warnings() {
			name, text, _ := strings.Cut(l, " at N=")
			warn.Rows = append(warn.Rows, docRow{name, []string{"N=" + text}})
		}
	}
	if len(warn.Rows) > 0 {
		dd.Tables = append(dd.Tables, warn)
	}
	// Per phase: cycles per run and the ratio to the first run.
	ph := docTable{Title: fmt.Sprintf("The task's estimated cycles and kernel time by phase at N = %d (perf stat CMD)", r.N), Head: []string{"phase"}}
	for _, run := range r.Runs {
		ph.Head = append(ph.Head, run.Name, "time")
		if run != base {
			ph.Head = append(ph.Head, base.Name+"/"+run.Name)
		}
	}
	for _, name := range append(usedPhases(r), "total") {
		row := docRow{Label: name}
		for _, run := range r.Runs {
			v, b := run.Phase(name).TaskCycles, base.Phase(name).TaskCycles
			if name == "total" {
				v, b = run.TaskCycles, base.TaskCycles
			}
			row.Cells = append(row.Cells, group(uint64(scenarios.Cycles(v))), estTime(clk.NS(v)))
			if run != base {
				row.Cells = append(row.Cells, ratio(b, v))
			}
		}
		ph.Rows = append(ph.Rows, row)
	}
	dd.Tables = append(dd.Tables, ph)
	if sw := d.Sweep; sw != nil {
		st := docTable{Title: "Estimated cycles at each N", Head: []string{"N"}}
		for _, run := range sw.Runs {
			st.Head = append(st.Head, run.Name, run.Name+" per probe")
		}
		for i, n := range sw.Ns {
			row := docRow{Label: strconv.Itoa(n)}
			for _, run := range sw.Runs {
				p := run.Points[i]
				pp := "-" // no probe attached: no per-probe figure
				if p.Attached() {
					pp = strconv.FormatFloat(float64(p.EstCycles)/float64(n), 'f', 0, 64)
				}
				row.Cells = append(row.Cells, group(uint64(p.EstCycles)), pp)
			}
			st.Rows = append(st.Rows, row)
		}
		dd.Tables = append(dd.Tables, st)
		ft := docTable{Title: "Growth: least-squares cycles(N) = a + b·N + c·N² and the log-log slope", Head: []string{"run", "phase", "a", "b", "c", "R²", "exponent"}}
		drawn := false
		for _, run := range sw.Runs {
			if run.NoFit != "" {
				ft.Rows = append(ft.Rows, docRow{run.Name, []string{"no fit: it " + run.NoFit, "", "", "", "", ""}})
				continue
			}
			drawn = true
			for _, name := range append([]string{"total"}, sw.Phases...) {
				f := run.Fits[name]
				if name != "total" && run.Points[len(run.Points)-1].PhaseCyc[name] == 0 {
					continue
				}
				ft.Rows = append(ft.Rows, docRow{run.Name, []string{name, sci(f.A), sci(f.B), sci(f.C), strconv.FormatFloat(f.R2, 'f', 4, 64), strconv.FormatFloat(f.Slope+0, 'f', 3, 64)}})
			}
		}
		dd.Tables = append(dd.Tables, ft)
		for _, po := range []PlotOptions{{Format: "svg"}, {Format: "svg", PerProbe: true}} {
			if !drawn { // no run attached a probe at two Ns: nothing to draw
				break
			}
			b, err := Plot(sw, po)
			if err != nil {
				return nil, err
			}
			svg := string(b)
			if i := strings.Index(svg, "<svg"); i >= 0 {
				svg = svg[i:] // drop the XML prolog: inline SVG in HTML
			}
			title := "Estimated cycles against N (log-log; the slope is the growth exponent)"
			if po.PerProbe {
				title = "Estimated cycles per probe against N (log-log)"
			}
			dd.Plots = append(dd.Plots, docPlot{Title: title, SVG: template.HTML(svg)})
		}
	}
	var txt bytes.Buffer
	if err := Table(&txt, r); err != nil {
		return nil, err
	}
	dd.Text = txt.String()
	dd.Notes = []string{
		"Counts are exact and repeatable: the same command prints the same counts.",
		"Cycles are counts × weights (docs/cost-model.md); est. kernel time is the cycles at the clock named above. Sim wall is kpsim's own run time on the measuring machine, not the kernel's: compare it only as a ratio within one run.",
		retainedNote,
	}
	return dd, nil
}

var htmlDoc = template.Must(template.New("doc").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:80em;color:#111}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #bbb;padding:.2em .6em;text-align:right;font-variant-numeric:tabular-nums}
th{background:#eee}td.l,th.l{text-align:left}
table.meta td{text-align:left;font-family:monospace}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:.85em}
#render-check{color:#777;font-size:.8em}
</style></head><body>
<h1>{{.Title}}</h1>
<h2>How this report was made</h2>
<table class="meta">{{range .Meta}}<tr><th class="l">{{.Label}}</th><td>{{index .Cells 0}}</td></tr>{{end}}</table>
<h2>Parameters</h2>
<table class="meta">{{range .Params}}<tr><th class="l">{{.Label}}</th><td>{{index .Cells 0}}</td></tr>{{end}}</table>
{{range .Tables}}<h2>{{.Title}}</h2>
<table class="data"><tr>{{range $i, $h := .Head}}<th{{if eq $i 0}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="l">{{.Label}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{range .Plots}}<h2>{{.Title}}</h2>
<figure class="plot">{{.SVG}}</figure>
{{end}}<h2>The terminal report</h2>
<pre>{{.Text}}</pre>
{{range .Notes}}<p>{{.}}</p>{{end}}
<p id="render-check">not checked</p>
<script>
// A self-check a headless browser reads back: every table and plot laid out with a size.
window.addEventListener("load", function () {
  var t = document.querySelectorAll("table.data"), p = document.querySelectorAll("figure.plot svg"), bad = 0;
  t.forEach(function (e) { var r = e.getBoundingClientRect(); if (!(r.width > 0 && r.height > 0) || e.rows.length < 2) bad++; });
  p.forEach(function (e) { var r = e.getBoundingClientRect(); if (!(r.width > 0 && r.height > 0) || e.querySelectorAll("path").length < 3) bad++; });
  document.getElementById("render-check").textContent = "rendered tables=" + t.length + " plots=" + p.length + " bad=" + bad;
});
</script>
</body></html>
`))

// HTML writes one self-contained HTML file: styles, tables and the
// plots (inline SVG) all in it, nothing fetched.
func HTML(w io.Writer, d *Document) error {
	dd, err := d.build()
	if err != nil {
		return err
	}
	return htmlDoc.Execute(w, dd)
}

// Markdown writes the report as Markdown tables (for a cover
// letter); the plots are in the HTML form only.
func Markdown(w io.Writer, d *Document) error {
	dd, err := d.build()
	if err != nil {
		return err
	}
	esc := strings.NewReplacer("|", `\|`, "*", `\*`, "_", `\_`)
	fmt.Fprintf(w, "# %s\n\n", dd.Title)
	kv := func(title string, rows []docRow) {
		fmt.Fprintf(w, "## %s\n\n| | |\n|---|---|\n", title)
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | `%s` |\n", esc.Replace(r.Label), strings.ReplaceAll(r.Cells[0], "`", "'"))
		}
		fmt.Fprintln(w)
	}
	kv("How this report was made", dd.Meta)
	kv("Parameters", dd.Params)
	for _, t := range dd.Tables {
		fmt.Fprintf(w, "## %s\n\n|", t.Title)
		for _, h := range t.Head {
			fmt.Fprintf(w, " %s |", esc.Replace(h))
		}
		fmt.Fprint(w, "\n|")
		for i := range t.Head {
			if i == 0 {
				fmt.Fprint(w, ":---|")
			} else {
				fmt.Fprint(w, "---:|")
			}
		}
		fmt.Fprintln(w)
		for _, r := range t.Rows {
			fmt.Fprintf(w, "| %s |", esc.Replace(r.Label))
			for _, c := range r.Cells {
				fmt.Fprintf(w, " %s |", esc.Replace(c))
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	if len(dd.Plots) > 0 {
		fmt.Fprintf(w, "(%d plots: kpsim report --out FILE.html draws them inline, kpsim sweep --plot FILE.svg alone.)\n\n", len(dd.Plots))
	}
	for _, n := range dd.Notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	return nil
}
