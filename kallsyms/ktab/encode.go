package ktab

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/image"
)

// The binary form of Tables, for the cache of kallsyms tables (package
// image/cache keeps the files): building the tables (the token-table
// optimisation) is most of an image's set-up, reading them back is a
// copy. Hand-rolled and flat, as image.EncodeKernel, for the same reason:
// ~10^5 symbols decode at memory speed, with one allocation for all their
// names.
const tablesFormat = 2 // 2: Gen, PCRelative, OffsetsAddr

const tablesMagic = "KPSIMT"

// EncodeTables returns the binary form of t.
func EncodeTables(t *Tables) []byte {
	var names []byte
	var ends []uint32
	var b []byte
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	str := func(s string) {
		names = append(names, s...)
		ends = append(ends, uint32(len(names)))
	}
	blob := func(p []byte) {
		if p == nil {
			u(0)
			return
		}
		u(uint64(len(p)) + 1)
		b = append(b, p...)
	}
	u(uint64(t.NumSyms))
	blob(t.Names)
	nilLen := func(isNil bool, n int) {
		if isNil {
			u(0)
		} else {
			u(uint64(n) + 1)
		}
	}
	nilLen(t.Markers == nil, len(t.Markers))
	for _, m := range t.Markers {
		b = binary.LittleEndian.AppendUint32(b, m)
	}
	blob(t.SeqsOfNames)
	blob(t.TokenTable)
	for _, x := range t.TokenIndex {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	nilLen(t.Offsets == nil, len(t.Offsets))
	for _, o := range t.Offsets {
		b = binary.LittleEndian.AppendUint32(b, uint32(o))
	}
	b = binary.LittleEndian.AppendUint64(b, t.RelativeBase)
	b = binary.LittleEndian.AppendUint64(b, t.Text)
	b = binary.LittleEndian.AppendUint64(b, t.OffsetsAddr)
	nilLen(t.Addresses == nil, len(t.Addresses))
	for _, a := range t.Addresses {
		b = binary.LittleEndian.AppendUint64(b, a)
	}
	b = append(b, flags(t.BaseRelative, t.AbsolutePercpu, t.AllSymbols, t.PCRelative), byte(t.Gen))
	for _, l := range [][]Symbol{t.Syms, t.ModSyms} {
		nilLen(l == nil, len(l))
		for _, s := range l {
			b = binary.LittleEndian.AppendUint64(b, s.Addr)
			b = append(b, s.Type)
			str(s.Name)
			str(s.Module)
		}
	}
	nilLen(t.Warnings == nil, len(t.Warnings))
	for _, w := range t.Warnings {
		str(w)
	}
	out := make([]byte, 0, len(tablesMagic)+16+len(names)+4*len(ends)+len(b))
	out = append(out, tablesMagic...)
	out = binary.LittleEndian.AppendUint32(out, tablesFormat)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(ends)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(names)))
	out = append(out, names...)
	for _, e := range ends {
		out = binary.LittleEndian.AppendUint32(out, e)
	}
	return append(out, b...)
}

func flags(v ...bool) byte {
	var f byte
	for i, x := range v {
		if x {
			f |= 1 << i
		}
	}
	return f
}

var errTables = errors.New("encoded kallsyms tables: truncated or corrupt")

// DecodeTables rebuilds Tables from EncodeTables's output. The byte
// tables alias b, which the caller must not change afterwards.
func DecodeTables(b []byte) (t *Tables, err error) {
	if len(b) < len(tablesMagic)+16 || string(b[:len(tablesMagic)]) != tablesMagic {
		return nil, errors.New("not encoded kallsyms tables")
	}
	b = b[len(tablesMagic):]
	if v := binary.LittleEndian.Uint32(b); v != tablesFormat {
		return nil, fmt.Errorf("encoded kallsyms tables format %d, want %d", v, tablesFormat)
	}
	nstr, slen := uint64(binary.LittleEndian.Uint32(b[4:])), binary.LittleEndian.Uint64(b[8:])
	b = b[16:]
	if slen > uint64(len(b)) || nstr*4 > uint64(len(b))-slen {
		return nil, errTables
	}
	all := string(b[:slen])
	ends := b[slen : slen+nstr*4]
	b = b[slen+nstr*4:]
	next, prev := 0, uint32(0)
	str := func() string {
		if next >= int(nstr) {
			panic(errTables)
		}
		e := binary.LittleEndian.Uint32(ends[4*next:])
		if e < prev || uint64(e) > slen {
			panic(errTables)
		}
		s := all[prev:e]
		next, prev = next+1, e
		return s
	}
	defer func() {
		if r := recover(); r != nil {
			if r == errTables {
				t, err = nil, errTables
				return
			}
			panic(r)
		}
	}()
	need := func(n uint64) {
		if n > uint64(len(b)) {
			panic(errTables)
		}
	}
	u := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			panic(errTables)
		}
		b = b[n:]
		return v
	}
	// count reads a nil-or-length of elements of size bytes each (-1: nil).
	count := func(size uint64) int {
		v := u()
		if v == 0 {
			return -1
		}
		n := v - 1
		if size > 0 && (n > uint64(len(b)) || n*size > uint64(len(b))) {
			panic(errTables)
		}
		return int(n)
	}
	blob := func() []byte {
		n := count(1)
		if n < 0 {
			return nil
		}
		p := b[:n:n]
		b = b[n:]
		return p
	}
	t = &Tables{}
	t.NumSyms = int(u())
	t.Names = blob()
	if n := count(4); n >= 0 {
		t.Markers = make([]uint32, n)
		for i := range t.Markers {
			t.Markers[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		b = b[4*n:]
	}
	t.SeqsOfNames = blob()
	t.TokenTable = blob()
	need(512)
	for i := range t.TokenIndex {
		t.TokenIndex[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	b = b[512:]
	if n := count(4); n >= 0 {
		t.Offsets = make([]int32, n)
		for i := range t.Offsets {
			t.Offsets[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		b = b[4*n:]
	}
	need(24)
	t.RelativeBase, t.Text, t.OffsetsAddr = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	b = b[24:]
	if n := count(8); n >= 0 {
		t.Addresses = make([]uint64, n)
		for i := range t.Addresses {
			t.Addresses[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		b = b[8*n:]
	}
	need(2)
	f := b[0]
	if f >= 16 {
		return nil, errTables
	}
	t.Gen = image.Generation(b[1])
	if t.Gen > image.Gen73 {
		return nil, errTables
	}
	b = b[2:]
	t.BaseRelative, t.AbsolutePercpu, t.AllSymbols, t.PCRelative = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
	for _, l := range []*[]Symbol{&t.Syms, &t.ModSyms} {
		n := count(9)
		if n < 0 {
			continue
		}
		*l = make([]Symbol, n)
		for i := range *l {
			s := &(*l)[i]
			s.Addr, s.Type = binary.LittleEndian.Uint64(b[9*i:]), b[9*i+8]
			s.Name, s.Module = str(), str()
		}
		b = b[9*n:]
	}
	if n := count(0); n >= 0 {
		if uint64(n) > nstr {
			return nil, errTables
		}
		t.Warnings = make([]string, n)
		for i := range t.Warnings {
			t.Warnings[i] = str()
		}
	}
	if len(b) != 0 || next != int(nstr) {
		return nil, errTables
	}
	return t, nil
}
