package kallsyms

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// scanTables builds cfg's vmlinux symbols as scripts/kallsyms does (all
// symbols, absolute percpu, base-relative).
func scanTables(t testing.TB, cfg synth.Config) (*image.Kernel, *ktab.Tables) {
	k := fixture.Generate(t, cfg)
	return k, fixture.KallsymsTables(t, k, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true})
}

// fastAndWalk returns tb's table with the fast scan on, and a copy from
// which drop removed one shortcut (so it walks as the kernel does); drop
// reports whether the shortcut was there.
func fastAndWalk(t testing.TB, tb *ktab.Tables, v Variant, drop func(*Compressed) bool) (fast, walk *Compressed) {
	fast, err := NewCompressed(tb, v, CompressedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fast.EnableFastScan()
	w := *fast
	if !drop(&w) {
		t.Fatalf("%v: no shortcut to drop", v)
	}
	return fast, &w
}

// TestMarkerWalkShortcutCounts: the simulator's precomputed record offsets
// give markerWalk the literal walk's result and exactly its counts, for
// every record.
func TestMarkerWalkShortcutCounts(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 6000, 1500, 400, 300, 800, 60
	_, tb := scanTables(t, cfg)
	fast, walk := fastAndWalk(t, tb, Baseline, func(c *Compressed) bool { had := c.simOffs != nil; c.simOffs = nil; return had })
	for i := 0; i < tb.NumSyms; i++ {
		var tf, tw tally
		pf, pw := fast.markerWalk(i, &tf), walk.markerWalk(i, &tw)
		if pf != pw || tf != tw {
			t.Fatalf("record %d: shortcut %d %+v, walk %d %+v", i, pf, tf, pw, tw)
		}
	}
}

// TestSymPosMemoMatchesWalk: get_symbol_pos with the memo gives the
// bisection's position, size, offset and exactly its counts, for address
// runs that stay inside one symbol (as an instruction walk does), jumps
// between symbols, aliases and the last symbol (whose end the memo never
// keeps).
func TestSymPosMemoMatchesWalk(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 3000, 800, 200, 150, 400, 30
	_, tb := scanTables(t, cfg)
	fast, walk := fastAndWalk(t, tb, Baseline, func(c *Compressed) bool { had := c.posMemo != nil; c.posMemo = nil; return had })
	lo, hi := tb.SymAddress(0), tb.SymAddress(tb.NumSyms-1)+64
	rapid.Check(t, func(rt *rapid.T) {
		addr := rapid.Uint64Range(lo, hi).Draw(rt, "start")
		for i := rapid.IntRange(1, 40).Draw(rt, "steps"); i > 0; i-- {
			var tf, tw tally
			pf, sf, of := fast.getSymbolPos(addr, &tf)
			pw, sw, ow := walk.getSymbolPos(addr, &tw)
			if pf != pw || sf != sw || of != ow || tf != tw {
				rt.Fatalf("%#x: memo %d %d %d %+v, walk %d %d %d %+v", addr, pf, sf, of, tf, pw, sw, ow, tw)
			}
			switch rapid.IntRange(0, 5).Draw(rt, "move") {
			case 0: // anywhere
				addr = rapid.Uint64Range(lo, hi).Draw(rt, "jump")
			case 1: // a symbol's own address (aliases included)
				addr = tb.SymAddress(rapid.IntRange(0, tb.NumSyms-1).Draw(rt, "sym"))
			default: // the next instruction
				addr += uint64(rapid.IntRange(1, 15).Draw(rt, "len"))
			}
		}
	})
}

// TestNameMemoMatchesWalk: kallsyms_lookup_names with the top of the
// bisection memoized gives the walk's positions and exactly its counts,
// for names present (aliases, duplicates), absent, prefixes and
// extensions of present names, over many lookups (so the memo fills).
func TestNameMemoMatchesWalk(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 3000, 800, 200, 150, 400, 30
	k, tb := scanTables(t, cfg)
	var names []string
	for _, s := range k.Symbols {
		names = append(names, s.Name)
	}
	for _, v := range []Variant{Baseline, {Index: IndexOffsets3}, {Index: IndexStride2}} {
		fast, walk := fastAndWalk(t, tb, v, func(c *Compressed) bool { had := c.nameMemo != nil; c.nameMemo = nil; return had })
		rapid.Check(t, func(rt *rapid.T) {
			for i := rapid.IntRange(1, 30).Draw(rt, "lookups"); i > 0; i-- {
				name := rapid.SampledFrom(names).Draw(rt, "name")
				switch rapid.IntRange(0, 3).Draw(rt, "edit") {
				case 1:
					name = name[:rapid.IntRange(0, len(name)).Draw(rt, "cut")]
				case 2:
					name += rapid.StringMatching(`[a-z_]{1,3}`).Draw(rt, "ext")
				}
				wantEnd := rapid.Bool().Draw(rt, "end")
				var tf, tw tally
				sf, ef, okf := fast.lookupNames(name, wantEnd, &tf)
				sw, ew, okw := walk.lookupNames(name, wantEnd, &tw)
				if sf != sw || ef != ew || okf != okw || tf != tw {
					rt.Fatalf("%v %q: memo %d %d %v %+v, walk %d %d %v %+v", v, name, sf, ef, okf, tf, sw, ew, okw, tw)
				}
			}
		})
	}
}
