package blacklist

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// newList is Check.New for within_kprobe_blacklist (populate must succeed).
func newList(t testing.TB, k *image.Kernel, sw sim.Switches, f *sim.Faults) resvtest.Table[uint64, bool] {
	l, err := New(nil, k, sw, f, nil)
	if err != nil || l.PopulateError() != nil {
		t.Fatalf("%v %v", err, l.PopulateError())
	}
	return resvtest.Lookup(l, (*List).WithinKprobeBlacklist, (*List).Index)
}

func defaultImage(t testing.TB) *image.Kernel { return resvtest.DefaultImage(t) }

func smallImage(t testing.TB, seed uint64) *image.Kernel {
	return resvtest.SmallImage(t, seed, func(c *synth.Config) { c.Blacklist, c.ClonePercent = 40, 10 })
}

var check = resvtest.Check[uint64, bool]{
	Index: sim.BlacklistIndex, Fault: FaultIndexAlloc,
	Name: "kprobe_blacklist", EntryBytes: IndexEntryBytes,
	ErrNotLateInit: ErrNotLateInit, ErrIndexOff: ErrIndexOff, ErrIndexAlloc: ErrIndexAlloc,
	New: newList,
	Oracle: func(t testing.TB, k *image.Kernel) func(uint64) bool {
		l := resvtest.Unwrap[*List](newList(t, k, 0, nil))
		return func(a uint64) bool { return oracle(l, a) }
	},
	Images: func(t testing.TB) []*image.Kernel {
		return []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)}
	},
	Queries: func(k *image.Kernel) []uint64 {
		every := 5
		if race.Enabled {
			every = 50
		}
		l, _ := New(nil, k, 0, nil, nil)
		return queries(k, l, every)
	},
	RapidImages: func(t testing.TB) []*image.Kernel { return []*image.Kernel{smallImage(t, 3)} },
	Draw: func(rt *rapid.T, k *image.Kernel) uint64 {
		fs := k.Functions()
		f := fs[rapid.IntRange(0, len(fs)-1).Draw(rt, "fn")]
		return f.Addr + uint64(rapid.IntRange(-8, int(f.Size)+8).Draw(rt, "off"))
	},
	// Dotted names (20% clones) exercise the second walk.
	FastImage: func(t testing.TB) *image.Kernel {
		c := resvtest.FastConfig(14)
		c.InitFunctions = synth.DefaultConfig().InitFunctions
		c.ClonePercent, c.Blacklist = 20, 200
		return resvtest.Generate(t, c)
	},
	FastQueries: func(k *image.Kernel) []uint64 {
		var qs []uint64
		for _, f := range k.Functions() {
			qs = append(qs, f.Addr, f.Addr+4, f.Addr+f.Size)
		}
		for _, m := range k.Modules {
			for _, s := range m.Symbols {
				qs = append(qs, s.Addr)
			}
		}
		return qs
	},
}

// TestConformance runs the reservation-index suite on within_kprobe_blacklist.
func TestConformance(t *testing.T) { resvtest.Run(t, check) }
