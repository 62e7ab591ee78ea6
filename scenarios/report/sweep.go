package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/kpsim/kpsim/scenarios"
)

// SweepJSON writes the sweep.
func SweepJSON(w io.Writer, s *scenarios.Sweep) error {
	return indentJSON(w, s)
}

// SweepBench writes every N's report as benchmark results named
// Many/n=N/patches=RUN/phase=PHASE (benchstat -row /n -col /patches).
func SweepBench(w io.Writer, s *scenarios.Sweep) error {
	bw := NewBenchWriter(w)
	for _, r := range s.Reports() {
		if err := bw.Write(r, true); err != nil {
			return err
		}
	}
	return nil
}

// SweepCSV writes one row per run, N and phase (and total), with the
// fit of that run and phase repeated on each row.
func SweepCSV(w io.Writer, s *scenarios.Sweep) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"run", "patches", "n", "phase", "ops", "est_cycles", "est_kernel_ns", "sim_wall_ns", "registered", "decisions_digest",
		"fit_a", "fit_b", "fit_c", "fit_r2", "loglog_slope", "loglog_r2", "kpsim", "kernel", "costs", "faults",
		"targets", "not_attempted", "attach_warnings"})
	var m scenarios.Meta
	if s.Meta != nil {
		m = *s.Meta
	}
	ff := func(f float64) string { return strconv.FormatFloat(f, 'g', 8, 64) }
	clk := clockOf(s.Meta)
	for _, run := range s.Runs {
		for _, ph := range append(append([]string(nil), s.Phases...), "total") {
			fit, fitCells := run.Fits[ph], func(fit scenarios.GrowthFit, p scenarios.SweepPoint) []string {
				if run.NoFit != "" || !p.Attached() { // no fit covers this point
					return []string{"", "", "", "", "", ""}
				}
				return []string{ff(fit.A), ff(fit.B), ff(fit.C), ff(fit.R2), ff(fit.Slope), ff(fit.SlopeR2)}
			}
			for _, p := range run.Points {
				ops, cyc, wall := p.PhaseOps[ph], p.PhaseCyc[ph], int64(0)
				if ph == "total" {
					ops, cyc, wall = p.Ops, p.EstCycles, p.WallNS
				}
				row := []string{run.Name, strings.Join(run.Patches, ","), strconv.Itoa(p.N), ph, strconv.FormatUint(ops, 10),
					strconv.FormatInt(cyc, 10), strconv.FormatInt(int64(math.Round(clk.NS(float64(cyc)))), 10), strconv.FormatInt(wall, 10), strconv.Itoa(p.Registered), p.Digest}
				row = append(row, fitCells(fit, p)...)
				cw.Write(append(row, m.Kpsim.String(), m.Kernel.String(), m.Costs.String(), m.Faults,
					strconv.Itoa(p.Targets), strconv.Itoa(p.NotTried), attachCauses(p.AttachWarnings)))
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// SweepTable writes the sweep for a terminal: the meta, total estimated
// cycles per run at each N, and per run and phase the fit and exponent.
func SweepTable(w io.Writer, s *scenarios.Sweep) error {
	fmt.Fprintf(w, " Sweep of scenario %s via %s over N = %s\n", s.Scenario, s.Via, joinInts(s.Ns))
	for _, l := range s.Meta.Lines() {
		writeWrapped(w, " "+l, "          ")
	}
	writeWrapped(w, " params:  "+kvList(s.Params, " "), "          ")
	fmt.Fprintln(w)
	var labels []string
	for _, n := range s.Ns {
		labels = append(labels, strconv.Itoa(n))
	}
	labels = append(labels, "exponent")
	var units []unit
	clk := clockOf(s.Meta)
	for _, run := range s.Runs {
		var tc, tt, c, pp col
		tc.head, tt.head, c.head, pp.head = "task", "task time", "system", "per probe"
		for _, p := range run.Points {
			tc.cells = append(tc.cells, group(uint64(p.TaskCycles)))
			tt.cells = append(tt.cells, estTime(clk.NS(float64(p.TaskCycles))))
			c.cells = append(c.cells, group(uint64(p.EstCycles)))
			if !p.Attached() { // no probe: no per-probe figure
				pp.cells = append(pp.cells, "-")
				continue
			}
			pp.cells = append(pp.cells, strconv.FormatFloat(float64(p.EstCycles)/float64(p.N), 'f', 0, 64))
		}
		f := run.Fits["total"]
		tc.cells = append(tc.cells, "")
		tt.cells = append(tt.cells, "")
		if run.NoFit != "" {
			c.cells = append(c.cells, "-")
		} else {
			c.cells = append(c.cells, strconv.FormatFloat(f.Slope, 'f', 2, 64))
		}
		pp.cells = append(pp.cells, "")
		units = append(units, unit{name: run.Name, cols: []col{tc, tt, c, pp}})
	}
	renderGrouped(w, "estimated cycles of the task (and its kernel time) and of every context; exponent: log-log slope", "N", labels, units)
	fmt.Fprintln(w)
	fmt.Fprintln(w, " probes attached of the targets at each N (refused, never attempted):")
	for _, run := range s.Runs {
		var at []string
		for _, p := range run.Points {
			a := fmt.Sprintf("%d/%d", p.Registered, p.Targets)
			if r := refused(p.Rejected); r > 0 || p.NotTried > 0 {
				a += fmt.Sprintf(" (%d, %d)", r, p.NotTried)
			}
			at = append(at, a)
		}
		writeWrapped(w, fmt.Sprintf("   %-24s %s", run.Name, strings.Join(at, "  ")), "     ")
	}
	if ws := s.Warnings(); len(ws) > 0 {
		fmt.Fprintln(w)
		for _, l := range ws {
			writeWrapped(w, " WARNING "+l, "   ")
		}
	}
	for _, run := range s.Runs {
		fmt.Fprintln(w)
		if run.NoFit != "" {
			writeWrapped(w, fmt.Sprintf(" %s: no fit, no exponent, no plotted curve: it %s (a figure over zero probes would be the cost of refusals)", run.Name, run.NoFit), "   ")
			continue
		}
		f := run.Fits["total"]
		omitted := ""
		if len(run.Omitted) > 0 {
			omitted = fmt.Sprintf("; N=%s left out (attached no probe)", joinInts(run.Omitted))
		}
		writeWrapped(w, fmt.Sprintf(" %s: cycles(N) = %s + %s·N + %s·N² (R² %.4f); log-log slope %.3f (R² %.4f)%s%s",
			run.Name, sci(f.A), sci(f.B), sci(f.C), f.R2, f.Slope, f.SlopeR2, omitted, sameNote(run)), "   ")
		fmt.Fprintf(w, "   %-20s %10s %12s %12s %8s %9s\n", "phase", "a", "b", "c", "R²", "exponent")
		for _, ph := range s.Phases {
			pf := run.Fits[ph]
			if run.Points[len(run.Points)-1].PhaseCyc[ph] == 0 {
				continue
			}
			fmt.Fprintf(w, "   %-20s %10s %12s %12s %8.4f %9.3f\n", ph, sci(pf.A), sci(pf.B), sci(pf.C), pf.R2, pf.Slope+0)
		}
	}
	fmt.Fprintln(w)
	writeWrapped(w, " Each N is a full run of the scenario; counts are exact, so the fits describe the model, not noise. An exponent near 2 is a quadratic walk.", " ")
	return nil
}

func sameNote(r *scenarios.SweepRun) string {
	if r.SameDecisions {
		return ""
	}
	return "; DECISIONS DIFFER from the first run at some N"
}

func joinInts(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// sci prints a coefficient in 4 significant digits.
func sci(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

// attachCauses lists a run's flagged causes for a CSV cell
// (none-attached;unattempted), empty when none.
func attachCauses(ws []scenarios.AttachWarning) string {
	var cs []string
	for _, w := range ws {
		cs = append(cs, w.Cause)
	}
	return strings.Join(cs, ";")
}

func refused(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
