package maple

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

func ident(v uint64) uint64 { return v }

func countOf(_ any, c *sim.Counters, name string) uint64 {
	op, ok := sim.LookupOp(name)
	if !ok {
		panic("no op " + name)
	}
	return c.Total(op)
}

// TestTreeMatchesSortedSet: random inserts, deletes, replaces and seeks
// give the answers of a sorted slice, and cursor walks in both directions
// from any seek visit exactly the slice's neighbours. Every walk's node
// count stays within the height.
func TestTreeMatchesSortedSet(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr := New(ident, nil)
		var ref []uint64
		keyGen := rapid.Uint64Range(0, 400)
		for step := rapid.IntRange(1, 300).Draw(rt, "steps"); step > 0; step-- {
			k := keyGen.Draw(rt, "key")
			c := sim.NewCounters(false)
			i, present := slices.BinarySearch(ref, k)
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0, 1:
				err := tr.Insert(k, c)
				if present != (err == ErrExists) || (!present && err != nil) {
					rt.Fatalf("insert %d: %v (present %v)", k, err, present)
				}
				if !present {
					ref = slices.Insert(ref, i, k)
				}
			case 2:
				if got := tr.Delete(k, c); got != present {
					rt.Fatalf("delete %d = %v, want %v", k, got, present)
				}
				if present {
					ref = slices.Delete(ref, i, i+1)
				}
			case 3:
				if got := tr.Replace(k, c); got != present {
					rt.Fatalf("replace %d = %v, want %v", k, got, present)
				}
			case 4:
				ge := tr.SeekGE(k, c)
				if (i < len(ref)) != ge.Valid() || (ge.Valid() && ge.Entry() != ref[i]) {
					rt.Fatalf("SeekGE(%d) = %v/%d, want index %d of %v", k, ge.Valid(), ge.Entry(), i, ref)
				}
				j := i
				if !present {
					j = i - 1
				}
				le := tr.SeekLE(k, c)
				if (j >= 0) != le.Valid() || (le.Valid() && le.Entry() != ref[j]) {
					rt.Fatalf("SeekLE(%d) = %v/%d, want index %d of %v", k, le.Valid(), le.Entry(), j, ref)
				}
				var fwd, back []uint64
				for ; ge.Valid(); ge.Next(c) {
					fwd = append(fwd, ge.Entry())
				}
				for ; le.Valid(); le.Prev(c) {
					back = append(back, le.Entry())
				}
				slices.Reverse(back)
				if !slices.Equal(fwd, ref[i:]) || !slices.Equal(back, ref[:j+1]) {
					rt.Fatalf("walks from %d: %v / %v, want %v / %v", k, fwd, back, ref[i:], ref[:j+1])
				}
			}
			if tr.Len() != len(ref) {
				rt.Fatalf("len %d, want %d", tr.Len(), len(ref))
			}
			if s, n := countOf(rt, c, "maple.search"), countOf(rt, c, "maple.node"); s == 1 && n > uint64(tr.Height()+1) && countOf(rt, c, "maple.slot") == 0 {
				rt.Fatalf("one walk loaded %d nodes, height %d", n, tr.Height())
			}
		}
		if !slices.Equal(tr.Entries(), ref) && len(ref) > 0 {
			rt.Fatalf("entries %v, want %v", tr.Entries(), ref)
		}
		if tr.Bytes() != int64(tr.Nodes())*NodeBytes {
			rt.Fatal("bytes is not nodes x 256")
		}
	})
}

