package ktab

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// Object is one object of the generated assembler file: its label and its
// exact bytes on a little-endian 64-bit kernel, without alignment padding.
type Object struct {
	Name string
	Data []byte
}

// Objects returns the objects the generation's write_src emits, in its
// order (ObjectOrder): 6.1 kallsyms_offsets (s32 LE each) or
// kallsyms_addresses (u64 LE each), kallsyms_relative_base (u64 LE,
// base-relative only), kallsyms_num_syms (u32 LE), kallsyms_names,
// kallsyms_markers (u32 LE each), kallsyms_seqs_of_names (3 bytes each,
// MSB first), kallsyms_token_table (256 NUL-terminated strings),
// kallsyms_token_index (u16 LE each); 6.12 num_syms, names, markers,
// token_table, token_index, offsets, relative_base, seqs_of_names; 7.3
// the same without relative_base. The addresses are the link-time values
// (the tool writes them as _text ± off; 7.3's PC-relative entries as
// resolved by the linker, see Tables.OffsetsAddr).
//
// Models scripts/kallsyms.c:write_src (6.1, 6.12, 7.3).
func (t *Tables) Objects() []Object {
	enc := t.Encoding()
	order := toolOf(t.Gen).order(enc)
	objs := make([]Object, 0, len(order))
	for _, name := range order {
		var data []byte
		switch name {
		case ObjOffsets:
			if enc == EncodingAddresses {
				name = ObjAddresses
			}
			data = t.OffsetsBytes()
		case ObjAddresses:
			data = t.OffsetsBytes()
		case ObjRelativeBase:
			data = binary.LittleEndian.AppendUint64(nil, t.RelativeBase)
		case ObjNumSyms:
			data = binary.LittleEndian.AppendUint32(nil, uint32(t.NumSyms))
		case ObjNames:
			data = t.Names
		case ObjMarkers:
			data = t.MarkersBytes()
		case ObjSeqsOfNames:
			data = t.SeqsOfNames
		case ObjTokenTable:
			data = t.TokenTable
		case ObjTokenIndex:
			data = t.TokenIndexBytes()
		}
		objs = append(objs, Object{name, data})
	}
	return objs
}

// OffsetsBytes is kallsyms_offsets as laid out (s32 LE each), or
// kallsyms_addresses (u64 LE each) in EncodingAddresses.
func (t *Tables) OffsetsBytes() []byte {
	if t.Encoding() == EncodingAddresses {
		b := make([]byte, 0, 8*len(t.Addresses))
		for _, a := range t.Addresses {
			b = binary.LittleEndian.AppendUint64(b, a)
		}
		return b
	}
	b := make([]byte, 0, 4*len(t.Offsets))
	for _, o := range t.Offsets {
		b = binary.LittleEndian.AppendUint32(b, uint32(o))
	}
	return b
}

// MarkersBytes is kallsyms_markers as laid out (u32 LE each).
func (t *Tables) MarkersBytes() []byte {
	b := make([]byte, 0, 4*len(t.Markers))
	for _, m := range t.Markers {
		b = binary.LittleEndian.AppendUint32(b, m)
	}
	return b
}

// TokenIndexBytes is kallsyms_token_index as laid out (u16 LE each).
func (t *Tables) TokenIndexBytes() []byte {
	b := make([]byte, 0, 512)
	for _, x := range t.TokenIndex {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

// TokenStrings returns the expansion of every token byte 0..255 (the
// string at kallsyms_token_table + kallsyms_token_index[b]); unused slots
// are "".
func (t *Tables) TokenStrings() [256]string {
	var out [256]string
	for i, off := range t.TokenIndex {
		if int(off) >= len(t.TokenTable) {
			continue
		}
		s := t.TokenTable[off:]
		if j := indexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		out[i] = string(s)
	}
	return out
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// FormatToken escapes a token (or any byte string) for display: bytes
// 0x21..0x7e other than '\' as themselves, every other byte (space and
// '\' included) as \xNN with lower-case hex.
func FormatToken(s string) string {
	var sb strings.Builder
	const hexd = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x21 && c <= 0x7e && c != '\\' {
			sb.WriteByte(c)
			continue
		}
		sb.WriteString(`\x`)
		sb.WriteByte(hexd[c>>4])
		sb.WriteByte(hexd[c&0xf])
	}
	return sb.String()
}

// Stats summarises a table for `kpsim kallsyms dump`. Lengths are in
// bytes unless named a count; hashes are hex SHA-256 of the exact bytes
// as laid out by the kernel, without alignment padding (see Objects).
type Stats struct {
	NumSyms       int // kallsyms_num_syms
	NamesLen      int // bytes of kallsyms_names (headers included)
	MarkersCount  int // entries of kallsyms_markers
	SeqsLen       int // bytes of kallsyms_seqs_of_names (3·N)
	OffsetsLen    int // bytes of kallsyms_offsets (4·N) or kallsyms_addresses (8·N)
	TokenTableLen int // bytes of kallsyms_token_table, NULs included
	// AvgRecordLen is the mean compressed record length in token bytes,
	// headers excluded.
	AvgRecordLen float64
	// TwoByteHeaders counts records with a 2-byte length header.
	TwoByteHeaders int

	NamesSHA256      string
	MarkersSHA256    string
	SeqsSHA256       string
	OffsetsSHA256    string // s32 LE each, or u64 LE kallsyms_addresses
	TokenTableSHA256 string
	TokenIndexSHA256 string

	// Memory of the extra tables of the patches, in bytes.
	NamesOffsetsLen int // kallsyms_names_offsets (J2): 3·N
	Stride2Len      int // stride-2 index: 3·ceil(N/2)
	Offsets32Len    int // run-time u32 table: 4·N
	Offsets32S2Len  int // run-time u32 table, stride 2: 4·ceil(N/2)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Stats computes the summary of t.
func (t *Tables) Stats() Stats {
	n := t.NumSyms
	s := Stats{
		NumSyms:          n,
		NamesLen:         len(t.Names),
		MarkersCount:     len(t.Markers),
		SeqsLen:          len(t.SeqsOfNames),
		TokenTableLen:    len(t.TokenTable),
		NamesSHA256:      sum(t.Names),
		MarkersSHA256:    sum(t.MarkersBytes()),
		SeqsSHA256:       sum(t.SeqsOfNames),
		TokenTableSHA256: sum(t.TokenTable),
		TokenIndexSHA256: sum(t.TokenIndexBytes()),
		NamesOffsetsLen:  3 * n,
		Stride2Len:       3 * ((n + 1) / 2),
		Offsets32Len:     4 * n,
		Offsets32S2Len:   4 * ((n + 1) / 2),
	}
	ob := t.OffsetsBytes()
	s.OffsetsLen = len(ob)
	s.OffsetsSHA256 = sum(ob)
	hdr := 0
	for off := 0; off < len(t.Names); {
		l := int(t.Names[off])
		h := 1
		if l&0x80 != 0 && off+1 < len(t.Names) {
			l = l&0x7f | int(t.Names[off+1])<<7
			h = 2
			s.TwoByteHeaders++
		}
		hdr += h
		off += h + l
	}
	if n > 0 {
		s.AvgRecordLen = float64(len(t.Names)-hdr) / float64(n)
	}
	return s
}
