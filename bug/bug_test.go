package bug

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/resvtest"
	"github.com/kpsim/kpsim/sim"
)

// TestCounts: a miss walks the whole core table, every module and every
// module entry; the indexed form makes about log2(B)+1 probes instead.
func TestCounts(t *testing.T) {
	k := defaultImage(t)
	B := len(k.BugEntries)
	var modB int
	for _, m := range k.Modules {
		modB += len(m.BugEntries)
	}
	addr := k.Functions()[500].Addr
	if oracle(k, addr) != nil {
		t.Fatal("function entry is a bug address")
	}
	tbs := resvtest.Unwrapped[*Table](t, check, k)
	c := sim.NewCounters(false)
	tbs[0].FindBug(c, addr)
	if n := c.Total(OpScanEntry); n != uint64(B+modB) {
		t.Errorf("linear: %d entries, want %d core + %d module", n, B, modB)
	}
	if n := c.Total(OpModuleVisit); n != uint64(len(k.Modules)) {
		t.Errorf("linear: %d modules visited, want %d", n, len(k.Modules))
	}
	c = sim.NewCounters(false)
	tbs[1].FindBug(c, addr)
	if n, max := c.Total(OpIndexProbe), uint64(bits.Len(uint(B))); n > max || n+1 < max {
		t.Errorf("indexed: %d probes, want about %d", n, max)
	}
	if n := c.Total(OpScanEntry); n != uint64(modB) {
		t.Errorf("indexed: %d entries scanned, want the %d module entries", n, modB)
	}
	// Newest module first: an entry of the newest module costs only its own scan.
	newest := k.Modules[len(k.Modules)-1]
	c = sim.NewCounters(false)
	tbs[0].FindBug(c, newest.BugEntries[0].Addr)
	if n := c.Total(OpModuleVisit); n != 1 {
		t.Errorf("newest module's entry: %d modules visited, want 1", n)
	}
}

func TestIndexAndErrors(t *testing.T) {
	k := smallImage(t, 4)
	idx := sim.Switches(0).With(sim.BugIndex)
	tb, _ := New(k, idx, nil)
	c := sim.NewCounters(false)
	tb.LateInit(c)
	x, err := tb.Index()
	if err != nil || x.Len() != len(k.BugEntries) || x.Bytes() != int64(8*x.Len()) || x.EntryBytes() != 8 {
		t.Fatal(x, err)
	}
	dup := *k
	dup.BugEntries = append(append([]image.BugEntry(nil), k.BugEntries...), k.BugEntries[3])
	d, _ := New(&dup, idx, nil)
	if err := d.LateInit(nil); !errors.Is(err, ErrBadTable) {
		t.Fatalf("duplicate: %v", err)
	}
	if got := d.FindBug(nil, k.BugEntries[3].Addr); got == nil {
		t.Fatal("linear fallback after failed build")
	}
	if err := d.SetIndexEntryBytes(4); err == nil {
		t.Fatal("layout after late init")
	}
	if EntryBytes(image.Config{BugVerbose: true}) != 12 || EntryBytes(image.Config{}) != 8 {
		t.Fatal("entry size")
	}
	if _, err := New(nil, 0, nil); err == nil {
		t.Fatal("nil image")
	}
}

func benchFind(b *testing.B, sw sim.Switches) {
	k := defaultImage(b)
	fs := k.Functions()
	tb, _ := New(k, sw, nil)
	tb.LateInit(nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb.FindBug(nil, fs[(i*977)%len(fs)].Addr)
	}
}

// One find_bug miss on the default image.
func BenchmarkFindBugLinear(b *testing.B)  { benchFind(b, 0) }
func BenchmarkFindBugIndexed(b *testing.B) { benchFind(b, sim.Switches(0).With(sim.BugIndex)) }

// Building the bug index.
func BenchmarkLateInitIndex(b *testing.B) {
	k := defaultImage(b)
	for i := 0; i < b.N; i++ {
		tb, _ := New(k, sim.Switches(0).With(sim.BugIndex), nil)
		tb.LateInit(nil)
	}
}
