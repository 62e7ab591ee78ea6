package elfload

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

// optionsFor are the scripts/kallsyms flags of generation g that make
// encoding e, with --all-symbols.
func optionsFor(g image.Generation, e ktab.Encoding) ktab.Options {
	o := ktab.Options{Gen: g, AllSymbols: true}
	switch e {
	case ktab.EncodingBaseRelative:
		o.BaseRelative = true
	case ktab.EncodingBaseRelativeAbsolutePercpu:
		o.BaseRelative, o.AbsolutePercpu = true, true
	case ktab.EncodingPCRelative:
		o.PCRelative = true
	}
	return o
}

// layOut writes t's objects into a .rodata image loaded at base, after
// prefix bytes of junk, each label aligned as the generation's write_src
// aligns it, the way the linker would place them; PC-relative entries are
// resolved for where kallsyms_offsets lands (t.Offsets and t.OffsetsAddr
// are updated to match). It returns the image and each object's offset.
func layOut(t *ktab.Tables, base uint64, prefix int) ([]byte, map[string]int) {
	ro := make([]byte, prefix)
	for i := range ro {
		ro[i] = byte(i*37 + 11)
	}
	al := ktab.LabelAlign(t.Gen)
	pos := map[string]int{}
	for _, o := range t.Objects() {
		for (base+uint64(len(ro)))%uint64(al) != 0 {
			ro = append(ro, 0)
		}
		pos[o.Name] = len(ro)
		if o.Name == ktab.ObjOffsets && t.Encoding() == ktab.EncodingPCRelative {
			t.OffsetsAddr = base + uint64(len(ro))
			for i := range t.Offsets {
				t.Offsets[i] = int32(int64(t.Syms[i].Addr - (t.OffsetsAddr + 4*uint64(i))))
			}
			o.Data = t.OffsetsBytes()
		}
		ro = append(ro, o.Data...)
	}
	return append(ro, 0xde, 0xad, 0xbe, 0xef), pos
}

// sameTables compares what the reader can know of two tables.
func sameTables(tb testing.TB, what string, got, want *ktab.Tables) {
	tb.Helper()
	eq := func(field string, ok bool) {
		if !ok {
			tb.Errorf("%s: %s differs", what, field)
		}
	}
	eq("Gen", got.Gen.Effective() == want.Gen.Effective())
	eq("Encoding", got.Encoding() == want.Encoding())
	eq("kallsyms_num_syms", got.NumSyms == want.NumSyms)
	eq("kallsyms_names", bytes.Equal(got.Names, want.Names))
	eq("kallsyms_markers", slices.Equal(got.Markers, want.Markers))
	eq("kallsyms_seqs_of_names", bytes.Equal(got.SeqsOfNames, want.SeqsOfNames))
	eq("kallsyms_token_table", bytes.Equal(got.TokenTable, want.TokenTable))
	eq("kallsyms_token_index", got.TokenIndex == want.TokenIndex)
	eq("kallsyms_offsets", slices.Equal(got.Offsets, want.Offsets))
	eq("kallsyms_addresses", slices.Equal(got.Addresses, want.Addresses))
	eq("kallsyms_relative_base", got.RelativeBase == want.RelativeBase)
	eq("OffsetsAddr", got.OffsetsAddr == want.OffsetsAddr)
	eq("Text", got.Text == want.Text)
	eq("symbols", slices.Equal(got.Syms, want.Syms))
}

// fixtureSymbols reads ktab's fixture map, less its lines ParseSymbols
// refuses (a name of KSYM_NAME_LEN bytes).
func fixtureSymbols(tb testing.TB) []ktab.Symbol {
	b, err := os.ReadFile("../../kallsyms/ktab/testdata/fixture.map")
	if err != nil {
		tb.Skip(err)
	}
	var out []ktab.Symbol
	for _, line := range bytes.Split(b, []byte("\n")) {
		if s, err := ktab.ParseSymbols("fixture.map", bytes.NewReader(line)); err == nil {
			out = append(out, s...)
		}
	}
	return out
}

const synthRodata = 0xffffffff82000000

// synthTables builds the fixture's tables for generation g and encoding e.
func synthTables(tb testing.TB, g image.Generation, e ktab.Encoding) *ktab.Tables {
	syms := fixtureSymbols(tb)
	if e == ktab.EncodingBaseRelative {
		// Per-cpu symbols at 0 would put relative_base at 0.
		syms = slices.DeleteFunc(syms, func(s ktab.Symbol) bool { return s.Addr < 1<<32 })
	}
	t, err := ktab.Build(syms, optionsFor(g, e))
	if err != nil {
		tb.Fatalf("%s %s: %v", g, e, err)
	}
	return t
}

