package bug

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// newTable is Check.New for find_bug.
func newTable(t testing.TB, k *image.Kernel, sw sim.Switches, f *sim.Faults) resvtest.Table[uint64, *image.BugEntry] {
	tb, err := New(k, sw, f)
	if err != nil {
		t.Fatal(err)
	}
	return resvtest.Lookup(tb, (*Table).FindBug, (*Table).Index)
}

func defaultImage(t testing.TB) *image.Kernel { return resvtest.DefaultImage(t) }

func smallImage(t testing.TB, seed uint64) *image.Kernel {
	return resvtest.SmallImage(t, seed, func(c *synth.Config) { c.Modules, c.ModuleBugEntries = 3, 15 })
}

// oracle: the first entry in find_bug's order (core, then modules newest first).
func oracle(k *image.Kernel, addr uint64) *image.BugEntry {
	for i := range k.BugEntries {
		if k.BugEntries[i].Addr == addr {
			return &k.BugEntries[i]
		}
	}
	for m := len(k.Modules) - 1; m >= 0; m-- {
		for i := range k.Modules[m].BugEntries {
			if k.Modules[m].BugEntries[i].Addr == addr {
				return &k.Modules[m].BugEntries[i]
			}
		}
	}
	return nil
}

func addrs(k *image.Kernel, every int) []uint64 {
	var out []uint64
	for i, b := range k.BugEntries {
		if i%every == 0 {
			out = append(out, b.Addr, b.Addr-1, b.Addr+1, b.Addr+2)
		}
	}
	for _, m := range k.Modules {
		for _, b := range m.BugEntries {
			out = append(out, b.Addr, b.Addr+1)
		}
	}
	for i, f := range k.Functions() {
		if i%every == 0 {
			out = append(out, f.Addr)
		}
	}
	return out
}

var check = resvtest.Check[uint64, *image.BugEntry]{
	Index: sim.BugIndex, Fault: FaultIndexAlloc,
	Name: "bug", EntryBytes: IndexPointer,
	ErrNotLateInit: ErrNotLateInit, ErrIndexOff: ErrIndexOff, ErrIndexAlloc: ErrIndexAlloc,
	New: newTable,
	Oracle: func(_ testing.TB, k *image.Kernel) func(uint64) *image.BugEntry {
		return func(a uint64) *image.BugEntry { return oracle(k, a) }
	},
	Images: func(t testing.TB) []*image.Kernel {
		return []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)}
	},
	Queries: func(k *image.Kernel) []uint64 {
		every := 3
		if race.Enabled {
			every = 60
		}
		return addrs(k, every)
	},
	RapidImages: func(t testing.TB) []*image.Kernel { return []*image.Kernel{smallImage(t, 3)} },
	Draw: func(rt *rapid.T, k *image.Kernel) uint64 {
		b := k.BugEntries[rapid.IntRange(0, len(k.BugEntries)-1).Draw(rt, "bug")]
		return b.Addr + uint64(rapid.IntRange(-3, 3).Draw(rt, "off"))
	},
	FastImage: func(t testing.TB) *image.Kernel {
		c := resvtest.FastConfig(13)
		c.InitFunctions = synth.DefaultConfig().InitFunctions
		return resvtest.Generate(t, c)
	},
	FastQueries: func(k *image.Kernel) []uint64 {
		var qs []uint64
		for _, f := range k.Functions() {
			qs = append(qs, f.Addr+4)
		}
		for _, b := range k.BugEntries {
			qs = append(qs, b.Addr, b.Addr+1)
		}
		for _, m := range k.Modules {
			for _, b := range m.BugEntries {
				qs = append(qs, b.Addr)
			}
		}
		return qs
	},
}

// TestConformance runs the reservation-index suite on find_bug.
func TestConformance(t *testing.T) { resvtest.Run(t, check) }
