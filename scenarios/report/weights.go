package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
)

// writeWeightsLine is the header line naming the weights a report was
// priced with (sim.CostTable.Describe: the regime or cost file, and where
// and when it was calibrated).
func writeWeightsLine(w io.Writer, weights string) {
	writeWrapped(w, " weights: "+weights, "          ")
}

// WriteWeights names the weights of a report that has no Meta block (the
// BPF reports) as run many's header does: the cost file line
// (scenarios.CostInfo.Line) and the weights line.
func WriteWeights(w io.Writer, costs scenarios.CostInfo, weights string) {
	writeWrapped(w, " "+costs.Line(), "          ")
	writeWeightsLine(w, weights)
}

// comparedRun is the run a report's headline compares with the first: the
// series run when there is one, else the last.
func comparedRun(r *scenarios.ManyReport) *scenarios.RunResult {
	run := r.Runs[len(r.Runs)-1]
	for _, x := range r.Runs[1:] {
		if x.Name == "series" {
			run = x
		}
	}
	return run
}

// remainderTable prints where the compared run's cycles go: the five ops
// costing its task the most and the three costing most outside it, each
// weight with its source, numbered below the table.
func remainderTable(w io.Writer, r *scenarios.ManyReport) {
	if r.Costs == nil {
		return
	}
	run := comparedRun(r)
	task := scenarios.TopOps(run, r.Costs, true, 5)
	outside := scenarios.TopOps(run, r.Costs, false, 3)
	if len(task)+len(outside) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, " where %s's cycles go: the dearest ops in the task and outside it\n", run.Name)
	head := []string{"op", "context", "count", "weight", "cycles", "share", "src"}
	rows := [][]string{head}
	var srcs []string
	add := func(xs []scenarios.OpShare, of string) {
		for _, x := range xs {
			srcs = append(srcs, x.Op+": "+x.Source)
			rows = append(rows, []string{x.Op, x.Context, group(x.Count), strconv.FormatFloat(x.Weight, 'g', 4, 64),
				group(uint64(x.Cycles)), strconv.FormatFloat(100*x.Share, 'f', 1, 64) + "% of " + of, "[" + strconv.Itoa(len(srcs)) + "]"})
		}
	}
	add(task, "task")
	add(outside, "outside")
	writeColumns(w, "   ", rows)
	for i, s := range srcs {
		writeWrapped(w, fmt.Sprintf("   [%d] %s", i+1, s), "       ")
	}
}

// sensitivityTable prints the sensitivity report: the weights that move
// the headline ratio most across their documented ranges.
func sensitivityTable(w io.Writer, r *scenarios.ManyReport) {
	s := r.Sensitivity
	if s == nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, " sensitivity of %s/%s (task cycles) = %.2fx to each weight across its range\n", s.Base, s.Run, s.Ratio)
	rows := [][]string{{"op", "weight", "range", "ratio at lo", "ratio at hi", "swing", "share"}}
	shown := 0
	for _, x := range s.Rows {
		if shown == 15 || x.Swing == 0 {
			break
		}
		shown++
		rows = append(rows, []string{x.Op, strconv.FormatFloat(x.Weight, 'g', 4, 64),
			strconv.FormatFloat(x.Lo, 'g', 4, 64) + "-" + strconv.FormatFloat(x.Hi, 'g', 4, 64),
			fmt.Sprintf("%.2fx", x.RatioLo), fmt.Sprintf("%.2fx", x.RatioHi), fmt.Sprintf("%.2f", x.Swing),
			strconv.FormatFloat(100*x.Share, 'f', 1, 64) + "%"})
	}
	writeColumns(w, "   ", rows)
	var moving int
	for _, x := range s.Rows {
		if x.Swing != 0 {
			moving++
		}
	}
	writeWrapped(w, fmt.Sprintf(" %d of %d priced weights move the ratio (the %d widest above; all in --format json); %d have no range (one documented value, no other regime's). Every weight anywhere in its range at once: %.2fx to %.2fx. share: the op's part of %s's task cycles.",
		moving, len(s.Rows), shown, s.Fixed, s.Low, s.High, s.Run), " ")
	// Ranges by source, in the table's order of first appearance.
	var order []string
	bySrc := map[string][]string{}
	for _, x := range s.Rows[:shown] {
		if bySrc[x.Range] == nil {
			order = append(order, x.Range)
		}
		bySrc[x.Range] = append(bySrc[x.Range], x.Op)
	}
	for _, src := range order {
		writeWrapped(w, "   range of "+strings.Join(bySrc[src], ", ")+": "+src, "     ")
	}
}

// writeColumns prints rows as right-aligned columns (the first
// left-aligned, after indent), widths in runes.
func writeColumns(w io.Writer, indent string, rows [][]string) {
	ws := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			ws[i] = max(ws[i], textWidth(c))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i == 0 {
				b.WriteString(indent + c + strings.Repeat(" ", ws[0]-textWidth(c)))
				continue
			}
			b.WriteString("  " + pad(c, ws[i]))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