// synthEncodings are the encodings of each generation a 64-bit kernel
// can have (not 7.3's absolute 32-bit one).
func synthEncodings(g image.Generation) []ktab.Encoding {
	return slices.DeleteFunc(ktab.Encodings(g), func(e ktab.Encoding) bool { return e == ktab.EncodingAbsolute32 })
}

// TestKallsymsLayouts: the reader finds every generation's layout, in
// every encoding its tool writes for a 64-bit kernel, wherever it lies,
// and decodes the tables the builder made.
func TestKallsymsLayouts(t *testing.T) {
	for _, g := range image.Generations {
		for _, e := range synthEncodings(g) {
			want := synthTables(t, g, e)
			what := g.String() + " " + e.String()
			for _, prefix := range []int{0, 4, 8, 1000, 1004} {
				ro, pos := layOut(want, synthRodata, prefix)
				got, lay, err := findKallsyms(ro, synthRodata, 0xffffffff81000000)
				if err != nil {
					t.Fatalf("%s, prefix %d: %v", what, prefix, err)
				}
				sameTables(t, what, got, want)
				if lay.Gen != g || lay.Encoding != e || lay.NumSyms != pos[ktab.ObjNumSyms] || lay.TokenIdx != pos[ktab.ObjTokenIndex] {
					t.Errorf("%s: layout %+v, objects at %v", what, lay, pos)
				}
			}
		}
	}
}

// FuzzKallsymsLayouts feeds the structure search every generation's
// layout, mutated: it must not panic, and tables it accepts must be
// consistent and lie in .rodata exactly as their generation's write_src
// lays them out.
func FuzzKallsymsLayouts(f *testing.F) {
	for _, g := range image.Generations {
		for _, e := range synthEncodings(g) {
			ro, _ := layOut(synthTables(f, g, e), synthRodata, 12)
			f.Add(ro)
		}
	}
	f.Fuzz(func(t *testing.T, ro []byte) {
		tab, lay, err := findKallsyms(ro, synthRodata, 0xffffffff81000000)
		if err != nil {
			return
		}
		if tab.NumSyms != len(tab.Syms) || len(tab.SeqsOfNames) != 3*tab.NumSyms || tab.Gen != lay.Gen || tab.Encoding() != lay.Encoding {
			t.Fatalf("inconsistent tables: %d syms, %d decoded, %s/%s", tab.NumSyms, len(tab.Syms), tab.Gen, lay.Gen)
		}
		for i := 1; i < len(tab.Syms); i++ {
			if tab.Syms[i].Addr < tab.Syms[i-1].Addr {
				t.Fatal("accepted unsorted addresses")
			}
		}
		// Laid out again at the same place, the objects are the bytes read.
		p := lay.Offsets
		if lay.Offsets > lay.NumSyms || lay.Offsets < 0 {
			p = lay.NumSyms
		}
		al := ktab.LabelAlign(tab.Gen)
		for _, o := range tab.Objects() {
			p = alignUp(p, synthRodata, al)
			if p+len(o.Data) > len(ro) || !bytes.Equal(ro[p:p+len(o.Data)], o.Data) {
				t.Fatalf("%s is not at %d as read", o.Name, p)
			}
			p += len(o.Data)
		}
		if p != lay.End {
			t.Fatalf("objects end at %d, layout at %d", p, lay.End)
		}
	})
}

// realGen is one later generation's pinned package, read once per test
// binary: the shipped bzImage's vmlinux .rodata, the -dbg System.map, the
// tables the reader finds and the ones the builder makes of the map.
type realGen struct {
	once     sync.Once
	err      error
	ro       []byte
	roAddr   uint64
	textAddr uint64
	sysmap   []ktab.Symbol
	read     *ktab.Tables
	layout   *kallsymsLayout

	buildOnce sync.Once
	buildErr  error
	built     *ktab.Tables
}

var realGens = map[image.Generation]*realGen{image.Gen612: {}, image.Gen73: {}}

// loadRealGen decompresses the shipped bzImage, reads its kallsyms tables
// and parses the -dbg System.map, once.
func loadRealGen(t *testing.T, g image.Generation) *realGen {
	t.Helper()
	pkg := realkernel.FindDbg(t, g)
	r := realGens[g]
	r.once.Do(func() {
		r.err = r.load(pkg)
	})
	if r.err != nil {
		t.Fatalf("%s: %v", g, r.err)
	}
	return r
}

