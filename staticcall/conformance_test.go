package staticcall

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// query is one text_reserved question, at a system_state.
type query = resvtest.Range

func defaultImage(t testing.TB) *image.Kernel { return resvtest.DefaultImage(t) }

func smallImage(t testing.TB, seed uint64) *image.Kernel {
	return resvtest.SmallImage(t, seed, func(c *synth.Config) { c.StaticCallSites, c.ModuleStaticCallSites = 300, 10 })
}

// oracle: any live site whose 5 bytes meet [start, end].
func oracle(k *image.Kernel, st boot.State, start, end uint64) bool {
	hit := func(ss []image.StaticCallSite, init bool) bool {
		for _, s := range ss {
			if (init || !s.Init) && s.Addr <= end && s.Addr+5 > start {
				return true
			}
		}
		return false
	}
	return resvtest.Reserved(k, st, start, k.StaticCallSites, func(m *image.Module) []image.StaticCallSite { return m.StaticCallSites }, hit)
}

func allSites(k *image.Kernel) []image.StaticCallSite {
	ss := append([]image.StaticCallSite(nil), k.StaticCallSites...)
	for _, m := range k.Modules {
		ss = append(ss, m.StaticCallSites...)
	}
	return ss
}

// equivalenceQueries: function entries, and ranges around every site (a
// sample of each on a large image), at three system states.
func equivalenceQueries(k *image.Kernel) []query {
	sample := 8
	if race.Enabled {
		sample = 200
	}
	var qs []query
	for _, st := range []boot.State{boot.Booting, boot.FreeingInitmem, boot.Running} {
		fs := k.Functions()
		for i, f := range fs {
			if len(fs) < 5000 || i%(sample*20) == 0 {
				qs = append(qs, query{St: st, Start: f.Addr, End: f.Addr})
			}
		}
		for j, s := range allSites(k) {
			if len(k.StaticCallSites) > 1000 && j%sample != 0 {
				continue
			}
			for _, q := range [][2]int64{{0, 0}, {4, 4}, {-1, -1}, {5, 5}, {-4, -1}, {5, 9}, {-40, 40}} {
				qs = append(qs, query{St: st, Start: s.Addr + uint64(q[0]), End: s.Addr + uint64(q[1])})
			}
		}
	}
	return qs
}

var check = resvtest.Check[query, bool]{
	Index: sim.StaticCallIndex, Fault: FaultIndexAlloc,
	Name: "static_call", EntryBytes: IndexPointer,
	ErrNotLateInit: ErrNotLateInit, ErrIndexOff: ErrIndexOff, ErrIndexAlloc: ErrIndexAlloc,
	New: resvtest.NewReserved(New, (*Table).Index),
	Oracle: func(_ testing.TB, k *image.Kernel) func(query) bool {
		return func(q query) bool { return oracle(k, q.St, q.Start, q.End) }
	},
	Images: func(t testing.TB) []*image.Kernel {
		return []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2)}
	},
	Queries:     equivalenceQueries,
	RapidImages: func(t testing.TB) []*image.Kernel { return []*image.Kernel{smallImage(t, 3)} },
	Draw: func(rt *rapid.T, k *image.Kernel) query {
		ss := allSites(k)
		st := rapid.SampledFrom([]boot.State{boot.Booting, boot.Running}).Draw(rt, "state")
		s := ss[rapid.IntRange(0, len(ss)-1).Draw(rt, "site")]
		start := s.Addr + uint64(rapid.IntRange(-30, 30).Draw(rt, "off"))
		end := start + uint64(rapid.IntRange(0, 100).Draw(rt, "len"))
		return query{St: st, Start: start, End: end}
	},
	FastImage: func(t testing.TB) *image.Kernel { return resvtest.Generate(t, resvtest.FastConfig(12)) },
	FastQueries: func(k *image.Kernel) []query {
		var qs []query
		for _, st := range []boot.State{boot.Scheduling, boot.Running} {
			for _, f := range k.Functions() {
				qs = append(qs, query{St: st, Start: f.Addr + 4, End: f.Addr + 4})
			}
			for _, s := range k.StaticCallSites {
				for d := uint64(0); d < 7; d++ {
					qs = append(qs, query{St: st, Start: s.Addr + d - 1, End: s.Addr + d - 1}, query{St: st, Start: s.Addr - 4, End: s.Addr + d})
				}
			}
		}
		return qs
	},
}

// TestConformance runs the reservation-index suite on static_call_text_reserved.
func TestConformance(t *testing.T) { resvtest.Run(t, check) }
