package kallsyms

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

func sampleStep(tb testing.TB) int {
	if race.Enabled || testing.Short() {
		return 97
	}
	return 1
}

func allResolvers(tb interface{ Fatalf(string, ...any) }, t *ktab.Tables) []*Compressed {
	var out []*Compressed
	for _, v := range AllVariants() {
		c, err := NewCompressed(t, v, CompressedOptions{})
		if err != nil {
			tb.Fatalf("%s: %v", v, err)
		}
		out = append(out, c)
	}
	return out
}

// missesFor derives names that are not in the table near name (shared
// prefixes make the search go deep).
func missesFor(name string) []string {
	return []string{name + "_", name[:len(name)-1] + "\x7f", name + ".cold.9", "~" + name, name[:len(name)/2] + "zz"}
}

type nameResult struct {
	addr    uint64
	ok      bool
	start   int
	end     int
	found   bool
	matches []uint64
}

type addrResult struct {
	size, off   uint64
	sok         bool
	name        string
	nok         bool
	sprint      string
	sprintNoOff string
	backtrace   string
	kname       string
	kmod        string
}

func lookupNameAll(c *Compressed, cn *sim.Counters, name string) nameResult {
	var r nameResult
	r.addr, r.ok = c.LookupName(cn, name)
	r.start, r.end, r.found = c.LookupNames(cn, name, true)
	c.OnEachMatchSymbol(cn, name, func(a uint64) int { r.matches = append(r.matches, a); return 0 })
	return r
}

func lookupAddrAll(c *Compressed, cn *sim.Counters, a uint64) addrResult {
	var r addrResult
	r.size, r.off, r.sok = c.LookupSizeOffset(cn, a)
	r.name, r.nok = c.LookupSymbolName(cn, a)
	r.sprint = c.SprintSymbol(cn, a)
	r.sprintNoOff = c.SprintSymbolNoOffset(cn, a)
	r.backtrace = c.SprintBacktrace(cn, a)
	r.kname, _, _, r.kmod, _ = c.KallsymsLookup(cn, a)
	return r
}

// checkAgreement: every variant returns what the oracle says, for every
// symbol name (hit), misses next to it, and every address ±1.
func checkAgreement(t *testing.T, tab *ktab.Tables, step int) {
	rs := allResolvers(t, tab)
	o := newOracle(rs[0])
	seen := map[string]bool{}
	names := 0
	for i := 0; i < tab.NumSyms; i += step {
		name := tab.Syms[i].Name
		if seen[name] {
			continue
		}
		seen[name] = true
		for k, q := range append([]string{name}, missesFor(name)...) {
			want := o.matches(q)
			if k == 0 && len(want) == 0 {
				t.Fatalf("oracle misses %q", q)
			}
			for _, c := range rs {
				r := lookupNameAll(c, nil, q)
				if len(want) == 0 {
					if r.ok || r.found || r.matches != nil {
						t.Fatalf("%s: %q should miss: %+v", c.Variant(), q, r)
					}
					continue
				}
				if !r.ok || r.addr != want[0] || !r.found || !slices.Equal(r.matches, want) || r.end-r.start+1 != len(want) {
					t.Fatalf("%s: %q: got %+v, want %x", c.Variant(), q, r, want)
				}
			}
		}
		names++
	}
	addrs := 0
	for i := 0; i < tab.NumSyms; i += step {
		for _, a := range []uint64{tab.Syms[i].Addr - 1, tab.Syms[i].Addr, tab.Syms[i].Addr + 1} {
			base := lookupAddrAll(rs[0], nil, a)
			if rs[0].IsKsymAddr(a) {
				pos, size, off := o.pos(a)
				name := o.syms[pos].Name
				want := addrResult{size: size, off: off, sok: true, name: name, nok: true,
					sprint:      fmt.Sprintf("%s+%#x/%#x", name, off, size),
					sprintNoOff: name, kname: name}
				bpos, bsize, boff := o.pos(a - 1)
				want.backtrace = fmt.Sprintf("%s+%#x/%#x", o.syms[bpos].Name, boff+1, bsize)
				if !rs[0].IsKsymAddr(a - 1) {
					want.backtrace = fmt.Sprintf("0x%x", a)
				}
				if base != want {
					t.Fatalf("baseline at %#x: got %+v, want %+v", a, base, want)
				}
			} else if base.sok || base.nok || base.sprint != fmt.Sprintf("0x%x", a) {
				t.Fatalf("baseline at %#x outside the kernel: %+v", a, base)
			}
			for _, c := range rs[1:] {
				if r := lookupAddrAll(c, nil, a); r != base {
					t.Fatalf("%s at %#x: %+v, baseline %+v", c.Variant(), a, r, base)
				}
			}
			addrs++
		}
	}
	// The walk: same names and addresses in kallsyms order for all.
	for _, c := range rs {
		i := 0
		c.OnEachSymbol(nil, func(name []byte, a uint64) int {
			if string(name) != tab.Syms[i].Name || a != tab.Syms[i].Addr {
				t.Fatalf("%s walk at %d: %q %#x", c.Variant(), i, name, a)
			}
			i++
			return 0
		})
		if i != tab.NumSyms {
			t.Fatalf("%s walk visited %d of %d", c.Variant(), i, tab.NumSyms)
		}
	}
	t.Logf("%d symbols, %d distinct names checked (×6 queries), %d addresses, %d variants", tab.NumSyms, names, addrs, len(rs))
}

