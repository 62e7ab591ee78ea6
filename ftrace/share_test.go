package ftrace

import (
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// bootState is what New leaves behind, for comparison.
func bootState(ft *Ftrace) any {
	return struct {
		Pages  []Page
		Flat   []recRef
		NonDis int
		Ver    uint64
		Caps   []int // what the retained-bytes figure counts
	}{deref(ft.pages), ft.flat, ft.nonDis, ft.ver, caps(ft)}
}

func caps(ft *Ftrace) []int {
	out := []int{cap(ft.pages), cap(ft.flat), b2i(ft.recMemo != nil)}
	for _, p := range ft.pages {
		out = append(out, cap(p.Records))
	}
	return out
}

func deref(ps []*Page) []Page {
	out := make([]Page, len(ps))
	for i, p := range ps {
		out[i] = Page{Records: slices.Clip(p.Records), Order: p.Order, Module: p.Module}
	}
	return out
}

// TestNewSharedMatchesNew: the shared boot records equal New's, for the
// first (building) and later (copying) calls, each call gets its own copy,
// and a changed image or another kallsyms source is booted afresh.
func TestNewSharedMatchesNew(t *testing.T) {
	k := smallImage(t)
	want := newOn(t, k)
	src := new(int)
	var got []*Ftrace
	for range 3 {
		ft, err := NewShared(k, kallsyms.NewSorted(k), nil, src)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(bootState(ft), bootState(want)) {
			t.Fatal("NewShared's records differ from New's")
		}
		got = append(got, ft)
	}
	// Each copy is its own: freeing init memory in one leaves the others.
	got[1].FreeInitMem()
	if !reflect.DeepEqual(bootState(got[2]), bootState(want)) || reflect.DeepEqual(bootState(got[1]), bootState(want)) {
		t.Fatal("the copies share records")
	}
	if sh, _ := NewShared(k, kallsyms.NewSorted(k), nil, src); !reflect.DeepEqual(bootState(sh), bootState(want)) {
		t.Fatal("the stored records changed")
	}
	// A changed image: one module fewer.
	k2 := *k
	k2.Modules = k.Modules[:len(k.Modules)-1]
	sim.DerivedValue(k2.Derived(), bootRecordsKey{}, func() *bootRecords { return mustLoad(t, k) })
	want2, _ := New(&k2, kallsyms.NewSorted(&k2), nil)
	if ft, _ := NewShared(&k2, kallsyms.NewSorted(&k2), nil, src); !reflect.DeepEqual(bootState(ft), bootState(want2)) {
		t.Fatal("a changed image was answered from the old records")
	}
	// A fault plan: New itself, every hit on the plan.
	f := &sim.Faults{}
	f.Set(FaultPagesAlloc, 1)
	ft, _ := NewShared(k, kallsyms.NewSorted(k), f, src)
	wantF, _ := New(k, kallsyms.NewSorted(k), func() *sim.Faults { g := &sim.Faults{}; g.Set(FaultPagesAlloc, 1); return g }())
	if !reflect.DeepEqual(bootState(ft), bootState(wantF)) {
		t.Fatal("a fault plan was answered from the shared records")
	}
}

func mustLoad(t *testing.T, k *image.Kernel) *bootRecords {
	stored := true
	b := sim.DerivedValue(k.Derived(), bootRecordsKey{}, func() *bootRecords { stored = false; return nil })
	if !stored || b == nil {
		t.Fatal("nothing stored")
	}
	return b
}

// TestNewSharedConcurrent: concurrent boots of one image (run with -race).
func TestNewSharedConcurrent(t *testing.T) {
	k := smallImage(t)
	want, _ := New(k, kallsyms.NewSorted(k), nil)
	src := new(int)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ft, err := NewShared(k, kallsyms.NewSorted(k), nil, src)
			if err != nil {
				errs <- err.Error()
				return
			}
			ft.FreeInitMem()
			if ft.NumRecords() >= want.NumRecords() && k.InitText() != nil {
				errs <- "FreeInitMem freed nothing"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
