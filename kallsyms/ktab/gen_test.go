package ktab

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
)

func TestFiltered(t *testing.T) {
	g61, g612, g73 := image.Gen61, image.Gen612, image.Gen73
	for _, c := range []struct {
		name string
		typ  byte
		gen  image.Generation
		want string
	}{
		// 6.1: the tool's own lists, the kallsyms_* objects included.
		{"kallsyms_offsets", 'D', g61, "ignored"},
		{"kallsyms_seqs_of_names", 'D', g61, "ignored"},
		{"__kcfi_typeid_f", 'A', g61, "ignored"},
		{"x_veneer", 't', g61, "ignored"},
		{"undef", 'U', g61, "ignored"},
		{"local_weak", 'w', g61, ""},
		{"__crc_foo", 'A', g61, "ignored"}, // absolute
		{"__crc_foo", 'D', g61, ""},
		{"__gp", 'A', g61, ""},
		{"text_size", 'A', g61, "ignored"},
		// 6.12: kallsyms_* kept; the name lists are scripts/mksysmap's.
		{"kallsyms_offsets", 'D', g612, ""},
		{"kallsyms_relative_base", 'D', g612, ""},
		{"undef", 'U', g612, "mksysmap"},
		{"dbg", 'N', g612, "mksysmap"},
		{"local_abs", 'a', g612, "mksysmap"},
		{"local_weak", 'w', g612, "mksysmap"},
		{"global_weak", 'W', g612, ""},
		{"text_size", 'A', g612, "ignored"},
		{"__gp", 'A', g612, ""},
		{"undef", 'u', g612, "ignored"},
		{"$x", 't', g612, "mksysmap"},
		{".Ltmp0", 't', g612, "mksysmap"},
		{"__crc_foo", 'D', g612, "mksysmap"},
		{"__kstrtab_foo", 'r', g612, "mksysmap"},
		{"__kstrtabns_foo", 'r', g612, "mksysmap"},
		{"__AArch64ADRPThunk_x", 't', g612, "mksysmap"},
		{"__Thunk_x", 't', g612, "mksysmap"},
		{"__a-Thunk_x", 't', g612, ""},
		{"__pi_$x", 't', g612, "mksysmap"},
		{"x_from_thumb", 't', g612, "mksysmap"},
		{"L0", 't', g612, "mksysmap"},
		{"L00", 't', g612, ""},
		{"a.plt_branch.b", 't', g612, "mksysmap"},
		{"__mod_device_table__pci", 'r', g612, ""},
		{"__UNIQUE_ID_modinfo_3", 'r', g612, ""},
		// 7.3 adds MODULE_DEVICE_TABLE and MODULE_INFO names.
		{"__mod_device_table__pci", 'r', g73, "mksysmap"},
		{"__UNIQUE_ID_modinfo_3", 'r', g73, "mksysmap"},
		{"__UNIQUE_ID_modinfo_", 'r', g73, "mksysmap"},
		{"__UNIQUE_ID_modinfo_3x", 'r', g73, ""},
		{"kallsyms_offsets", 'D', g73, ""},
		{"phys_startup_64", 'A', g73, "ignored"},
	} {
		if got := Filtered(c.gen, Symbol{Name: c.name, Type: c.typ}); got != c.want {
			t.Errorf("%s %c %s: %q, want %q", c.gen, c.typ, c.name, got, c.want)
		}
	}
}

