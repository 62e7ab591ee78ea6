package jumplabel

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// edgeQueries: every function entry; each site's first and last byte, the
// byte before and after it, and a range spanning it and its neighbour.
func edgeQueries(k *image.Kernel, everyFunc, everySite int) [][2]uint64 {
	var qs [][2]uint64
	for i, f := range k.Functions() {
		if i%everyFunc == 0 {
			qs = append(qs, [2]uint64{f.Addr, f.Addr}, [2]uint64{f.Addr, f.Addr + 4})
		}
	}
	add := func(es []image.JumpEntry) {
		for i, e := range es {
			if i%everySite != 0 {
				continue
			}
			n, _ := x86.JumpEntrySize(nil, k.Text(e.Code, 15))
			last := e.Code + uint64(n) - 1
			qs = append(qs, [2]uint64{e.Code, e.Code}, [2]uint64{last, last}, [2]uint64{e.Code - 1, e.Code - 1},
				[2]uint64{last + 1, last + 1}, [2]uint64{e.Code - 4, e.Code - 1}, [2]uint64{last + 1, last + 8},
				[2]uint64{e.Code - 64, e.Code + 64})
		}
	}
	add(k.JumpEntries)
	for _, m := range k.Modules {
		add(m.JumpEntries)
		if m.Text != nil {
			qs = append(qs, [2]uint64{m.Text.Start, m.Text.Start + 15})
		}
	}
	return qs
}

func TestEquivalenceDefaultImage(t *testing.T) {
	k := defaultImage(t)
	every := 150
	if testing.Short() || race.Enabled {
		every = 4000
	}
	checkAll(t, k, atStates(edgeQueries(k, every, every), boot.Booting, boot.Running))
}

func TestEquivalenceInitSites(t *testing.T) {
	k := defaultImage(t)
	var rs [][2]uint64
	for i, e := range k.JumpEntries {
		if e.Init && i%(7+193*boolInt(race.Enabled)) == 0 {
			rs = append(rs, [2]uint64{e.Code, e.Code}, [2]uint64{e.Code + 1, e.Code + 1})
		}
	}
	if len(rs) == 0 {
		t.Fatal("default image has no init jump entries")
	}
	checkAll(t, k, atStates(rs, boot.Booting, boot.Scheduling, boot.FreeingInitmem, boot.Running))
}

func TestEquivalenceModuleStates(t *testing.T) {
	k := smallImage(t, 11) // private copy: states are changed below
	m := k.Modules[0]
	var rs [][2]uint64
	for _, e := range m.JumpEntries {
		rs = append(rs, [2]uint64{e.Code, e.Code}, [2]uint64{e.Code + 1, e.Code + 2})
	}
	if m.Init != nil {
		rs = append(rs, [2]uint64{m.Init.Start, m.Init.End() - 1})
	}
	for _, ms := range []image.ModuleState{image.ModuleLive, image.ModuleComing, image.ModuleGoing, image.ModuleUnformed} {
		m.State = ms
		checkAll(t, k, atStates(rs, boot.Running))
	}
}

// TestOpcodeSizeEqualsDecodedSize: P3's opcode classification and the
// upstream decode agree on every jump entry of every generated image.
func TestOpcodeSizeEqualsDecodedSize(t *testing.T) {
	imgs := []*image.Kernel{defaultImage(t), smallImage(t, 1), smallImage(t, 2), smallImage(t, 3)}
	for _, k := range imgs {
		var es []image.JumpEntry
		es = append(es, k.JumpEntries...)
		for _, m := range k.Modules {
			es = append(es, m.JumpEntries...)
		}
		for _, e := range es {
			code := k.Text(e.Code, 15)
			a, err1 := x86.JumpEntrySize(nil, code)
			b, err2 := x86.JumpEntrySizeDecode(nil, code)
			if err1 != nil || err2 != nil || a != b {
				t.Fatalf("%s: site %#x (% x): opcode %d/%v, decode %d/%v", k.Name, e.Code, code[:5], a, err1, b, err2)
			}
		}
	}
}

// TestReplayCountsMatchX86: the size cache replays exactly the counts the
// x86 functions make (one decode, or one opcode sizing, per call).
func TestReplayCountsMatchX86(t *testing.T) {
	k := smallImage(t, 5)
	for _, sw := range []sim.Switches{0, sim.Switches(0).With(sim.JumpSizeOpcode)} {
		st := boot.Running
		tb := newForm(t, k, resvtest.Form{Switches: sw, Late: true}, &st)
		for i := range tb.core {
			s := &tb.core[i]
			c1 := sim.NewCounters(false)
			if sw.Has(sim.JumpSizeOpcode) {
				x86.JumpEntrySize(c1, s.text)
			} else {
				x86.JumpEntrySizeDecode(c1, s.text)
			}
			for pass := 0; pass < 2; pass++ { // miss, then hit
				c2 := sim.NewCounters(false)
				if _, err := tb.jumpEntrySize(c2, s); err != nil {
					t.Fatal(err)
				}
				if c1.String() != c2.String() {
					t.Fatalf("pass %d: counts %q, x86 counts %q", pass, c2.String(), c1.String())
				}
			}
		}
	}
}

