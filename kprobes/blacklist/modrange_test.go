package blacklist

import (
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// TestModuleRanges: a module's .noinstr.text and .kprobes.text ranges add
// one entry per symbol at COMING (add_module_kprobe_blacklist) and
// leave at GOING; addresses outside them stay probeable.
func TestModuleRanges(t *testing.T) {
	k := smallImage(t, 7)
	m := k.Modules[0]
	var fs []image.Symbol
	for _, s := range m.Symbols {
		if s.IsText() && s.Size > 0 && m.Text.Contains(s.Addr) {
			fs = append(fs, s)
		}
	}
	if len(fs) < 6 {
		t.Fatal("module too small")
	}
	// Two adjacent functions as noinstr text, one as kprobes text.
	m.Ranges = []image.Range{
		{Name: image.RangeNoinstrText, Start: fs[2].Addr, End: fs[4].Addr},
		{Name: image.RangeKprobesText, Start: fs[5].Addr, End: fs[5].Addr + fs[5].Size},
	}
	c := sim.NewCounters(false)
	l, err := New(c, k, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := []uint64{fs[2].Addr, fs[3].Addr + 1, fs[5].Addr}
	out := []uint64{fs[1].Addr, fs[4].Addr}
	for _, a := range in {
		if !l.WithinKprobeBlacklist(nil, a) {
			t.Errorf("%#x in a module noinstr/kprobes range is not blacklisted", a)
		}
	}
	for _, a := range out {
		if l.WithinKprobeBlacklist(nil, a) {
			t.Errorf("%#x outside the module ranges is blacklisted", a)
		}
	}
	n := 0
	for _, e := range l.Entries() {
		if e.Module == m {
			n++
		}
	}
	if want := len(m.Blacklist) + 3; n < want {
		t.Errorf("%d entries for the module, want at least %d (its _kprobe_blacklist and one per range symbol)", n, want)
	}
	l.RemoveModule(c, m)
	for _, a := range in {
		if l.WithinKprobeBlacklist(nil, a) {
			t.Errorf("%#x still blacklisted after the module went", a)
		}
	}
}
