package jumplabel

import (
	"sync"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

func defaultImage(t testing.TB) *image.Kernel { return resvtest.DefaultImage(t) }

// smallImage is a small randomised image (fast to generate and scan).
func smallImage(t testing.TB, seed uint64) *image.Kernel {
	return resvtest.SmallImage(t, seed, nil)
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// newForm returns a table of form f over k, reading system_state from st.
func newForm(t fataler, k *image.Kernel, f resvtest.Form, st *boot.State) *Table {
	var faults *sim.Faults
	if f.Fault {
		faults = &sim.Faults{}
		faults.Set(FaultIndexAlloc, 0)
	}
	tb, err := New(k, f.Switches, faults, func() boot.State { return *st })
	if err != nil {
		t.Fatal(err)
	}
	if f.Late {
		if err := tb.LateInit(nil); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

type oSite struct {
	code, end uint64 // [code, end)
	init      bool
}

var (
	oMu    sync.Mutex
	oCache = map[*image.Kernel]map[*image.JumpEntry][]oSite{}
)

// oracleSites sizes every site of es once (simulator work, cached per image).
func oracleSites(t fataler, k *image.Kernel, es []image.JumpEntry) []oSite {
	if len(es) == 0 {
		return nil
	}
	oMu.Lock()
	defer oMu.Unlock()
	m := oCache[k]
	if m == nil {
		m = map[*image.JumpEntry][]oSite{}
		oCache[k] = m
	}
	if s, ok := m[&es[0]]; ok && len(s) == len(es) {
		return s
	}
	out := make([]oSite, len(es))
	for i, e := range es {
		n, err := x86.JumpEntrySize(nil, k.Text(e.Code, 15))
		if err != nil {
			t.Fatalf("site %#x: %v", e.Code, err)
		}
		out[i] = oSite{e.Code, e.Code + uint64(n), e.Init}
	}
	m[&es[0]] = out
	return out
}

// oracle answers jump_label_text_reserved from first principles: any live
// site (by the init rules) whose bytes [code, code+size) meet [start, end].
func oracle(t fataler, k *image.Kernel, st boot.State, start, end uint64) bool {
	hit := func(es []image.JumpEntry, init bool) bool {
		for _, s := range oracleSites(t, k, es) {
			if s.init && !init {
				continue
			}
			if s.code <= end && s.end > start {
				return true
			}
		}
		return false
	}
	return resvtest.Reserved(k, st, start, k.JumpEntries, func(m *image.Module) []image.JumpEntry { return m.JumpEntries }, hit)
}