func (r *realGen) load(pkg realkernel.Pkg) error {
	b, err := os.ReadFile(pkg.Vmlinuz)
	if err != nil {
		return err
	}
	vm, _, err := bzimage.Decompress(pkg.Vmlinuz, b)
	if err != nil {
		return err
	}
	f, err := elf.NewFile(bytes.NewReader(vm))
	if err != nil {
		return err
	}
	ro, text := f.Section(".rodata"), f.Section(".text")
	if ro == nil || text == nil {
		return errors.New("no .rodata or .text")
	}
	if r.ro, err = ro.Data(); err != nil {
		return err
	}
	r.roAddr, r.textAddr = ro.Addr, text.Addr
	if r.read, r.layout, err = readKallsyms(f); err != nil {
		return err
	}
	m, err := os.Open(pkg.SystemMap)
	if err != nil {
		return err
	}
	defer m.Close()
	r.sysmap, err = ktab.ParseSymbols(pkg.SystemMap, m)
	return err
}

// builtRealGen is ktab.Build of the System.map with the generation's
// flags, once.
func builtRealGen(t *testing.T, g image.Generation) (*realGen, *ktab.Tables) {
	r := loadRealGen(t, g)
	r.buildOnce.Do(func() {
		r.built, r.buildErr = ktab.Build(r.sysmap, ktab.OptionsFor(g))
	})
	if r.buildErr != nil {
		t.Fatalf("%s: %v", g, r.buildErr)
	}
	return r, r.built
}

// realExpect is what each pinned package holds: the encoding its config
// chose (6.12 CONFIG_KALLSYMS_ABSOLUTE_PERCPU=y and always base-relative;
// 7.3 --pc-relative for CONFIG_64BIT), System.map's line count and the
// symbols the build drops from it (is_ignored_symbol: absolute symbols;
// the map is already mksysmap's output).
var realExpect = map[image.Generation]struct {
	enc      ktab.Encoding
	mapLines int
	filtered []string
}{
	image.Gen612: {ktab.EncodingBaseRelativeAbsolutePercpu, 166937, []string{
		"text_size", "phys_startup_64", "init_per_cpu__fixed_percpu_data",
		"init_per_cpu__irq_stack_backing_store", "init_per_cpu__gdt_page"}},
	image.Gen73: {ktab.EncodingPCRelative, 202976, []string{
		"text_size", "phys_startup_64", "xen_elfnote_entry_value", "xen_elfnote_phys32_entry_value"}},
}