// TestCounts: one linear check at a core function entry visits every core
// entry and sizes every non-init entry at or below the address; one
// indexed check makes at most ⌊log2 J⌋+1 probes and visits the window.
func TestCounts(t *testing.T) {
	k := defaultImage(t)
	J := len(k.JumpEntries)
	fn := k.Functions()[len(k.Functions())/2]
	addr := fn.Addr
	reserved := oracle(t, k, boot.Running, addr, addr)
	if reserved {
		t.Fatalf("probe address %#x is reserved; pick another", addr)
	}
	var below, window int
	for _, e := range k.JumpEntries {
		if !e.Init && e.Code <= addr {
			below++
		}
		if e.Code+4 >= addr && e.Code <= addr {
			window++
		}
	}
	st := boot.Running
	for _, opcode := range []bool{false, true} {
		sw := sim.Switches(0)
		sizeOp := x86.OpDecode
		if opcode {
			sw = sw.With(sim.JumpSizeOpcode)
			sizeOp = x86.OpJumpSizeOpcode
		}
		lin := newForm(t, k, resvtest.Form{Switches: sw, Late: true}, &st)
		for rep := 0; rep < 2; rep++ { // the second call replays cached sizes
			c := sim.NewCounters(false)
			if got, err := lin.TextReserved(c, addr, addr); err != nil || got {
				t.Fatal(got, err)
			}
			if n := c.Total(OpScanEntry); n != uint64(J) {
				t.Errorf("linear: %d entries visited, want J = %d", n, J)
			}
			if n := c.Total(sizeOp); n != uint64(below) {
				t.Errorf("linear: %d sizings, want %d non-init entries with code <= addr", n, below)
			}
			if c.Total(OpIndexProbe)+c.Total(OpIndexEntry) != 0 {
				t.Error("linear form touched the index")
			}
		}
		idx := newForm(t, k, resvtest.Form{Switches: sw.With(sim.JumpLabelIndex), Late: true}, &st)
		c := sim.NewCounters(false)
		if got, err := idx.TextReserved(c, addr, addr); err != nil || got {
			t.Fatal(got, err)
		}
		if n, max := c.Total(OpIndexProbe), uint64(bits.Len(uint(J))); n > max || n+1 < max {
			t.Errorf("indexed: %d probes, want about log2(J+1) = %d", n, max)
		}
		if n := c.Total(OpIndexEntry); n != uint64(window)+1 {
			t.Errorf("indexed: %d window entries, want %d candidates + the one ending the walk", n, window+1)
		}
		if n := c.Total(OpScanEntry); n != 0 {
			t.Errorf("indexed: %d core entries scanned", n)
		}
		if n := c.Total(sizeOp); n != uint64(window) {
			t.Errorf("indexed: %d sizings, want %d", n, window)
		}
	}
}

func TestModuleCounts(t *testing.T) {
	k := defaultImage(t)
	m := k.Modules[len(k.Modules)-1]
	addr := m.Text.Start // module function entry
	st := boot.Running
	tb := newForm(t, k, resvtest.Form{Switches: sim.Switches(0).With(sim.JumpLabelIndex), Late: true}, &st)
	c := sim.NewCounters(false)
	if _, err := tb.TextReserved(c, addr, addr); err != nil {
		t.Fatal(err)
	}
	if n := c.Total(OpScanEntry); n == 0 || n > uint64(len(m.JumpEntries)) {
		t.Errorf("module scan visited %d entries, module has %d", n, len(m.JumpEntries))
	}
	// __jump_label_mod_text_reserved looks up start, then end for its
	// WARN_ON_ONCE; one try_module_get/module_put pair.
	if c.Total(OpModuleLookup) != 2 || c.Total(OpModuleGet) != 1 {
		t.Errorf("module lookups %d (want 2), gets %d (want 1)", c.Total(OpModuleLookup), c.Total(OpModuleGet))
	}
}

