package kallsyms

import (
	"testing"

	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// TestMarkerWalkShortcutCounts: the simulator's precomputed record offsets
// give markerWalk the literal walk's result and exactly its counts, for
// every record.
func TestMarkerWalkShortcutCounts(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 6000, 1500, 400, 300, 800, 60
	k, _, err := synth.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var syms []ktab.Symbol
	for _, s := range k.Symbols {
		syms = append(syms, ktab.Symbol{Addr: s.Addr, Type: byte(s.Type), Name: s.Name})
	}
	tb, err := ktab.Build(syms, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := NewCompressed(tb, Baseline, CompressedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fast.EnableFastScan()
	if fast.simOffs == nil {
		t.Fatal("no shortcut table")
	}
	walk := *fast
	walk.simOffs = nil
	for i := 0; i < tb.NumSyms; i++ {
		var tf, tw tally
		pf, pw := fast.markerWalk(i, &tf), walk.markerWalk(i, &tw)
		if pf != pw || tf != tw {
			t.Fatalf("record %d: shortcut %d %+v, walk %d %+v", i, pf, tf, pw, tw)
		}
	}
}