// TestGeometry: 20,000 keys in order fill degree-8 nodes (at most 15
// items, 16 children) to a tree of 5 levels; one lookup loads exactly
// height nodes at a leaf and at most 4 lines per node.
func TestGeometry(t *testing.T) {
	tr := New(ident, nil)
	for i := uint64(0); i < 20000; i++ {
		if err := tr.Insert(i*16, nil); err != nil {
			t.Fatal(err)
		}
	}
	var maxItems, maxKids int
	var walk func(n *gnode[uint64])
	walk = func(n *gnode[uint64]) {
		maxItems, maxKids = max(maxItems, len(n.items)), max(maxKids, len(n.children))
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(tr.root())
	if maxItems > Pivots || maxKids > Slots || maxKids < Slots-1 {
		t.Fatalf("node fan-out: %d items, %d children; want maple_range_64's %d pivots, %d slots", maxItems, maxKids, Pivots, Slots)
	}
	if h := tr.Height(); h != 5 {
		t.Fatalf("height %d, want 5", h)
	}
	c := sim.NewCounters(false)
	cur := tr.SeekGE(16*12345+1, c)
	if !cur.Valid() || cur.Entry() != 16*12346 {
		t.Fatalf("SeekGE: %v %d", cur.Valid(), cur.Entry())
	}
	n, l := countOf(t, c, "maple.node"), countOf(t, c, "maple.line")
	if n < 1 || n > 5 || l > 3*n {
		t.Fatalf("one lookup: %d nodes, %d extra lines", n, l)
	}
}

// TestNodeAllocFault: a store that must split fails with ErrNoMem when
// maple.node.alloc fires and leaves the tree unchanged; a store that needs
// no new node never consults the fault point.
func TestNodeAllocFault(t *testing.T) {
	f := &sim.Faults{}
	f.Set(FaultNodeAlloc, 0)
	tr := New(ident, f)
	for i := uint64(0); i < Pivots; i++ {
		if err := tr.Insert(i, nil); err != nil {
			t.Fatalf("insert %d into a non-full root: %v", i, err)
		}
	}
	if err := tr.Insert(100, nil); err != ErrNoMem {
		t.Fatalf("insert into a full root: %v, want ErrNoMem", err)
	}
	if cur := tr.SeekGE(100, nil); tr.Len() != Pivots || tr.Nodes() != 1 || cur.Valid() {
		t.Fatalf("a failed insert changed the tree: len %d, nodes %d", tr.Len(), tr.Nodes())
	}
	tr.Faults = nil
	if err := tr.Insert(100, nil); err != nil || tr.Nodes() != 3 {
		t.Fatalf("insert after the fault: %v, %d nodes", err, tr.Nodes())
	}
}

func ExampleTree() {
	tr := New(func(v uint64) uint64 { return v }, nil)
	for _, k := range []uint64{40, 10, 30, 20} {
		_ = tr.Insert(k, nil)
	}
	var got []uint64
	for cur := tr.SeekGE(15, nil); cur.Valid(); cur.Next(nil) {
		got = append(got, cur.Entry())
	}
	fmt.Println(got)
	cur := tr.SeekLE(35, nil)
	fmt.Println(cur.Entry(), tr.Height(), tr.Bytes())
	// Output:
	// [20 30 40]
	// 30 1 256
}

func benchSeek(b *testing.B, n int) {
	tr := New(ident, nil)
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = 0xffffffff81000000 + uint64(i)*4096
		_ = tr.Insert(keys[i], nil)
	}
	c := sim.NewCounters(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur := tr.SeekGE(keys[(i*7919)%n], c)
		if !cur.Valid() {
			b.Fatal("missing key")
		}
	}
	b.ReportMetric(float64(countOf(b, c, "maple.node"))/float64(b.N), "nodes/op")
	b.ReportMetric(float64(countOf(b, c, "maple.line"))/float64(b.N), "lines/op")
}

func BenchmarkSeekGE20k(b *testing.B) { benchSeek(b, 20000) }
func BenchmarkSeekGE50k(b *testing.B) { benchSeek(b, 50000) }

func BenchmarkInsert50k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		tr := New(ident, nil)
		for k := uint64(0); k < 50000; k++ {
			_ = tr.Insert(k*4096, nil)
		}
	}
}

// TestGeometryMatchesKernelHeader reads include/linux/maple_tree.h from
// the kernel source (KPSIM_LINUX_SRC, else the machines' extracted
// linux-source-6.1): the 64-bit maple_range_64 has 16 slots in a 256-byte
// node. Skips without the source.
func TestGeometryMatchesKernelHeader(t *testing.T) {
	src := os.Getenv("KPSIM_LINUX_SRC")
	if src == "" {
		src = "/work/src/usr/src/linux-source-6.1"
	}
	b, err := os.ReadFile(src + "/include/linux/maple_tree.h")
	if err != nil {
		t.Skip("no kernel source:", err)
	}
	s := string(b)
	// The first definitions are the 64-bit ones (#if defined(CONFIG_64BIT)).
	i := strings.Index(s, "#if defined(CONFIG_64BIT)")
	if i < 0 {
		t.Fatal("no CONFIG_64BIT branch in maple_tree.h")
	}
	s = s[i:]
	for _, want := range []string{
		fmt.Sprintf("#define MAPLE_RANGE64_SLOTS\t%d\t/* %d bytes */", Slots, NodeBytes),
		fmt.Sprintf("/* %d bytes including ->parent */", NodeBytes),
	} {
		if j := strings.Index(s, want); j < 0 || j > strings.Index(s, "#else") {
			t.Errorf("maple_tree.h's 64-bit branch lacks %q", want)
		}
	}
}
