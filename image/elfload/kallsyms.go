package elfload

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/kallsyms/ktab"
)

var le = binary.LittleEndian

// kallsymsLayout is where each 6.1 kallsyms object was found: byte
// offsets into the scanned section (.rodata) and their link addresses.
type kallsymsLayout struct {
	Base                                uint64 // address of the scanned section
	Offsets, RelBase, NumSyms, Names    int
	Markers, Seqs, TokenTable, TokenIdx int
	End                                 int // first byte after kallsyms_token_index
	Candidates                          int // u64 == _text hits examined
}

func align8(n int) int { return (n + 7) &^ 7 }

// ReadKallsyms finds and decodes the embedded kallsyms tables of a 6.1-era
// x86-64 vmlinux (CONFIG_KALLSYMS_BASE_RELATIVE and
// CONFIG_KALLSYMS_ABSOLUTE_PERCPU) in its .rodata section, the way
// scripts/kallsyms.c:write_src lays them out: kallsyms_offsets,
// kallsyms_relative_base, kallsyms_num_syms, kallsyms_names,
// kallsyms_markers, kallsyms_seqs_of_names, kallsyms_token_table,
// kallsyms_token_index, each label 8-byte aligned.
//
// The returned Tables hold the raw objects byte for byte, Syms decoded in
// kallsyms index order (per-cpu symbols as the kernel prints them: type
// 'A', absolute address), Text = the address of _text, BaseRelative and
// AbsolutePercpu set, and AllSymbols inferred (true when a symbol lies
// outside [_stext, _etext] and [_sinittext, _einittext]).
func ReadKallsyms(f *elf.File) (*ktab.Tables, error) {
	t, _, err := readKallsyms(f)
	return t, err
}

func readKallsyms(f *elf.File) (*ktab.Tables, *kallsymsLayout, error) {
	text := f.Section(".text")
	ro := f.Section(".rodata")
	if text == nil || ro == nil {
		return nil, nil, errors.New("kallsyms tables not found / layout unknown (no .text or .rodata section)")
	}
	if ro.Type == elf.SHT_NOBITS {
		return nil, nil, errors.New("kallsyms tables not found / layout unknown (.rodata has no file data)")
	}
	data, err := ro.Data()
	if err != nil {
		return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (reading .rodata: %v)", err)
	}
	return findKallsyms(data, ro.Addr, text.Addr)
}

