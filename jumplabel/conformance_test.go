package jumplabel

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// query is one text_reserved question, at a system_state.
type query = resvtest.Range

// atStates asks every range at every state.
func atStates(rs [][2]uint64, states ...boot.State) []query {
	var qs []query
	for _, st := range states {
		for _, r := range rs {
			qs = append(qs, query{St: st, Start: r[0], End: r[1]})
		}
	}
	return qs
}

var check = resvtest.Check[query, bool]{
	Index: sim.JumpLabelIndex, Fault: FaultIndexAlloc, Extra: []sim.Switch{sim.JumpSizeOpcode},
	Name: "jump_label", EntryBytes: IndexPointer,
	ErrNotLateInit: ErrNotLateInit, ErrIndexOff: ErrIndexOff, ErrIndexAlloc: ErrIndexAlloc,
	New: resvtest.NewReserved(New, (*Table).Index),
	Oracle: func(t testing.TB, k *image.Kernel) func(query) bool {
		return func(q query) bool { return oracle(t, k, q.St, q.Start, q.End) }
	},
	// Small images, every function and every site.
	Images: func(t testing.TB) []*image.Kernel {
		seeds := uint64(3)
		if race.Enabled { // the race detector slows the scans ~10x: sample
			seeds = 1
		}
		var out []*image.Kernel
		for seed := uint64(1); seed <= seeds; seed++ {
			out = append(out, smallImage(t, seed))
		}
		return out
	},
	Queries: func(k *image.Kernel) []query {
		every := 1
		if race.Enabled {
			every = 8
		}
		return atStates(edgeQueries(k, every, every), boot.Booting, boot.Running)
	},
	RapidImages: func(t testing.TB) []*image.Kernel {
		return []*image.Kernel{smallImage(t, 21), smallImage(t, 22)}
	},
	Draw: func(rt *rapid.T, k *image.Kernel) query {
		st := rapid.SampledFrom([]boot.State{boot.Booting, boot.FreeingInitmem, boot.Running}).Draw(rt, "state")
		var es []image.JumpEntry
		es = append(es, k.JumpEntries...)
		for _, m := range k.Modules {
			es = append(es, m.JumpEntries...)
		}
		e := es[rapid.IntRange(0, len(es)-1).Draw(rt, "site")]
		start := e.Code + uint64(rapid.IntRange(-40, 40).Draw(rt, "off"))
		end := start + uint64(rapid.IntRange(0, 200).Draw(rt, "len"))
		return query{St: st, Start: start, End: end}
	},
	FastImage: func(t testing.TB) *image.Kernel {
		c := resvtest.FastConfig(11)
		c.Modules, c.ModuleFunctions = 2, 60
		return resvtest.Generate(t, c)
	},
	FastQueries: func(k *image.Kernel) []query {
		var sites []uint64
		for _, e := range k.JumpEntries {
			sites = append(sites, e.Code)
		}
		return atStates(fastQueries(k, sites, 11), boot.Scheduling, boot.Running)
	},
}

// TestConformance runs the reservation-index suite on jump_label_text_reserved.
func TestConformance(t *testing.T) { resvtest.Run(t, check) }

// checkAll: every form answers every query as the oracle does.
func checkAll(t *testing.T, k *image.Kernel, qs []query) {
	t.Helper()
	forms, tbs := check.Tables(t, k)
	for _, q := range qs {
		check.AskAll(t, forms, tbs, oracle(t, k, q.St, q.Start, q.End), q)
	}
}

// fastQueries: every function entry, each site's bytes around its first and
// last byte, ranges spanning sites, random ranges; module and init text.
func fastQueries(k *image.Kernel, sites []uint64, seed uint64) [][2]uint64 {
	var q [][2]uint64
	for _, f := range k.Functions() {
		q = append(q, [2]uint64{f.Addr, f.Addr}, [2]uint64{f.Addr + 4, f.Addr + 4})
	}
	for _, a := range sites {
		for d := uint64(0); d < 7; d++ {
			q = append(q, [2]uint64{a + d - 1, a + d - 1}, [2]uint64{a - 4, a + d})
		}
		q = append(q, [2]uint64{a - 20, a + 20})
	}
	rng := sim.NewRNG(seed, "fastscan.test")
	core := k.CoreText()
	for i := 0; i < 2000; i++ {
		a := core.Start + uint64(rng.IntN(len(core.Bytes)))
		q = append(q, [2]uint64{a, a + uint64(rng.IntN(20))})
	}
	for _, m := range k.Modules {
		q = append(q, [2]uint64{m.Text.Start + 16, m.Text.Start + 16})
	}
	return q
}