func TestOptionsForGenerations(t *testing.T) {
	syms := loadFixture(t)
	for _, c := range []struct {
		opt     Options
		enc     Encoding
		wantErr string
	}{
		{OptionsFor(image.GenUnknown), EncodingBaseRelativeAbsolutePercpu, ""},
		{OptionsFor(image.Gen61), EncodingBaseRelativeAbsolutePercpu, ""},
		{OptionsFor(image.Gen612), EncodingBaseRelativeAbsolutePercpu, ""},
		{OptionsFor(image.Gen73), EncodingPCRelative, ""},
		{Options{}, EncodingAddresses, ""},
		{Options{Gen: image.Gen73, AllSymbols: true}, EncodingAbsolute32, ""},
		{Options{Gen: image.Gen61, PCRelative: true}, 0, "no --pc-relative"},
		{Options{Gen: image.Gen612}, 0, "always writes kallsyms_offsets"},
		{Options{Gen: image.Gen612, BaseRelative: true, PCRelative: true}, 0, "no --pc-relative"},
		{Options{Gen: image.Gen73, BaseRelative: true}, 0, "no --base-relative"},
		{Options{Gen: image.Gen73, AbsolutePercpu: true, PCRelative: true}, 0, "no --absolute-percpu"},
	} {
		tb, err := Build(syms, c.opt)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%+v: %v, want %q", c.opt, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.opt, err)
			continue
		}
		if tb.Encoding() != c.enc || tb.Gen != c.opt.Gen {
			t.Errorf("%+v: %s %s, want %s", c.opt, tb.Gen, tb.Encoding(), c.enc)
		}
		// Every symbol decodes to its address, in the table's encoding
		// (7.3's absolute 32-bit one truncates it).
		for i, s := range tb.Syms {
			want := s.Addr
			if c.enc == EncodingAbsolute32 {
				want = uint64(uint32(want))
			}
			if got := tb.SymAddress(i); got != want {
				t.Fatalf("%+v: symbol %d %s at %#x decodes to %#x", c.opt, i, s.Name, want, got)
			}
		}
		var names []string
		for _, o := range tb.Objects() {
			names = append(names, o.Name)
		}
		if !slices.Equal(names, ObjectOrder(c.opt.Gen, c.enc)) {
			t.Errorf("%+v: objects %v, order %v", c.opt, names, ObjectOrder(c.opt.Gen, c.enc))
		}
	}
}

func TestObjectOrders(t *testing.T) {
	for _, c := range []struct {
		gen   image.Generation
		enc   Encoding
		align int
		want  string
	}{
		{image.Gen61, EncodingBaseRelativeAbsolutePercpu, 8, "offsets relative_base num_syms names markers seqs_of_names token_table token_index"},
		{image.Gen61, EncodingAddresses, 8, "addresses num_syms names markers seqs_of_names token_table token_index"},
		{image.Gen612, EncodingBaseRelativeAbsolutePercpu, 8, "num_syms names markers token_table token_index offsets relative_base seqs_of_names"},
		{image.Gen73, EncodingPCRelative, 4, "num_syms names markers token_table token_index offsets seqs_of_names"},
	} {
		got := strings.ReplaceAll(strings.Join(ObjectOrder(c.gen, c.enc), " "), "kallsyms_", "")
		if got != c.want || LabelAlign(c.gen) != c.align {
			t.Errorf("%s %s: %q aligned %d, want %q aligned %d", c.gen, c.enc, got, LabelAlign(c.gen), c.want, c.align)
		}
	}
}

// Hand-made tables: kallsyms_sym_address of each encoding.
func TestSymAddressEncodings(t *testing.T) {
	for _, c := range []struct {
		t    Tables
		want []uint64
	}{
		{Tables{Addresses: []uint64{0x10, 0xffffffff81000000}}, []uint64{0x10, 0xffffffff81000000}},
		{Tables{BaseRelative: true, RelativeBase: 0x1000, Offsets: []int32{0, 0x10, -1}},
			[]uint64{0x1000, 0x1010, 0x100000fff}},
		{Tables{BaseRelative: true, AbsolutePercpu: true, RelativeBase: 0xffffffff81000000, Offsets: []int32{0x1000, -1, -0x11}},
			[]uint64{0x1000, 0xffffffff81000000, 0xffffffff81000010}},
		{Tables{Gen: image.Gen612, BaseRelative: true, AbsolutePercpu: true, RelativeBase: 0xffffffff81000000, Offsets: []int32{0x1000, -1}},
			[]uint64{0x1000, 0xffffffff81000000}},
		{Tables{Gen: image.Gen73, PCRelative: true, OffsetsAddr: 0xffffffff828c5420, Offsets: []int32{-0x18c5420, -0x18c5424 + 0x10}},
			[]uint64{0xffffffff81000000, 0xffffffff81000010}},
		{Tables{Gen: image.Gen73, Offsets: []int32{-0x7f000000}}, []uint64{0x81000000}},
	} {
		for i, w := range c.want {
			if got := c.t.SymAddress(i); got != w {
				t.Errorf("%s %s entry %d: %#x, want %#x", c.t.Gen, c.t.Encoding(), i, got, w)
			}
		}
	}
}

