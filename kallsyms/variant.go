package kallsyms

import (
	"fmt"
	"strings"
)

// OffsetIndex says how a variant finds record i in kallsyms_names
// (get_symbol_offset).
type OffsetIndex uint8

const (
	// IndexMarkers is upstream: kallsyms_markers[i>>8], then (i & 0xFF)
	// header hops.
	IndexMarkers OffsetIndex = iota
	// IndexOffsets3 is the proposed kallsyms_names_offsets (Jim's patch 2):
	// 3 bytes per record, most significant first; one ld3, no hops; the
	// markers are dropped.
	IndexOffsets3
	// IndexStride2 is D. Laight's half table: 3 bytes for every even record;
	// an odd record is one hop from the even record before it.
	IndexStride2
	// IndexDynamic32 is Jim's reply to Kees Cook: a u32 offset table built
	// at run time by one sequential pass, freed later; the markers stay as
	// the fallback when the table is absent or its allocation failed.
	IndexDynamic32
)

// Variant is one kallsyms lookup variant: an offset index and a name
// comparison. The zero Variant is the baseline.
type Variant struct {
	Index OffsetIndex
	// TokenCmp selects the on-the-fly compressed compare (Jim's patch 3,
	// kallsyms_strcmp_symbol) instead of kallsyms_expand_symbol + strcmp.
	TokenCmp bool
}

// The variants by their names.
var (
	Baseline            = Variant{}
	OffsetIndexVariant  = Variant{Index: IndexOffsets3}
	TokenCmpVariant     = Variant{TokenCmp: true}
	OffsetIndexTokenCmp = Variant{Index: IndexOffsets3, TokenCmp: true}
	Stride2Variant      = Variant{Index: IndexStride2}
	Dynamic32Variant    = Variant{Index: IndexDynamic32}
)

var indexNames = [...]string{
	IndexMarkers:   "",
	IndexOffsets3:  "offset-index",
	IndexStride2:   "stride2",
	IndexDynamic32: "dynamic32",
}

// String returns the variant's name: "baseline", "offset-index",
// "token-cmp", "offset-index+token-cmp", "stride2", "dynamic32", and the
// combinations "stride2+token-cmp", "dynamic32+token-cmp".
func (v Variant) String() string {
	if int(v.Index) >= len(indexNames) {
		return fmt.Sprintf("Variant(%d,%v)", v.Index, v.TokenCmp)
	}
	idx := indexNames[v.Index]
	switch {
	case idx == "" && !v.TokenCmp:
		return "baseline"
	case idx == "":
		return "token-cmp"
	case v.TokenCmp:
		return idx + "+token-cmp"
	}
	return idx
}

// ParseVariant parses a name as String renders it.
func ParseVariant(s string) (Variant, error) {
	for _, v := range AllVariants() {
		if v.String() == strings.TrimSpace(s) {
			return v, nil
		}
	}
	var known []string
	for _, v := range AllVariants() {
		known = append(known, v.String())
	}
	return Variant{}, fmt.Errorf("unknown kallsyms variant %q (known: %s)", s, strings.Join(known, ", "))
}

// Variants lists the six variants of the study, in series order.
func Variants() []Variant {
	return []Variant{Baseline, OffsetIndexVariant, TokenCmpVariant, OffsetIndexTokenCmp, Stride2Variant, Dynamic32Variant}
}

// AllVariants is Variants plus stride2 and dynamic32 with the token compare.
func AllVariants() []Variant {
	return append(Variants(), Variant{Index: IndexStride2, TokenCmp: true}, Variant{Index: IndexDynamic32, TokenCmp: true})
}