// TestRealKallsymsRead: the reader finds the 6.12 and 7.3 tables of the
// shipped bzImage where System.map puts every kallsyms_* label, in the
// encoding the config chose, and decodes System.map's symbols less the
// ones the generation's build filters.
func TestRealKallsymsRead(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			r := loadRealGen(t, g)
			exp := realExpect[g]
			tab, lay := r.read, r.layout
			t.Logf("%s: %s layout, %s; %d symbols, names %d bytes, token table %d bytes, kallsyms_offsets at %#x, candidates %d",
				g, lay.Gen, lay.Encoding, tab.NumSyms, len(tab.Names), len(tab.TokenTable), r.roAddr+uint64(lay.Offsets), lay.Candidates)
			if lay.Gen != g || tab.Gen != g || tab.Encoding() != exp.enc {
				t.Fatalf("found the %s layout, encoding %s; want %s, %s", lay.Gen, tab.Encoding(), g, exp.enc)
			}
			// Every object where System.map says.
			labels := map[string]int{
				ktab.ObjOffsets: lay.Offsets, ktab.ObjRelativeBase: lay.RelBase, ktab.ObjNumSyms: lay.NumSyms,
				ktab.ObjNames: lay.Names, ktab.ObjMarkers: lay.Markers, ktab.ObjSeqsOfNames: lay.Seqs,
				ktab.ObjTokenTable: lay.TokenTable, ktab.ObjTokenIndex: lay.TokenIdx,
			}
			inMap := map[string]uint64{}
			for _, s := range r.sysmap {
				if _, ok := labels[s.Name]; ok {
					inMap[s.Name] = s.Addr
				}
			}
			for name, off := range labels {
				a, ok := inMap[name]
				switch {
				case !ok && off >= 0:
					t.Errorf("%s found at %#x, not in System.map", name, r.roAddr+uint64(off))
				case ok && (off < 0 || a != r.roAddr+uint64(off)):
					t.Errorf("%s: System.map %#x, found at offset %d", name, a, off)
				}
			}
			if len(r.sysmap) != exp.mapLines {
				t.Errorf("System.map has %d symbols, want %d", len(r.sysmap), exp.mapLines)
			}
			// System.map less the filtered symbols, as (address, name) →
			// type; under absolute per-cpu the tool types the per-cpu
			// symbols 'A'.
			type key struct {
				addr uint64
				name string
			}
			want := map[key][]byte{} // (address, name) is not unique: __key.0, ...
			var filtered, filteredNames []string
			var pcpuStart, pcpuEnd uint64
			for _, s := range r.sysmap {
				switch s.Name {
				case "__per_cpu_start":
					pcpuStart = s.Addr
				case "__per_cpu_end":
					pcpuEnd = s.Addr
				}
			}
			for _, s := range r.sysmap {
				if why := ktab.Filtered(g, s); why != "" {
					filtered = append(filtered, s.Name+" ("+string(s.Type)+", "+why+")")
					filteredNames = append(filteredNames, s.Name)
					continue
				}
				typ := s.Type
				if tab.AbsolutePercpu && s.Addr >= pcpuStart && s.Addr <= pcpuEnd {
					typ = 'A'
				}
				want[key{s.Addr, s.Name}] = append(want[key{s.Addr, s.Name}], typ)
			}
			left := 0
			for _, v := range want {
				left += len(v)
			}
			t.Logf("System.map %d symbols, kallsyms %d: %d filtered: %v", len(r.sysmap), tab.NumSyms, len(filtered), filtered)
			if !slices.Equal(filteredNames, exp.filtered) {
				t.Errorf("filtered %v, want %v", filteredNames, exp.filtered)
			}
			if tab.NumSyms != left {
				t.Errorf("decoded %d symbols, System.map less the filtered ones has %d", tab.NumSyms, left)
			}
			bad := 0
			for i, s := range tab.Syms {
				k := key{s.Addr, s.Name}
				j := slices.Index(want[k], s.Type)
				if j < 0 {
					if bad++; bad <= 5 {
						t.Errorf("symbol %d %#x %c %s: System.map has %q", i, s.Addr, s.Type, s.Name, want[k])
					}
					continue
				}
				want[k] = slices.Delete(want[k], j, j+1)
				left--
			}
			if bad > 0 || left > 0 {
				t.Errorf("%d decoded symbols not in System.map, %d System.map symbols not decoded", bad, left)
			}
		})
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// TestRealKallsymsRebuild: ktab.Build, fed the package's own System.map
// with the generation's flags, makes every kallsyms object byte for byte
// as embedded in the shipped bzImage, at the System.map label (SHA-256 of
// each compared: 8 objects in 6.12, 7 in 7.3, which has no
// kallsyms_relative_base), and the reader decodes the same tables.
func TestRealKallsymsRebuild(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			r, b := builtRealGen(t, g)
			if len(b.Warnings) > 0 {
				t.Logf("build warnings: %v", b.Warnings)
			}
			labels := map[string]uint64{}
			for _, s := range r.sysmap {
				labels[s.Name] = s.Addr
			}
			objs := b.Objects()
			want := 8
			if g == image.Gen73 {
				want = 7
			}
			if len(objs) != want {
				t.Errorf("%d objects, want %d", len(objs), want)
			}
			equal := 0
			for _, o := range objs {
				a, ok := labels[o.Name]
				if !ok {
					t.Errorf("%s not in System.map", o.Name)
					continue
				}
				off := int(a - r.roAddr)
				if off < 0 || off+len(o.Data) > len(r.ro) {
					t.Errorf("%s at %#x outside .rodata", o.Name, a)
					continue
				}
				img := r.ro[off : off+len(o.Data)]
				hb, hi := sha(o.Data), sha(img)
				if hb == hi {
					equal++
				} else {
					t.Errorf("%s: built %d bytes sha256 %s, image sha256 %s", o.Name, len(o.Data), hb, hi)
				}
				t.Logf("%-24s %8d bytes  sha256 %s… built %s…", o.Name, len(o.Data), hi, hb)
			}
			t.Logf("%s: %d of %d objects SHA-256 equal; %d symbols built from %d System.map lines", g, equal, len(objs), b.NumSyms, len(r.sysmap))
			sameTables(t, g.String()+" rebuilt vs read", r.read, b)
		})
	}
}

// TestRealKallsymsRebuildFromDecoded: the symbols the reader decodes,
// fed back to ktab.Build with the generation's flags (per-cpu symbols,
// which absolute per-cpu typed 'A' and is_ignored_symbol would drop, with
// a data type as the tool saw them), make the same tables: what a
// simulator building the tables of a stripped image gets.
func TestRealKallsymsRebuildFromDecoded(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			r := loadRealGen(t, g)
			in := slices.Clone(r.read.Syms)
			percpu := 0
			for i := range in {
				if r.read.AbsolutePercpu && in[i].Type == 'A' {
					in[i].Type = 'D'
					percpu++
				}
			}
			got, err := ktab.Build(in, ktab.OptionsFor(g))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: rebuilt from %d decoded symbols (%d per-cpu retyped)", g, len(in), percpu)
			sameTables(t, g.String()+" rebuilt from decoded", got, r.read)
		})
	}
}
