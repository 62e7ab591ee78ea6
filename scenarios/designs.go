package scenarios

import (
	"fmt"
	"slices"

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