// 6.12 and 7.3: an empty table is no failure; __start_/__stop_ are kept
// outside the text ranges without --all-symbols; a non-ASCII type is the
// parser's "line format error".
func TestGenerationBuildRules(t *testing.T) {
	if _, err := Build([]Symbol{{Addr: 1, Type: 'U', Name: "x"}}, OptionsFor(image.Gen61)); err == nil {
		t.Error("6.1: empty table built")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		o := OptionsFor(g)
		tb, err := Build([]Symbol{{Addr: 1, Type: 'U', Name: "x"}}, o)
		if err != nil || tb.NumSyms != 0 || len(tb.TokenTable) != 256 {
			t.Errorf("%s: empty table: %v", g, err)
		}
		if _, err := Build([]Symbol{{Addr: 1, Type: 0xc3, Name: "x"}}, o); err == nil || !strings.Contains(err.Error(), "line format error") {
			t.Errorf("%s: non-ASCII type: %v", g, err)
		}
	}
	syms := []Symbol{
		{Addr: 0xffffffff81000000, Type: 'T', Name: "_text"},
		{Addr: 0xffffffff81000000, Type: 'T', Name: "_stext"},
		{Addr: 0xffffffff81000100, Type: 'T', Name: "f"},
		{Addr: 0xffffffff81001000, Type: 'T', Name: "_etext"},
		{Addr: 0xffffffff81002000, Type: 'D', Name: "__start_sec"},
		{Addr: 0xffffffff81002000, Type: 'D', Name: "data"},
		{Addr: 0xffffffff81002100, Type: 'D', Name: "__stop_sec"},
	}
	for _, c := range []struct {
		opt  Options
		want int
	}{
		{Options{BaseRelative: true}, 4},
		{Options{Gen: image.Gen612, BaseRelative: true}, 6},
		{Options{Gen: image.Gen73, PCRelative: true}, 6},
	} {
		tb, err := Build(syms, c.opt)
		if err != nil || tb.NumSyms != c.want {
			t.Errorf("%s: %v, %d symbols, want %d", c.opt.Gen, err, tb.NumSyms, c.want)
		}
	}
	// 7.3: kallsyms_offsets entries are relative to the input's
	// kallsyms_offsets symbol.
	in := append(slices.Clone(syms), Symbol{Addr: 0xffffffff82000000, Type: 'D', Name: "kallsyms_offsets"})
	tb, err := Build(in, OptionsFor(image.Gen73))
	if err != nil || tb.OffsetsAddr != 0xffffffff82000000 || tb.Offsets[0] != -0x1000000 {
		t.Errorf("7.3 offsets: %v, at %#x, first %#x", err, tb.OffsetsAddr, tb.Offsets[0])
	}
	in = append(slices.Clone(syms), Symbol{Addr: 1 << 32, Type: 'A', Name: "kallsyms_offsets"}) // absolute: not in the table
	if _, err := Build(in, OptionsFor(image.Gen73)); err == nil || !strings.Contains(err.Error(), "R_X86_64_PC32") {
		t.Errorf("7.3 offsets out of reach: %v", err)
	}
}

func TestEncodeTablesGenerations(t *testing.T) {
	syms := loadFixture(t)
	for _, g := range image.Generations {
		tb, err := Build(syms, OptionsFor(g))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTables(EncodeTables(tb))
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		if !reflect.DeepEqual(got, tb) {
			t.Fatalf("%s: decoded tables differ", g)
		}
	}
}
