package ktab

import (
	"reflect"
	"testing"
)

// TestEncodeTablesRoundTrip: the decoded tables are deep-equal to the
// built ones, for every option set (kallsyms_offsets or _addresses,
// per-cpu, module symbols, warnings).
func TestEncodeTablesRoundTrip(t *testing.T) {
	syms := loadFixture(t)
	syms = append(syms, Symbol{Addr: 0xffffffffc0000000, Type: 't', Name: "mod_fn", Module: "mod"})
	for _, o := range []Options{
		{BaseRelative: true, AbsolutePercpu: true, AllSymbols: true},
		{BaseRelative: true},
		{},
	} {
		tb, err := Build(syms, o)
		if err != nil {
			t.Fatal(err)
		}
		tb.Warnings = append(tb.Warnings, "a warning")
		got, err := DecodeTables(EncodeTables(tb))
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !reflect.DeepEqual(got, tb) {
			t.Fatalf("%+v: decoded tables differ", o)
		}
	}
}

// FuzzDecodeTables: corrupt or truncated input is an error, never a panic.
func FuzzDecodeTables(f *testing.F) {
	tb, err := Build(loadFixture(f)[:60], Options{BaseRelative: true, AbsolutePercpu: true})
	if err != nil {
		f.Fatal(err)
	}
	b := EncodeTables(tb)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := DecodeTables(b); err == nil {
			if !reflect.DeepEqual(EncodeTables(got), b) {
				t.Fatal("decoded tables do not encode back to the input")
			}
		}
	})
}

func BenchmarkBuildFixture(b *testing.B) {
	syms := loadFixture(b)
	for i := 0; i < b.N; i++ {
		if _, err := Build(syms, Options{BaseRelative: true, AbsolutePercpu: true, AllSymbols: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTablesFixture(b *testing.B) {
	tb, err := Build(loadFixture(b), Options{BaseRelative: true, AbsolutePercpu: true, AllSymbols: true})
	if err != nil {
		b.Fatal(err)
	}
	enc := EncodeTables(tb)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeTables(enc); err != nil {
			b.Fatal(err)
		}
	}
}
