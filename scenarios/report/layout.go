package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kpsim/kpsim/doors"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
)

// TableWidth is the widest line a table report prints (a terminal, an
// email, a cover letter).
const TableWidth = 100

// usedPhases are the phases any run counted in, in PhaseNames order: the
// rows of the table report (JSON, CSV and bench list every phase).
func usedPhases(r *scenarios.ManyReport) []string {
	var out []string
	for _, name := range scenarios.PhaseNames() {
		for _, run := range r.Runs {
			if p := run.Phase(name); p.Ops != 0 || p.EstCycles != 0 || len(p.Counts) != 0 {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// seriesRun is the run named "series" when there is one besides the
// first: ablation shows every run against it as well as against none.
func seriesRun(r *scenarios.ManyReport) *scenarios.RunResult {
	if len(r.Runs) < 3 {
		return nil
	}
	for _, run := range r.Runs[1:] {
		if run.Name == "series" {
			return run
		}
	}
	return nil
}

// jsonPhase and jsonRun are the JSON layout: integer cycles, and every
// phase in PhaseNames order (zeros included) in every run.
type jsonPhase struct {
	Name      string `json:"name"`
	Ops       uint64 `json:"ops"`
	EstCycles int64  `json:"est_cycles"`
	// TaskCycles is the registering task's share (`perf stat CMD`);
	// ByContext splits EstCycles by context (non-zero contexts only).
	TaskCycles int64            `json:"task_est_cycles"`
	ByContext  map[string]int64 `json:"est_cycles_by_context,omitempty"`
	// EstNS and TaskNS are EstCycles and TaskCycles as estimated kernel
	// time at the report's clock (meta.costs.clock).
	EstNS  int64 `json:"est_kernel_ns"`
	TaskNS int64 `json:"task_est_kernel_ns"`
	// WallNS is kpsim's own run time (sim wall), not the kernel's.
	WallNS int64             `json:"wall_ns"`
	Counts map[string]uint64 `json:"counts"`
}

// jsonWait is the time one op's counts keep a context waiting.
type jsonWait struct {
	Op        string `json:"op"`
	Context   string `json:"context"`
	Count     uint64 `json:"count"`
	TypicalNS int64  `json:"typical_ns"`
	LowNS     int64  `json:"low_ns"`
	HighNS    int64  `json:"high_ns"`
	Source    string `json:"source"`
}

func byContext(c sim.ContextCycles) map[string]int64 {
	var m map[string]int64
	for _, ctx := range sim.Contexts() {
		if v := scenarios.Cycles(c[ctx]); v != 0 {
			if m == nil {
				m = map[string]int64{}
			}
			m[ctx.String()] = v
		}
	}
	return m
}

type jsonRun struct {
	scenarios.RunOutcome
	EstCycles int64 `json:"est_cycles"`
	// TaskCycles: what `perf stat CMD` counts; ByContext: EstCycles by
	// context; Waits: time counted ops keep a context asleep; TopOps: the
	// five ops dearest to the task and three outside it, with sources.
	TaskCycles int64               `json:"task_est_cycles"`
	ByContext  map[string]int64    `json:"est_cycles_by_context,omitempty"`
	Waits      []jsonWait          `json:"waits,omitempty"`
	TopOps     []scenarios.OpShare `json:"top_ops,omitempty"`
	// EstNS and TaskNS: the cycles as estimated kernel time (meta.costs.clock).
	EstNS  int64 `json:"est_kernel_ns"`
	TaskNS int64 `json:"task_est_kernel_ns"`
	// WallNS is kpsim's own run time (sim wall), not the kernel's.
	WallNS    int64               `json:"wall_ns"`
	Retained  uint64              `json:"sim_retained_bytes"`
	Phases    []jsonPhase         `json:"phases"`
	KernelMem map[string]int64    `json:"kernel_bytes"`
	Growth    []*scenarios.Growth `json:"growth,omitempty"`
}

type jsonReport struct {
	Schema   int             `json:"schema_version"`
	Meta     *scenarios.Meta `json:"meta"`
	Scenario string          `json:"scenario"`
	Kernel   string          `json:"kernel"`
	CPU      string          `json:"cpu"` // boot CPU the text was patched for, "none" when as built
	Weights  string          `json:"weights"`
	N        int             `json:"n"`
	Via      doors.Via       `json:"via"`
	Params   map[string]any  `json:"params"`
	// SwitchNotes: how the runs' switches relate to the kernel's
	// generation (scenarios.SwitchNotes), when that needs saying.
	SwitchNotes []string  `json:"switch_notes,omitempty"`
	Runs        []jsonRun `json:"runs"`
	// Sensitivity: --sensitivity's table, every priced weight.
	Sensitivity *scenarios.SensitivityReport `json:"sensitivity,omitempty"`
	// Ablation: --ablation's summary, one line per switch (the runs
	// above hold every figure).
	Ablation *scenarios.AblationSummary `json:"ablation_summary,omitempty"`
}

func jsonOf(r *scenarios.ManyReport) jsonReport {
	out := jsonReport{Schema: scenarios.SchemaVersion, Meta: r.Meta, Scenario: r.Scenario, Kernel: r.Kernel, CPU: r.CPU, Weights: r.Weights, N: r.N, Via: r.Via, Params: r.Params, Runs: []jsonRun{},
		Sensitivity: r.Sensitivity, Ablation: scenarios.Ablation(r)}
	if r.Meta != nil {
		out.SwitchNotes = scenarios.SwitchNotes(r.Meta.Kernel.Generation, r.Runs)
	}
	clk := clockOf(r.Meta)
	ns := func(cyc float64) int64 { return int64(math.Round(clk.NS(cyc))) }
	for _, run := range r.Runs {
		jr := jsonRun{RunOutcome: run.RunOutcome, EstCycles: scenarios.Cycles(run.EstCycles), WallNS: run.WallNS, Retained: run.RetainedBytes,
			EstNS: ns(run.EstCycles), TaskNS: ns(run.TaskCycles),
			KernelMem: run.KernelMem, Growth: run.Growth,
			TaskCycles: scenarios.Cycles(run.TaskCycles), ByContext: byContext(run.Contexts)}
		for _, wt := range run.Waits {
			jr.Waits = append(jr.Waits, jsonWait{Op: wt.Op.Name(), Context: wt.Context.String(), Count: wt.N,
				TypicalNS: wt.Typical.Nanoseconds(), LowNS: wt.Lo.Nanoseconds(), HighNS: wt.Hi.Nanoseconds(), Source: wt.Op.Info().Wait.Source})
		}
		if r.Costs != nil {
			jr.TopOps = append(scenarios.TopOps(run, r.Costs, true, 5), scenarios.TopOps(run, r.Costs, false, 3)...)
		}
		if jr.Patches == nil {
			jr.Patches = []string{}
		}
		for _, name := range scenarios.PhaseNames() {
			p := run.Phase(name)
			if p.Counts == nil {
				p.Counts = map[string]uint64{}
			}
			jr.Phases = append(jr.Phases, jsonPhase{Name: name, Ops: p.Ops, EstCycles: scenarios.Cycles(p.EstCycles),
				TaskCycles: scenarios.Cycles(p.TaskCycles), ByContext: byContext(p.Contexts), WallNS: p.WallNS, Counts: p.Counts,
				EstNS: ns(p.EstCycles), TaskNS: ns(p.TaskCycles)})
		}
		out.Runs = append(out.Runs, jr)
	}
	return out
}

// csvRows is the CSV: one row per run, phase and counter, then per run
// and phase a "total" counter row and per run a "total" phase row. Every
// row carries the run's outcome (registered, optimized, not attempted,
// one rejected_CODE column per errno any run returned, digests), how
// the report was made (version, kernel, costs, faults), the run's targets
// and its attach warnings' causes (none-attached;unattempted), so one row read
// alone is self-describing. Cycles are integers.
func csvRows(r *scenarios.ManyReport, costs interface{ WeightByName(string) float64 }) [][]string {
	codeSet := map[string]bool{}
	for _, run := range r.Runs {
		for c := range run.Rejected {
			codeSet[c] = true
		}
	}
	codes := sortedKeys(codeSet)
	head := []string{"run", "patches", "phase", "counter", "count", "est_cycles", "est_kernel_ns", "sim_wall_ns",
		"registered", "optimized", "on_ftrace", "not_attempted"}
	for _, c := range codes {
		head = append(head, "rejected_"+c)
	}
	head = append(head, "decisions_digest", "reasons_digest", "n", "via", "kpsim", "kernel", "kernel_sha256", "costs", "faults", "targets", "attach_warnings")
	rows := [][]string{head}
	var m scenarios.Meta
	if r.Meta != nil {
		m = *r.Meta
	}
	clk := clockOf(r.Meta)
	ksum := m.Kernel.SHA256
	if ksum == "" {
		ksum = m.Kernel.TextSHA256
	}
	for _, run := range r.Runs {
		tail := []string{strconv.Itoa(run.Registered), strconv.Itoa(run.Optimized), strconv.Itoa(run.OnFtrace), strconv.Itoa(run.NotTried)}
		for _, c := range codes {
			tail = append(tail, strconv.Itoa(run.Rejected[c]))
		}
		tail = append(tail, run.Digest, run.WhyDigest, strconv.Itoa(r.N), string(r.Via), m.Kpsim.String(), m.Kernel.String(), ksum, m.Costs.String(), m.Faults,
			strconv.Itoa(run.Registered+refusedCount(run)+run.NotTried), attachCauses(run.AttachWarnings))
		patches := strings.Join(run.Patches, ",")
		row := func(phase, counter string, count uint64, cyc float64, wall int64) {
			rows = append(rows, append([]string{run.Name, patches, phase, counter, strconv.FormatUint(count, 10),
				strconv.FormatInt(scenarios.Cycles(cyc), 10), strconv.FormatInt(int64(math.Round(clk.NS(cyc))), 10), strconv.FormatInt(wall, 10)}, tail...))
		}
		for _, name := range scenarios.PhaseNames() {
			p := run.Phase(name)
			for _, op := range sortedKeys(p.Counts) {
				row(name, op, p.Counts[op], float64(p.Counts[op])*costs.WeightByName(op), 0)
			}
			row(name, "total", p.Ops, p.EstCycles, p.WallNS)
		}
		row("total", "total", run.TotalOps, run.EstCycles, run.WallNS)
	}
	return rows
}

// col is one column of a grouped table; unit is a run's columns, headed
// by the run's name.
type col struct {
	head  string
	cells []string
}

type unit struct {
	name string
	cols []col
}

func (u unit) widths() ([]int, int) {
	ws := make([]int, len(u.cols))
	total := 0
	for i, c := range u.cols {
		ws[i] = textWidth(c.head)
		for _, s := range c.cells {
			ws[i] = max(ws[i], textWidth(s))
		}
		total += ws[i]
		if i > 0 {
			total += 2
		}
	}
	if n := textWidth(u.name); n > total {
		ws[0] += n - total
		total = n
	}
	return ws, total
}

// renderGrouped prints a table whose rows are labels and whose columns
// come in units (one per run), packing as many units side by side as fit
// TableWidth and printing the rest in further groups below.
func renderGrouped(w io.Writer, title, labelHead string, labels []string, units []unit) {
	lw := textWidth(labelHead)
	for _, l := range labels {
		lw = max(lw, textWidth(l))
	}
	var groups [][]unit
	width := 1 + lw
	for _, u := range units {
		_, uw := u.widths()
		if len(groups) == 0 || width+2+uw > TableWidth {
			groups = append(groups, nil)
			width = 1 + lw
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], u)
		width += 2 + uw
	}
	heads := false
	for _, u := range units {
		for _, c := range u.cols {
			heads = heads || c.head != ""
		}
	}
	done := 0
	for gi, g := range groups {
		t := title
		if len(groups) > 1 {
			t = fmt.Sprintf("%s (runs %d-%d of %d)", title, done+1, done+len(g), len(units))
		}
		done += len(g)
		if gi > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, " %s\n", t)
		var b strings.Builder
		b.WriteString(" " + pad("", lw))
		for _, u := range g {
			_, uw := u.widths()
			b.WriteString("  " + pad(u.name, uw))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
		if heads {
			b.Reset()
			b.WriteString(" " + pad(labelHead, lw))
			for _, u := range g {
				ws, _ := u.widths()
				for i, c := range u.cols {
					b.WriteString("  " + pad(c.head, ws[i]))
				}
			}
			fmt.Fprintln(w, b.String())
		}
		for row, l := range labels {
			b.Reset()
			b.WriteString(" " + pad(l, lw))
			for _, u := range g {
				ws, _ := u.widths()
				for i, c := range u.cols {
					b.WriteString("  " + pad(c.cells[row], ws[i]))
				}
			}
			fmt.Fprintln(w, b.String())
		}
	}
}

// pad right-aligns s in n columns.
func pad(s string, n int) string {
	if textWidth(s) >= n {
		return s
	}
	return strings.Repeat(" ", n-textWidth(s)) + s
}

// textWidth is the columns s takes on a terminal: one a rune ("µs").
func textWidth(s string) int { return utf8.RuneCountInString(s) }

// writeWrapped prints a long line wrapped at TableWidth, continuation
// lines after indent.
func writeWrapped(w io.Writer, line, indent string) {
	for len(line) > TableWidth {
		cut := strings.LastIndex(line[:TableWidth+1], " ")
		if cut <= len(indent) {
			break // one word longer than the line: print it whole
		}
		fmt.Fprintln(w, strings.TrimRight(line[:cut], " "))
		line = indent + strings.TrimLeft(line[cut:], " ")
	}
	fmt.Fprintln(w, line)
}

// phaseTable prints every used phase's ops, estimated cycles and
// estimated kernel time per run, with none/run (the first run over it)
// and, with a series run among several, series/run. More than four runs,
// or runs that would not fit side by side with them, drop the ops columns
// (they are in JSON, CSV and bench).
func phaseTable(w io.Writer, r *scenarios.ManyReport) {
	withOps := len(r.Runs) <= 4
	labels, units, rt := phaseUnits(r, withOps)
	if withOps && !fits(labels, "phase", units) {
		// Without the ops columns, do the runs fit side by side?
		if l, u, t := phaseUnits(r, false); fits(l, "phase", u) {
			withOps, labels, units, rt = false, l, u, t
		}
	}
	title := "operations, the task's estimated cycles and kernel time by phase (`perf stat CMD`)"
	if !withOps {
		title = "the task's estimated cycles and kernel time by phase (ops: json, csv, bench)"
	}
	renderGrouped(w, title, "phase", labels, units)
	rt.footnote(w)
	fmt.Fprintln(w)
	outsideTable(w, r)
}

// fits says whether every unit fits side by side in TableWidth.
func fits(labels []string, labelHead string, units []unit) bool {
	width := 1 + textWidth(labelHead)
	for _, l := range labels {
		width = max(width, 1+textWidth(l))
	}
	for _, u := range units {
		_, uw := u.widths()
		width += 2 + uw
	}
	return width <= TableWidth
}

// phaseUnits are the phase table's rows and columns, with or without
// the ops columns.
func phaseUnits(r *scenarios.ManyReport, withOps bool) ([]string, []unit, *ratios) {
	base, series := r.Runs[0], seriesRun(r)
	clk := clockOf(r.Meta)
	names := usedPhases(r)
	labels := append(append([]string(nil), names...), "total")
	var units []unit
	rt := &ratios{}
	for _, run := range r.Runs {
		u := unit{name: run.Name}
		var ops, cyc, tm, vb, vs col
		ops.head, cyc.head, tm.head = "ops", "task cycles", "time"
		vb.head, vs.head = base.Name+"/run", "series/run"
		for _, name := range names {
			p, bp := run.Phase(name), base.Phase(name)
			ops.cells = append(ops.cells, group(p.Ops))
			cyc.cells = append(cyc.cells, group(uint64(scenarios.Cycles(p.TaskCycles))))
			tm.cells = append(tm.cells, estTime(clk.NS(p.TaskCycles)))
			vb.cells = append(vb.cells, rt.of(bp.TaskCycles, p.TaskCycles))
			if series != nil {
				vs.cells = append(vs.cells, rt.of(series.Phase(name).TaskCycles, p.TaskCycles))
			}
		}
		ops.cells = append(ops.cells, group(run.TotalOps))
		cyc.cells = append(cyc.cells, group(uint64(scenarios.Cycles(run.TaskCycles))))
		tm.cells = append(tm.cells, estTime(clk.NS(run.TaskCycles)))
		vb.cells = append(vb.cells, rt.of(base.TaskCycles, run.TaskCycles))
		if series != nil {
			vs.cells = append(vs.cells, rt.of(series.TaskCycles, run.TaskCycles))
		}
		if withOps {
			u.cols = append(u.cols, ops)
		}
		u.cols = append(u.cols, cyc, tm)
		if run != base {
			u.cols = append(u.cols, vb)
		}
		if series != nil && run != series {
			u.cols = append(u.cols, vs)
		}
		units = append(units, u)
	}
	return labels, units, rt
}

// outsideTable prints the cycles each phase spent outside the registering
// task, by context (a kworker's optimizer, other CPUs' IPI handlers, RCU
// callbacks), and the system total: what `perf stat -a` counts of this
// work and `perf stat CMD` does not. Nothing when every cycle is the
// task's.
func outsideTable(w io.Writer, r *scenarios.ManyReport) {
	base := r.Runs[0]
	type row struct {
		phase string
		ctx   sim.Context
	}
	var rows []row
	for _, name := range usedPhases(r) {
		for _, ctx := range sim.Contexts()[1:] {
			for _, run := range r.Runs {
				if run.Phase(name).Contexts[ctx] != 0 {
					rows = append(rows, row{name, ctx})
					break
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	labels := make([]string, 0, len(rows)+2)
	for _, x := range rows {
		labels = append(labels, x.phase+" ("+x.ctx.String()+")")
	}
	labels = append(labels, "outside the task", "system total")
	var units []unit
	var rt ratios
	clk := clockOf(r.Meta)
	for _, run := range r.Runs {
		var cyc, tm, vb col
		cyc.head, tm.head, vb.head = "cycles", "time", base.Name+"/run"
		for _, x := range rows {
			v, b := run.Phase(x.phase).Contexts[x.ctx], base.Phase(x.phase).Contexts[x.ctx]
			cyc.cells = append(cyc.cells, group(uint64(scenarios.Cycles(v))))
			tm.cells = append(tm.cells, estTime(clk.NS(v)))
			vb.cells = append(vb.cells, rt.of(b, v))
		}
		out, bout := run.EstCycles-run.TaskCycles, base.EstCycles-base.TaskCycles
		cyc.cells = append(cyc.cells, group(uint64(scenarios.Cycles(out))), group(uint64(scenarios.Cycles(run.EstCycles))))
		tm.cells = append(tm.cells, estTime(clk.NS(out)), estTime(clk.NS(run.EstCycles)))
		vb.cells = append(vb.cells, rt.of(bout, out), rt.of(base.EstCycles, run.EstCycles))
		u := unit{name: run.Name, cols: []col{cyc, tm}}
		if run != base {
			u.cols = append(u.cols, vb)
		}
		units = append(units, u)
	}
	renderGrouped(w, "cycles outside the task (`perf stat -a` counts them, CMD's does not)", "phase (context)", labels, units)
	rt.footnote(w)
	fmt.Fprintln(w)
}

// summaryTable prints one column per run: totals, ratios, wall time,
// outcomes, memory and the decisions digest.
func summaryTable(w io.Writer, r *scenarios.ManyReport) {
	base, series := r.Runs[0], seriesRun(r)
	clk := clockOf(r.Meta)
	labels := []string{"ops", "task cycles", "task time (est.)", base.Name + "/run (task)"}
	if series != nil {
		labels = append(labels, "series/run (task)")
	}
	labels = append(labels, "system cycles", "system time (est.)", base.Name+"/run (system)", "task waits", "sim wall", base.Name+"/run (sim wall)", "registered", "optimized", "rejected", "kernel bytes +", "sim retained", "decisions")
	var units []unit
	var rt ratios
	for _, run := range r.Runs {
		same := "= " + base.Name
		if run.Digest != base.Digest {
			same = "DIFFERENT"
		}
		cells := []string{group(run.TotalOps), group(uint64(scenarios.Cycles(run.TaskCycles))), estTime(clk.NS(run.TaskCycles)), rt.of(base.TaskCycles, run.TaskCycles)}
		if series != nil {
			cells = append(cells, rt.of(series.TaskCycles, run.TaskCycles))
		}
		cells = append(cells, group(uint64(scenarios.Cycles(run.EstCycles))), estTime(clk.NS(run.EstCycles)), rt.of(base.EstCycles, run.EstCycles), taskWait(run))
		cells = append(cells, simWall(run.WallNS), rt.of(float64(base.WallNS), float64(run.WallNS)),
			strconv.Itoa(run.Registered), strconv.Itoa(run.Optimized), rejected(run.Rejected), signed(memSum(run)-memSum(base)),
			mib(run.RetainedBytes), run.Digest[:12]+" "+same)
		units = append(units, unit{name: run.Name, cols: []col{{cells: cells}}})
	}
	renderGrouped(w, "summary (kernel bytes +: modelled kernel memory beyond the first run's)", "run", labels, units)
	rt.footnote(w)
	writeWrapped(w, " task: the registering task's cycles, what `perf stat CMD` counts (the headline); system: every context's, what `perf stat -a` counts of this work; time (est.): the cycles at the report's clock (its clock: line); task waits: time the task sleeps in grace periods, typical (low-high), in its elapsed time but not in its cycles; sim wall: kpsim's own run time on this machine, not the kernel's.", " ")
}

// taskWait renders the time a run's task sleeps in waits (grace periods):
// typical, and the range the waits' sources allow.
func taskWait(run *scenarios.RunResult) string {
	var t, lo, hi time.Duration
	for _, w := range run.Waits {
		if w.Context == sim.Task {
			t, lo, hi = t+w.Typical, lo+w.Lo, hi+w.Hi
		}
	}
	if t == 0 && hi == 0 {
		return "0"
	}
	return fmt.Sprintf("%s (%s-%s)", roundDur(t), roundDur(lo), roundDur(hi))
}

// roundDur keeps three significant digits of a duration.
func roundDur(d time.Duration) string {
	for _, u := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= u {
			return d.Round(u / 100).String()
		}
	}
	return d.String()
}

// memoryTable prints the modelled kernel memory of every run.
func memoryTable(w io.Writer, r *scenarios.ManyReport) {
	memKeys := map[string]bool{}
	for _, run := range r.Runs {
		for k := range run.KernelMem {
			memKeys[k] = true
		}
	}
	mk := sortedKeys(memKeys)
	if len(mk) == 0 {
		return
	}
	var units []unit
	for _, run := range r.Runs {
		var c col
		for _, k := range mk {
			if v, ok := run.KernelMem[k]; ok {
				c.cells = append(c.cells, signed(v))
			} else {
				c.cells = append(c.cells, "-")
			}
		}
		units = append(units, unit{name: run.Name, cols: []col{c}})
	}
	fmt.Fprintln(w)
	renderGrouped(w, "modelled kernel memory (bytes)", "", mk, units)
}

// indentJSON writes v as one JSON value indented by two spaces: every
// JSON report's form.
func indentJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
