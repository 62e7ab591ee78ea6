package scenarios

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/sim"
)

// The hash sizes --compare-designs shows: 1024 buckets (8 KB of heads,
// still in L1) and 65536 (512 KB, about one bucket per probe at 50k).
const (
	CompareHashBitsSmall = 10
	CompareHashBitsBig   = 16
)

// CompareDesignSpecs returns the runs of --compare-designs: upstream and
// the series, each alternative design alone (a bigger kprobe_table at
// B=10 and B=16, the rhashtable; the B-tree needs the tree so it comes
// with kprobe-tree), and the series with each alternative; last the
// series plus the indexes beyond it, with and without B-trees for the
// reservation indexes. Two more rows put the series' first three patches
// with a bigger hash or an rhashtable in place of the tree and iterators.
func CompareDesignSpecs() []RunSpec {
	series := sim.PresetSeries.Set
	small := sim.Switches(0).WithHashBits(CompareHashBitsSmall)
	big := sim.Switches(0).WithHashBits(CompareHashBitsBig)
	rht := sim.Switches(0).With(sim.KprobeRhashtable)
	bt := sim.Switches(0).With(sim.KprobeTree).With(sim.KprobeBtree)
	sets := []sim.Switches{
		0, series,
		small, big, rht, bt,
		series.WithHashBits(CompareHashBitsSmall), series.WithHashBits(CompareHashBitsBig),
		series.With(sim.KprobeRhashtable), series.With(sim.KprobeBtree),
		series.With(sim.ReservationBtree),
		sim.PresetAll.Set, sim.PresetAll.Set.With(sim.ReservationBtree),
		sim.PresetAll.Set.With(sim.KprobeBtree).With(sim.ReservationBtree).WithHashBits(CompareHashBitsBig),
	}
	out := make([]RunSpec, len(sets))
	for i, ss := range sets {
		out[i] = RunSpec{Name: ss.Name(), Switches: ss}
	}
	// The reviewer's alternative to the tree and its iterators: the
	// series' first three patches (the reservation indexes and the jump
	// size from the opcode) with a bigger hash or an rhashtable instead of
	// P4-P12.
	p13 := sim.Switches(0).With(sim.StaticCallIndex).With(sim.JumpLabelIndex).With(sim.JumpSizeOpcode)
	return slices.Insert(out, 10,
		RunSpec{Name: "P1-P3+kprobe-hash-bits=16", Switches: p13.WithHashBits(CompareHashBitsBig)},
		RunSpec{Name: "P1-P3+kprobe-rhashtable", Switches: p13.With(sim.KprobeRhashtable)})
}

// probeIndexBytes: the kprobe index beyond the probes (hash heads or
// rhashtable, tree). reservationBytes: the late-init reservation indexes.
func probeIndexBytes(r *RunResult) int64 {
	var t int64
	for _, k := range []string{"kprobe.table.bytes", "kprobe.rhashtable.bytes", "kprobe.tree.bytes", "kprobe.btree.bytes"} {
		t += r.KernelMem[k]
	}
	return t
}

func reservationBytes(r *RunResult) int64 {
	var t int64
	for _, k := range []string{"static_call.index.bytes", "jump_label.index.bytes", "bug.index.bytes", "kprobe_blacklist.index.bytes"} {
		t += r.KernelMem[k]
	}
	return t
}

// WriteDesignTable writes the --compare-designs report: one row per
// design with the estimated cycles of every phase in which the designs
// differ (the phases where every run agrees are summed as "same"), the
// total and its ratio to the first run, the index memory (probe index and
// reservation indexes, with the rhashtable's peak during a rehash), and
// the decisions digest, which must be the first run's everywhere.
func (r *ManyReport) WriteDesignTable(w io.Writer) error {
	fmt.Fprintf(w, " Alternative designs: register_kprobes / unregister_kprobes of %d probes (scenario %s)\n", r.N, r.Scenario)
	fmt.Fprintf(w, " kernel: %s\n\n", r.Kernel)
	if len(r.Runs) == 0 {
		return nil
	}
	base := r.Runs[0]
	// Phases in first-seen order; keep those where the runs differ.
	var order []string
	cyc := map[string]map[*RunResult]float64{}
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			if cyc[p.Name] == nil {
				cyc[p.Name] = map[*RunResult]float64{}
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
	fmt.Fprintf(tw, "same\test. cycles\t%s/run\tops\tprobe index B\treservation B\tdecisions\t\n", base.Name)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s %s\t\n", mcyc(s), mcyc(run.EstCycles), ratio(base.EstCycles, run.EstCycles),
			group(run.TotalOps), idx, group(uint64(reservationBytes(run))), run.Digest[:12], mark)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n Cycles in millions (counts x weights, kpsim list). \"same\": the phases every design spends alike (%s).\n", strings.Join(same, ", "))
	fmt.Fprintln(w, " probe index B: kprobe_table heads or the rhashtable (peak: old and new table during a rehash), plus the tree (rb_node per entry or B-tree nodes).")
	fmt.Fprintln(w, " reservation B: the late-init static-call, jump-label, bug and blacklist indexes (sorted arrays, or B-trees with reservation-btree).")
	for _, run := range r.Runs[1:] {
		if line := FirstDifference(base, run); line != "" {
			fmt.Fprintln(w, " "+line)
		}
	}
	r.designDetail(w)
	return nil
}

// designDetail lists the structure facts behind the table: the
// rhashtable's resizes and the index op counts of every run.
func (r *ManyReport) designDetail(w io.Writer) {
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

// FirstDifference names the first probe whose outcome differs between two
// runs ("" when none does): a design must never change a decision, and
// when a fault plan makes one (an allocation only the design makes), the
// report says which.
func FirstDifference(a, b *RunResult) string {
	i, same := SameDecisions(a, b)
	if same {
		return ""
	}
	if i >= len(a.Results) || i >= len(b.Results) {
		return fmt.Sprintf("DIFFERENT: %s has %d probe results, %s %d", b.Name, len(b.Results), a.Name, len(a.Results))
	}
	x, y := a.Results[i], b.Results[i]
	return fmt.Sprintf("DIFFERENT: %s first differs from %s at probe %d (%#x): %s optimized=%v vs %s optimized=%v",
		b.Name, a.Name, i, x.Addr, codeName(y.Code), y.Optimized, codeName(x.Code), x.Optimized)
}

func codeName(code int) string {
	switch code {
	case 0:
		return "registered"
	case -1:
		return "rolled back"
	}
	return "-" + kprobes.Errno(code).Name()
}