func TestCompressedAgreeSynth(t *testing.T) {
	checkAgreement(t, synthTables(t), sampleStep(t))
}

// TestCompressedAgreeProcKallsyms checks the variants against each other
// over a real kernel's symbols: the pinned Debian 6.1 list in testdata
// (debianSymbols), so the test reaches the same symbols on every host.
// With KPSIM_HOST_KALLSYMS=1 it also checks this machine's /proc/kallsyms
// (skipped where addresses are hidden; what it reaches depends on the
// host's kernel).
func TestCompressedAgreeProcKallsyms(t *testing.T) {
	t.Run("debian-6.1", func(t *testing.T) {
		checkAgreement(t, debianTables(t), sampleStep(t))
	})
	if os.Getenv("KPSIM_HOST_KALLSYMS") == "1" {
		t.Run("host", func(t *testing.T) {
			checkAgreement(t, procTables(t), sampleStep(t))
		})
	}
}

func TestCompressedEmptyAndNUL(t *testing.T) {
	tab := synthTables(t)
	for _, c := range allResolvers(t, tab) {
		if _, ok := c.LookupName(nil, ""); ok {
			t.Fatalf("%s: empty name found", c.Variant())
		}
		name := tab.Syms[100].Name
		a, ok := c.LookupName(nil, name+"\x00junk")
		if b, _ := c.LookupName(nil, name); !ok || a != b {
			t.Fatalf("%s: a NUL must end the name as in C", c.Variant())
		}
	}
}

// TestCompressedCounts: the counts explain the speed-up, checked against
// the table's own shape.
func TestCompressedCounts(t *testing.T) {
	for _, src := range []struct {
		name string
		tab  func(testing.TB) *ktab.Tables
	}{{"synth", synthTables}, {"proc", procTables}} {
		t.Run(src.name, func(t *testing.T) {
			tab := src.tab(t)
			checkCounts(t, tab)
		})
	}
}