func TestIndexMemory(t *testing.T) {
	k := defaultImage(t)
	st := boot.Running
	for _, eb := range []int{IndexPointer, IndexOffset} {
		tb, _ := New(k, sim.Switches(0).With(sim.JumpLabelIndex), nil, func() boot.State { return st })
		if err := tb.SetIndexEntryBytes(eb); err != nil {
			t.Fatal(err)
		}
		c := sim.NewCounters(false)
		if err := tb.LateInit(c); err != nil {
			t.Fatal(err)
		}
		x, err := tb.Index()
		if err != nil {
			t.Fatal(err)
		}
		want := int64(len(k.JumpEntries) * eb)
		if x.Bytes() != want {
			t.Errorf("index bytes %d, want %d", x.Bytes(), want)
		}
		found := false
		for _, nb := range c.Bytes() {
			if nb.Name == "jump_label.index.bytes" && nb.Bytes == want {
				found = true
			}
		}
		if !found {
			t.Errorf("jump_label.index.bytes not recorded: %v", c.Bytes())
		}
		if c.Total(OpIndexFill) != uint64(len(k.JumpEntries)) || c.Total(OpIndexSortCmp) == 0 {
			t.Error("index build not counted")
		}
		if err := tb.SetIndexEntryBytes(4); err == nil {
			t.Error("layout change after late init accepted")
		}
	}
	tb, _ := New(k, 0, nil, nil)
	if err := tb.SetIndexEntryBytes(16); err == nil {
		t.Error("16-byte layout accepted")
	}
}

// TestNilImage: New refuses a nil image (the index errors are in the
// conformance suite).
func TestNilImage(t *testing.T) {
	if _, err := New(nil, 0, nil, nil); err == nil {
		t.Fatal("nil image accepted")
	}
}

// cloneJumps returns a shallow copy of k with its own jump table.
func cloneJumps(k *image.Kernel) *image.Kernel {
	c := *k
	c.JumpEntries = append([]image.JumpEntry(nil), k.JumpEntries...)
	return &c
}

func TestBadTables(t *testing.T) {
	k := smallImage(t, 4)
	idx := sim.Switches(0).With(sim.JumpLabelIndex)

	unsorted := cloneJumps(k)
	n := len(unsorted.JumpEntries)
	unsorted.JumpEntries[0], unsorted.JumpEntries[n-1] = unsorted.JumpEntries[n-1], unsorted.JumpEntries[0]
	tb, _ := New(unsorted, idx, nil, nil)
	if err := tb.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("unsorted table: %v", err)
	}
	if tb.Indexed() {
		t.Fatal("index built from an unsorted table")
	}
	if _, err := tb.Index(); !errors.Is(err, ErrBadTable) {
		t.Fatalf("Index after failed build: %v", err)
	}
	if _, err := tb.TextReserved(nil, k.JumpEntries[0].Code, k.JumpEntries[0].Code); err != nil {
		t.Fatalf("linear fallback after failed build: %v", err)
	}

	overlap := cloneJumps(k)
	e := overlap.JumpEntries[0]
	e.Code++ // a second site inside the first, same key: still (key, code) order
	overlap.JumpEntries = append([]image.JumpEntry{overlap.JumpEntries[0], e}, overlap.JumpEntries[1:]...)
	tb, _ = New(overlap, idx, nil, nil)
	if err := tb.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("overlapping sites: %v", err)
	}
}

func TestBadSiteBytes(t *testing.T) {
	k := smallImage(t, 6) // private: its text is modified
	var e image.JumpEntry
	for _, je := range k.JumpEntries {
		if !je.Init {
			e = je
			break
		}
	}
	copy(k.Text(e.Code, 5), []byte{0x48, 0x89, 0xe5, 0x90, 0x90}) // mov %rsp,%rbp: 3 bytes
	for _, f := range resvtest.Forms(sim.JumpLabelIndex, sim.JumpSizeOpcode) {
		st := boot.Running
		tb := newForm(t, k, f, &st)
		_, err := tb.TextReserved(nil, e.Code, e.Code)
		if !errors.Is(err, x86.ErrJumpEntryBUG) {
			t.Fatalf("%s: bad site bytes: err %v, want the BUG error", f.Name, err)
		}
	}
	// A site changed after its size was cached is re-sized, not replayed.
	k2 := smallImage(t, 7)
	e2 := k2.JumpEntries[0]
	st := boot.Running
	tb := newForm(t, k2, resvtest.Form{Switches: 0, Late: true}, &st)
	if _, err := tb.TextReserved(nil, e2.Code, e2.Code); err != nil {
		t.Fatal(err)
	}
	k2.Text(e2.Code, 1)[0] = 0xcc
	if _, err := tb.TextReserved(nil, e2.Code, e2.Code); !errors.Is(err, x86.ErrJumpEntryBUG) {
		t.Fatalf("modified site: %v", err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