// findKallsyms scans ro (loaded at base) at 8-byte aligned addresses for a
// u64 equal to textAddr followed by a plausible u32 symbol count, and
// accepts the first candidate whose whole layout validates.
func findKallsyms(ro []byte, base, textAddr uint64) (*ktab.Tables, *kallsymsLayout, error) {
	start := int((8 - base%8) % 8)
	cands := 0
	var firstErr error
	for p := start; p+16 <= len(ro); p += 8 {
		if le.Uint64(ro[p:]) != textAddr {
			continue
		}
		n := int(le.Uint32(ro[p+8:]))
		if n == 0 || n > p/4 || n > 1<<24 {
			continue // kallsyms_offsets (4·N bytes) must fit before it; seqs are 24-bit
		}
		cands++
		t, l, err := parseKallsymsAt(ro, base, p, n)
		if err == nil {
			l.Candidates = cands
			return t, l, nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("candidate at %#x: %v", base+uint64(p), err)
		}
	}
	if cands == 0 {
		return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (no 8-byte aligned kallsyms_relative_base = _text %#x followed by a symbol count in .rodata)", textAddr)
	}
	return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (%d candidate(s) rejected; first: %v)", cands, firstErr)
}

// parseKallsymsAt validates and decodes the tables whose
// kallsyms_relative_base is at ro[p:] and whose kallsyms_num_syms is n.
func parseKallsymsAt(ro []byte, base uint64, p, n int) (*ktab.Tables, *kallsymsLayout, error) {
	l := &kallsymsLayout{Base: base, RelBase: p, NumSyms: p + 8}
	l.Offsets = p - align8(4*n)
	if l.Offsets < 0 {
		return nil, nil, fmt.Errorf("kallsyms_offsets (%d entries) would start before .rodata", n)
	}
	relBase := le.Uint64(ro[p:])
	l.Names = align8(p + 12)

	// kallsyms_names: N records with 1- or 2-byte length headers.
	nm := (n + 255) / 256
	recMarkers := make([]uint32, 0, nm)
	recs := make([]int, n) // record start offsets (absolute in ro)
	off := l.Names
	for i := 0; i < n; i++ {
		if i%256 == 0 {
			recMarkers = append(recMarkers, uint32(off-l.Names))
		}
		if off >= len(ro) {
			return nil, nil, fmt.Errorf("kallsyms_names record %d runs past .rodata", i)
		}
		recs[i] = off
		ln, h := int(ro[off]), 1
		if ln&0x80 != 0 {
			if off+1 >= len(ro) {
				return nil, nil, fmt.Errorf("kallsyms_names record %d header runs past .rodata", i)
			}
			ln, h = ln&0x7f|int(ro[off+1])<<7, 2
			if ln < 0x80 {
				return nil, nil, fmt.Errorf("kallsyms_names record %d: non-canonical 2-byte length %d", i, ln)
			}
		}
		if ln == 0 {
			return nil, nil, fmt.Errorf("kallsyms_names record %d has length 0", i)
		}
		off += h + ln
		if off > len(ro) {
			return nil, nil, fmt.Errorf("kallsyms_names record %d runs past .rodata", i)
		}
	}
	namesEnd := off

	// kallsyms_markers: must equal every 256th record offset.
	l.Markers = align8(namesEnd)
	if l.Markers+4*nm > len(ro) {
		return nil, nil, errors.New("kallsyms_markers run past .rodata")
	}
	markers := make([]uint32, nm)
	for i := range markers {
		markers[i] = le.Uint32(ro[l.Markers+4*i:])
		if markers[i] != recMarkers[i] {
			return nil, nil, fmt.Errorf("kallsyms_markers[%d] = %d, but record %d starts at %d", i, markers[i], 256*i, recMarkers[i])
		}
	}

	// kallsyms_seqs_of_names: a permutation of 0..N-1, 3 bytes each, big-endian.
	l.Seqs = align8(l.Markers + 4*nm)
	if l.Seqs+3*n > len(ro) {
		return nil, nil, errors.New("kallsyms_seqs_of_names runs past .rodata")
	}
	seen := make([]bool, n)
	for j := 0; j < n; j++ {
		b := ro[l.Seqs+3*j:]
		s := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if s >= n || seen[s] {
			return nil, nil, fmt.Errorf("kallsyms_seqs_of_names[%d] = %d is not part of a permutation of %d symbols", j, s, n)
		}
		seen[s] = true
	}

	// kallsyms_token_table: 256 NUL-terminated strings; token_index must
	// hold their offsets.
	l.TokenTable = align8(l.Seqs + 3*n)
	var idx [256]uint16
	q := l.TokenTable
	for i := range 256 {
		if q-l.TokenTable > 0xffff {
			return nil, nil, errors.New("kallsyms_token_table longer than a u16 index can address")
		}
		idx[i] = uint16(q - l.TokenTable)
		e := q
		for e < len(ro) && ro[e] != 0 {
			e++
		}
		if e >= len(ro) {
			return nil, nil, fmt.Errorf("kallsyms_token_table string %d runs past .rodata", i)
		}
		if e == q {
			return nil, nil, fmt.Errorf("kallsyms_token_table string %d is empty", i)
		}
		q = e + 1
	}
	ttEnd := q
	l.TokenIdx = align8(ttEnd)
	if l.TokenIdx+512 > len(ro) {
		return nil, nil, errors.New("kallsyms_token_index runs past .rodata")
	}
	for i := range 256 {
		if v := le.Uint16(ro[l.TokenIdx+2*i:]); v != idx[i] {
			return nil, nil, fmt.Errorf("kallsyms_token_index[%d] = %d, but token %d starts at %d", i, v, i, idx[i])
		}
	}
	l.End = l.TokenIdx + 512

	t := &ktab.Tables{
		NumSyms:        n,
		Names:          append([]byte(nil), ro[l.Names:namesEnd]...),
		Markers:        markers,
		SeqsOfNames:    append([]byte(nil), ro[l.Seqs:l.Seqs+3*n]...),
		TokenTable:     append([]byte(nil), ro[l.TokenTable:ttEnd]...),
		TokenIndex:     idx,
		Offsets:        make([]int32, n),
		RelativeBase:   relBase,
		BaseRelative:   true,
		AbsolutePercpu: true,
		Syms:           make([]ktab.Symbol, n),
	}
	tokens := make([][]byte, 256)
	for i := range 256 {
		s := t.TokenTable[idx[i]:]
		for k := range s {
			if s[k] == 0 {
				s = s[:k]
				break
			}
		}
		tokens[i] = s
	}
	var buf []byte
	var prev uint64
	for i := 0; i < n; i++ {
		t.Offsets[i] = int32(le.Uint32(ro[l.Offsets+4*i:]))
		addr := t.SymAddress(i)
		if i > 0 && addr < prev {
			return nil, nil, fmt.Errorf("symbol %d address %#x below its predecessor %#x (kallsyms is sorted by address)", i, addr, prev)
		}
		prev = addr
		r := recs[i]
		ln, h := int(ro[r]), 1
		if ln&0x80 != 0 {
			ln, h = ln&0x7f|int(ro[r+1])<<7, 2
		}
		buf = buf[:0]
		for _, c := range ro[r+h : r+h+ln] {
			buf = append(buf, tokens[c]...)
		}
		if len(buf) < 2 {
			return nil, nil, fmt.Errorf("symbol %d expands to %q: want a type and a name", i, buf)
		}
		if buf[0] <= ' ' || buf[0] >= 0x7f {
			return nil, nil, fmt.Errorf("symbol %d has type byte %#02x", i, buf[0])
		}
		t.Syms[i] = ktab.Symbol{Addr: addr, Type: buf[0], Name: string(buf[1:])}
	}
	// _text and the text ranges, as the tool saw them.
	var stext, etext, sinit, einit uint64
	for _, s := range t.Syms {
		switch s.Name {
		case "_text":
			t.Text = s.Addr
		case "_stext":
			stext = s.Addr
		case "_etext":
			etext = s.Addr
		case "_sinittext":
			sinit = s.Addr
		case "_einittext":
			einit = s.Addr
		}
	}
	for _, s := range t.Syms {
		if !(s.Addr >= stext && s.Addr <= etext) && !(s.Addr >= sinit && s.Addr <= einit) {
			t.AllSymbols = true
			break
		}
	}
	return t, l, nil
}