func checkCounts(t *testing.T, tab *ktab.Tables) {
	n := tab.NumSyms
	// The shape: mean distance of a record to its marker.
	var dist float64
	for i := 0; i < n; i++ {
		dist += float64(i & 0xFF)
	}
	meanDist := dist / float64(n)
	log2 := math.Floor(math.Log2(float64(n))) + 1 // max binary-search steps

	step := max(1, n/4000)
	var queries []string
	for i := 0; i < n; i += step {
		queries = append(queries, tab.Syms[i].Name, tab.Syms[i].Name+"_miss")
	}
	type tot struct {
		c *sim.Counters
		s *LookupStats
	}
	res := map[Variant]tot{}
	for _, v := range AllVariants() {
		c, err := NewCompressed(tab, v, CompressedOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Stats = &LookupStats{}
		if v.Index == IndexDynamic32 {
			cn := sim.NewCounters(false)
			if !c.PrepareBatch(cn) || cn.Total(OpHop) != uint64(n-1) && cn.Total(OpHop) != uint64(n) {
				t.Fatalf("dynamic32 build: %d hops for %d records", cn.Total(OpHop), n)
			}
		}
		cn := sim.NewCounters(false)
		for _, q := range queries {
			before := cn.Total(OpHop)
			st := *c.Stats
			c.LookupName(cn, q)
			hops := cn.Total(OpHop) - before
			cmps := c.Stats.Comparisons - st.Comparisons
			steps := c.Stats.BsearchSteps - st.BsearchSteps
			if float64(steps) > log2 {
				t.Fatalf("%s %q: %d binary-search steps > %v", v, q, steps, log2)
			}
			switch v.Index {
			case IndexMarkers:
				// Exactly Σ (seq & 0xFF) over the comparisons.
				if hops != c.Stats.HopDistance-st.HopDistance {
					t.Fatalf("%s %q: %d hops, want %d", v, q, hops, c.Stats.HopDistance-st.HopDistance)
				}
			case IndexOffsets3, IndexDynamic32:
				if hops != 0 {
					t.Fatalf("%s %q: %d hops, want 0", v, q, hops)
				}
			case IndexStride2:
				if hops != c.Stats.OddSeqs-st.OddSeqs || hops > cmps {
					t.Fatalf("%s %q: %d hops for %d comparisons", v, q, hops, cmps)
				}
			}
		}
		res[v] = tot{cn, c.Stats}
	}
	base := res[Baseline]
	nq := float64(len(queries))
	perCmp := float64(base.c.Total(OpHop)) / float64(base.s.Comparisons)
	// The population mean of the marker distance, within 10%.
	if math.Abs(perCmp-meanDist)/meanDist > 0.10 {
		t.Errorf("baseline: %.1f hops per comparison, table's mean marker distance %.1f", perCmp, meanDist)
	}
	// hops per lookup ≈ binary-search steps × mean distance (walk
	// comparisons included).
	want := float64(base.s.Comparisons) / nq * meanDist
	got := float64(base.c.Total(OpHop)) / nq
	if math.Abs(got-want)/want > 0.10 {
		t.Errorf("baseline: %.0f hops per lookup, steps × mean distance = %.0f", got, want)
	}
	for _, v := range AllVariants() {
		r := res[v]
		// Same comparisons, same characters compared, whatever the variant.
		if r.s.Comparisons != base.s.Comparisons || r.c.Total(OpChrCmp) != base.c.Total(OpChrCmp) {
			t.Errorf("%s: %d comparisons / %d chr_cmp, baseline %d / %d", v, r.s.Comparisons, r.c.Total(OpChrCmp), base.s.Comparisons, base.c.Total(OpChrCmp))
		}
		if v.TokenCmp {
			if r.c.Total(OpChrOut) != 0 || r.c.Total(OpTok) >= base.c.Total(OpTok) {
				t.Errorf("%s: chr_out %d, tok %d vs baseline %d", v, r.c.Total(OpChrOut), r.c.Total(OpTok), base.c.Total(OpTok))
			}
		} else if r.c.Total(OpTok) != base.c.Total(OpTok) || r.c.Total(OpChrOut) != base.c.Total(OpChrOut) {
			t.Errorf("%s: expansion counts differ from baseline", v)
		}
		if v.Index == IndexStride2 {
			// Exactly the odd records compared (checked per lookup above);
			// the share is the table's parity structure (__pfx_ twins
			// alternate), not 0.5 in general.
			if r.c.Total(OpHop) != r.s.OddSeqs {
				t.Errorf("stride2: %d hops, %d odd records compared", r.c.Total(OpHop), r.s.OddSeqs)
			}
			t.Logf("stride2: %.2f hops per comparison", float64(r.c.Total(OpHop))/float64(r.s.Comparisons))
		}
	}
	t.Logf("N=%d: mean marker distance %.1f; baseline per lookup: %.2f bsearch steps, %.2f cmps, %.0f hops (%.1f per cmp), %.0f tok, %.0f chr_out, %.1f chr_cmp, %.0f bytes",
		n, meanDist, float64(base.s.BsearchSteps)/nq, float64(base.s.Comparisons)/nq, got, perCmp,
		float64(base.c.Total(OpTok))/nq, float64(base.c.Total(OpChrOut))/nq, float64(base.c.Total(OpChrCmp))/nq, float64(base.c.Total(OpBytes))/nq)
	tc := res[TokenCmpVariant]
	t.Logf("token-cmp: %.1f tok per lookup (%.0f%% fewer); decided at char 1: %.1f%%, within 2: %.1f%%",
		float64(tc.c.Total(OpTok))/nq, 100*(1-float64(tc.c.Total(OpTok))/float64(base.c.Total(OpTok))),
		100*float64(base.s.DecidedAt1)/float64(base.s.Comparisons), 100*float64(base.s.DecidedWithin2)/float64(base.s.Comparisons))
}

func TestDynamic32FallbackAndRelease(t *testing.T) {
	tab := synthTables(t)
	f := &sim.Faults{}
	f.Set(FaultDynamic32Alloc, 1) // only the first allocation fails
	c, err := NewCompressed(tab, Dynamic32Variant, CompressedOptions{Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCompressed(tab, Baseline, CompressedOptions{})
	name := tab.Syms[tab.NumSyms/2+77].Name
	cb, cd := sim.NewCounters(false), sim.NewCounters(false)
	wa, _ := b.LookupName(cb, name)
	ga, _ := c.LookupName(cd, name)
	if ga != wa || cd.Total(OpHop) != cb.Total(OpHop) {
		t.Fatalf("failed allocation: %#x/%d hops, baseline %#x/%d", ga, cd.Total(OpHop), wa, cb.Total(OpHop))
	}
	if ok, _ := c.DynamicBuilt(); ok {
		t.Fatal("table present after a failed allocation")
	}
	c.Release() // next batch retries and succeeds
	cd = sim.NewCounters(false)
	ga, _ = c.LookupName(cd, name)
	ok, builds := c.DynamicBuilt()
	if !ok || builds != 1 || ga != wa || cd.Total(OpHop) != uint64(tab.NumSyms) {
		t.Fatalf("lazy build: present %v builds %d, %d hops (want N=%d, the build pass)", ok, builds, cd.Total(OpHop), tab.NumSyms)
	}
	if m := c.Memory(); m.Heap != 4*int64(tab.NumSyms) {
		t.Fatalf("heap %d", m.Heap)
	}
	c.Release()
	if m := c.Memory(); m.Heap != 0 || m.HeapPeak != 4*int64(tab.NumSyms) {
		t.Fatalf("after Release: %+v", m)
	}
}

func TestNamesBlobOver24Bits(t *testing.T) {
	// 1100 records of 0x3FFF token bytes each (2-byte headers): > 16 MiB.
	const n, l = 1100, 0x3FFF
	tab := &ktab.Tables{NumSyms: n, BaseRelative: true, AllSymbols: true}
	for i := range 256 {
		tab.TokenIndex[i] = uint16(len(tab.TokenTable))
		if i >= 'A' && i <= 'z' {
			tab.TokenTable = append(tab.TokenTable, byte(i))
		}
		tab.TokenTable = append(tab.TokenTable, 0)
	}
	for i := range n {
		if i&0xFF == 0 {
			tab.Markers = append(tab.Markers, uint32(len(tab.Names)))
		}
		tab.Names = append(tab.Names, l&0x7F|0x80, l>>7)
		tab.Names = append(tab.Names, 'T')
		tab.Names = append(tab.Names, make([]byte, l-1)...)
		tab.Offsets = append(tab.Offsets, int32(i*16))
		tab.SeqsOfNames = append(tab.SeqsOfNames, byte(i>>16), byte(i>>8), byte(i))
	}
	for _, v := range AllVariants() {
		_, err := NewCompressed(tab, v, CompressedOptions{})
		switch v.Index {
		case IndexOffsets3, IndexStride2:
			if !errors.Is(err, ErrNamesTooLarge) {
				t.Fatalf("%s: %v, want ErrNamesTooLarge", v, err)
			}
			t.Logf("%s: %v", v, err)
		default:
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
		}
	}
}

func TestNewCompressedRejectsBadTables(t *testing.T) {
	good := synthTables(t)
	bad := *good
	bad.Markers = append([]uint32(nil), good.Markers...)
	bad.Markers[1]++
	if _, err := NewCompressed(&bad, Baseline, CompressedOptions{}); err == nil || !strings.Contains(err.Error(), "marker") {
		t.Fatalf("bad marker: %v", err)
	}
	bad = *good
	bad.Names = good.Names[:len(good.Names)-1]
	if _, err := NewCompressed(&bad, Baseline, CompressedOptions{}); err == nil {
		t.Fatal("truncated names accepted")
	}
}

func TestVariantNames(t *testing.T) {
	want := []string{"baseline", "offset-index", "token-cmp", "offset-index+token-cmp", "stride2", "dynamic32"}
	for i, v := range Variants() {
		if v.String() != want[i] {
			t.Errorf("%d: %q", i, v)
		}
	}
	for _, v := range AllVariants() {
		p, err := ParseVariant(v.String())
		if err != nil || p != v {
			t.Errorf("%s: %v %v", v, p, err)
		}
	}
	if _, err := ParseVariant("fast"); err == nil {
		t.Error("unknown name accepted")
	}
}

func TestMemoryFigures(t *testing.T) {
	tab := synthTables(t)
	n := int64(tab.NumSyms)
	markers := 4 * ((n + 255) / 256)
	for _, v := range AllVariants() {
		c, _ := NewCompressed(tab, v, CompressedOptions{})
		m := c.Memory()
		var want int64
		switch v.Index {
		case IndexOffsets3:
			want = 3*n - markers
		case IndexStride2:
			want = 3*((n+1)/2) - markers
		}
		if m.ExtraRodata != want {
			t.Errorf("%s: extra %d, want %d", v, m.ExtraRodata, want)
		}
	}
}

func TestMeasure(t *testing.T) {
	tab := synthTables(t)
	c, _ := NewCompressed(tab, OffsetIndexTokenCmp, CompressedOptions{})
	m, err := c.Measure(KindLookupName, []string{tab.Syms[5].Name, "no_such_symbol"}, nil, 10)
	if err != nil || m.NsPerCall <= 0 || m.OpsPerCall["kallsyms.ld3"] == 0 || m.OpsPerCall["kallsyms.hop"] != 0 {
		t.Fatalf("%+v %v", m, err)
	}
}
