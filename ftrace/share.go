package ftrace

import (
	"slices"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// Every run on an image boots the same ftrace records: ftrace_init's
// groups, test_for_valid_rec's verdicts (a kallsyms lookup per record) and
// the modules' groups. NewShared builds them once per image and gives each
// run its own copy, since a run changes records' flags (arming) and the
// list (module load, init free). Simulator work only: building the
// records is boot work New does not count, so no count can depend on
// where they came from (TestNewSharedMatchesNew). They live in the
// image's Derived store.

// bootRecordsKey is the boot records' key in the image's Derived store.
type bootRecordsKey struct{}

// bootRecords is New's result for one image and the inputs it was built
// from. Never mutated after it is stored: safe for concurrent runs.
type bootRecords struct {
	src    any // the kallsyms source the records' verdicts came from
	ibt    bool
	gen    image.Generation // the generation's facts (ftrace_process_locs' skip)
	mcount []uint64
	mods   []modKey
	ft     *Ftrace // pages, flat, nonDis and ver are read only
	err    error   // New's error: nothing to share
}

type modKey struct {
	m      *image.Module
	name   string
	state  image.ModuleState
	text   *image.Region
	init   *image.Region
	mcount []uint64
}

func modKeys(k *image.Kernel) []modKey {
	out := make([]modKey, len(k.Modules))
	for i, m := range k.Modules {
		out[i] = modKey{m: m, name: m.Name, state: m.State, text: m.Text, init: m.Init, mcount: slices.Clone(m.McountLocs)}
	}
	return out
}

func (b *bootRecords) matches(k *image.Kernel, src any) bool {
	if b.src != src || b.ibt != k.Config.IBT || b.gen != k.Config.Gen.Effective() || !slices.Equal(b.mcount, k.McountLocs) || len(b.mods) != len(k.Modules) {
		return false
	}
	for i, m := range k.Modules {
		mk := &b.mods[i]
		if mk.m != m || mk.name != m.Name || mk.state != m.State || mk.text != m.Text || mk.init != m.Init || !slices.Equal(mk.mcount, m.McountLocs) {
			return false
		}
	}
	return true
}

// NewShared is New for a caller that boots many kernels from one image:
// the records are built once per image (keyed by src, an identity of what
// ksyms answers: two resolvers with the same src must give the same
// kallsyms_lookup_size_offset answers, e.g. both built from one image's
// kallsyms tables) and copied for each call. With a fault plan it is New
// (ftrace_process_locs' allocation may fail, and every hit of a fault
// point is part of the plan's state).
func NewShared(k *image.Kernel, ksyms kallsyms.Resolver, f *sim.Faults, src any) (*Ftrace, error) {
	if src == nil || f.String() != "" {
		return New(k, ksyms, f)
	}
	b := sim.DerivedValue(k.Derived(), bootRecordsKey{}, func() *bootRecords {
		ft, err := New(k, ksyms, f)
		if err != nil {
			return &bootRecords{err: err}
		}
		return &bootRecords{src: src, ibt: k.Config.IBT, gen: k.Config.Gen.Effective(), mcount: slices.Clone(k.McountLocs), mods: modKeys(k), ft: ft.clone(nil, nil)}
	})
	if b.err != nil || !b.matches(k, src) {
		// Booting failed, or the image or the source changed since the
		// records were built: a boot of its own.
		return New(k, ksyms, f)
	}
	return b.ft.clone(ksyms, f), nil
}

// clone copies a freshly booted ftrace (no ops armed) for another kernel.
func (ft *Ftrace) clone(ksyms kallsyms.Resolver, f *sim.Faults) *Ftrace {
	c := &Ftrace{k: ft.k, ksyms: ksyms, f: f, ibt: ft.ibt, foreign: map[uint64]bool{}, CPUs: ft.CPUs,
		ver: ft.ver, flat: cloneCap(ft.flat), nonDis: ft.nonDis, initFreed: ft.initFreed,
		g: ft.g, NoReplay: ft.NoReplay}
	c.recMemo = newRecMemo() // WalkRecords drops it
	c.kprobeOps = &Ops{Name: "kprobe_ftrace_ops", ft: c}
	c.ipmodifyOps = &Ops{Name: "kprobe_ipmodify_ops", IPModify: true, ft: c}
	c.pages = make([]*Page, len(ft.pages), cap(ft.pages))
	for i, pg := range ft.pages {
		c.pages[i] = &Page{Records: cloneCap(pg.Records), Order: pg.Order, Module: pg.Module}
	}
	return c
}

// cloneCap copies s with s's capacity: a copy must be the same simulator
// structure as New's, down to the capacity the retained-bytes figure
// counts (slices.Clone may round it up to a size class).
func cloneCap[S ~[]E, E any](s S) S {
	c := make(S, len(s), cap(s))
	copy(c, s)
	return c
}
