package report

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kpsim/kpsim/scenarios"
)

// probeIndexBytes: the kprobe index beyond the probes (hash heads or
// rhashtable, tree). reservationBytes: the late-init reservation indexes.
func probeIndexBytes(r *scenarios.RunResult) int64 {
	var t int64
	for _, k := range []string{"kprobe.table.bytes", "kprobe.rhashtable.bytes", "kprobe.tree.bytes", "kprobe.btree.bytes"} {
		t += r.KernelMem[k]
	}
	return t
}

func reservationBytes(r *scenarios.RunResult) int64 {
	var t int64
	for _, k := range []string{"static_call.index.bytes", "jump_label.index.bytes", "bug.index.bytes", "kprobe_blacklist.index.bytes"} {
		t += r.KernelMem[k]
	}
	return t
}

// DesignTable writes the --compare-designs report: one row per
// design with the estimated cycles of every phase in which the designs
// differ (the phases where every run agrees are summed as "same"), the
// total and its ratio to the first run, the index memory (probe index and
// reservation indexes, with the rhashtable's peak during a rehash), and
// the decisions digest, which must be the first run's everywhere.
func DesignTable(w io.Writer, r *scenarios.ManyReport) error {
	fmt.Fprintf(w, " Alternative designs: register_kprobes / unregister_kprobes of %d probes (scenario %s)\n", r.N, r.Scenario)
	fmt.Fprintf(w, " kernel: %s\n\n", r.Kernel)
	if len(r.Runs) == 0 {
		return nil
	}
	base := r.Runs[0]
	// Phases in first-seen order; keep those where the runs differ.
	var order []string
	cyc := map[string]map[*scenarios.RunResult]float64{}
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			if cyc[p.Name] == nil {
				cyc[p.Name] = map[*scenarios.RunResult]float64{}
				order = append(order, p.Name)
			}
			cyc[p.Name][run] = p.EstCycles
		}
	}
	var vary, same []string
	for _, ph := range order {
		v0, differs := cyc[ph][base], false
		for _, run := range r.Runs {
			if cyc[ph][run] != v0 {
				differs = true
			}
		}
		if differs {
			vary = append(vary, ph)
		} else {
			same = append(same, ph)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "design\t")
	for _, ph := range vary {
		fmt.Fprintf(tw, "%s\t", ph)
	}
	clk := clockOf(r.Meta)
	fmt.Fprintf(tw, "same\test. cycles\test. time\t%s/run\tops\tprobe index B\treservation B\tdecisions\t\n", base.Name)
	for _, run := range r.Runs {
		fmt.Fprintf(tw, "%s\t", run.Name)
		for _, ph := range vary {
			fmt.Fprintf(tw, "%s\t", mcyc(cyc[ph][run]))
		}
		var s float64
		for _, ph := range same {
			s += cyc[ph][run]
		}
		mark := "= " + base.Name
		if run.Digest != base.Digest {
			mark = "DIFFERENT"
		}
		idx := group(uint64(probeIndexBytes(run)))
		if pk := run.KernelMem["kprobe.rhashtable.peak_bytes"]; pk > 0 {
			idx += fmt.Sprintf(" (peak %s)", group(uint64(pk)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s %s\t\n", mcyc(s), mcyc(run.EstCycles), estTime(clk.NS(run.EstCycles)), ratio(base.EstCycles, run.EstCycles),
			group(run.TotalOps), idx, group(uint64(reservationBytes(run))), run.Digest[:12], mark)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n Cycles in millions (counts x weights, kpsim list); est. time: the cycles at %s GHz (%s). \"same\": the phases every design spends alike (%s).\n", strconv.FormatFloat(clk.GHz, 'g', -1, 64), clk.Source, strings.Join(same, ", "))
	fmt.Fprintln(w, " probe index B: kprobe_table heads or the rhashtable (peak: old and new table during a rehash), plus the tree (rb_node per entry or B-tree nodes).")
	fmt.Fprintln(w, " reservation B: the late-init static-call, jump-label, bug and blacklist indexes (sorted arrays, or B-trees with reservation-btree).")
	for _, run := range r.Runs[1:] {
		if line := scenarios.FirstDifference(base, run); line != "" {
			fmt.Fprintln(w, " "+line)
		}
	}
	designDetail(w, r)
	return nil
}

// designDetail lists the structure facts behind the table: the
// rhashtable's resizes and the index op counts of every run.
func designDetail(w io.Writer, r *scenarios.ManyReport) {
	prefixes := []string{"kprobe.hash.", "rhashtable.", "kprobe.tree.", "maple.", "jump_label.index.", "static_call.index.", "bug.index.", "kprobe_blacklist.index."}
	keys := map[string]bool{}
	for _, run := range r.Runs {
		for k := range run.Ops {
			for _, p := range prefixes {
				if strings.HasPrefix(k, p) {
					keys[k] = true
				}
			}
		}
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintln(w, "\n index operations (counts)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\t")
	for i := range r.Runs {
		fmt.Fprintf(tw, "#%d\t", i+1)
	}
	fmt.Fprintln(tw)
	for _, k := range ks {
		fmt.Fprintf(tw, "%s\t", k)
		for _, run := range r.Runs {
			if v := run.Ops[k]; v != 0 {
				fmt.Fprintf(tw, "%s\t", group(v))
			} else {
				fmt.Fprintf(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for i, run := range r.Runs {
		fmt.Fprintf(w, " #%d %s\n", i+1, run.Name)
	}
}

func mcyc(v float64) string { return fmt.Sprintf("%.1f", v/1e6) }
