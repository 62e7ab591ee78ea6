package ftrace

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// TestRecMemoMatchesWalk: ftrace_location, ftrace_location_range and
// ftrace_text_reserved with the lookup_rec memo answer and count exactly
// as the walk, over repeated addresses near records (hits, misses, every
// byte of a site), with the record list changing between questions
// (module load, module init free, free_initmem).
func TestRecMemoMatchesWalk(t *testing.T) {
	k := smallImage(t)
	base := &image.Kernel{Config: k.Config, Regions: k.Regions, Symbols: k.Symbols, McountLocs: k.McountLocs}
	rapid.Check(t, func(t *rapid.T) {
		ks := kallsyms.NewSorted(k)
		fast, err := New(base, ks, nil)
		if err != nil {
			t.Fatal(err)
		}
		walk, _ := New(base, ks, nil)
		walk.recMemo = nil
		if fast.recMemo == nil {
			t.Fatal("no memo by default (only WalkRecords drops it)")
		}
		cf, cw := sim.NewCounters(false), sim.NewCounters(false)
		locs := append(append([]uint64(nil), k.McountLocs...), k.Modules[0].McountLocs...)
		addr := rapid.Custom(func(t *rapid.T) uint64 {
			return locs[rapid.IntRange(0, len(locs)-1).Draw(t, "loc")] + uint64(rapid.IntRange(-6, 8).Draw(t, "off"))
		})
		loaded, initFreed := false, false
		for i := rapid.IntRange(1, 120).Draw(t, "steps"); i > 0; i-- {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				if !loaded {
					loaded = true
					fast.LoadModule(k.Modules[0])
					walk.LoadModule(k.Modules[0])
				} else if !initFreed {
					initFreed = true
					fast.FreeModuleInit(k.Modules[0])
					walk.FreeModuleInit(k.Modules[0])
				}
			case 1:
				fast.FreeInitMem()
				walk.FreeInitMem()
			case 2:
				a := addr.Draw(t, "a")
				n := uint64(rapid.IntRange(0, 40).Draw(t, "n"))
				if x, y := fast.LocationRange(cf, a, a+n), walk.LocationRange(cw, a, a+n); x != y {
					t.Fatalf("ftrace_location_range(%#x, +%d): memo %#x, walk %#x", a, n, x, y)
				}
			default:
				a := addr.Draw(t, "a")
				if x, y := fast.Location(cf, a), walk.Location(cw, a); x != y {
					t.Fatalf("ftrace_location(%#x): memo %#x, walk %#x", a, x, y)
				}
			}
			for _, op := range []sim.Op{OpGroup, OpProbe, OpLocationCall} {
				if x, y := cf.Total(op), cw.Total(op); x != y {
					t.Fatalf("%s: memo %d, walk %d", op.Name(), x, y)
				}
			}
		}
	})
}
