package elfload

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms/ktab"
)

var le = binary.LittleEndian

// kallsymsLayout is where each kallsyms object was found: byte offsets
// into the scanned section (.rodata; -1 for an object the layout lacks)
// and the generation and encoding whose write_src lays them out so.
type kallsymsLayout struct {
	Base                                uint64 // address of the scanned section
	Gen                                 image.Generation
	Encoding                            ktab.Encoding
	Offsets, RelBase, NumSyms, Names    int
	Markers, Seqs, TokenTable, TokenIdx int
	End                                 int // first byte after the last object
	// Candidates counts the kallsyms_num_syms candidates whose names
	// were walked (their markers looked right where a layout puts them),
	// the accepted one included.
	Candidates int
}

// kallsymsLayoutSpecs are the layouts the reader knows: every
// generation's write_src order and alignment for every encoding its tool
// can write (ktab.ObjectOrder, ktab.LabelAlign, ktab.Encodings), the
// Debian x86-64 ones first.
var kallsymsLayoutSpecs = func() []layoutSpec {
	var out []layoutSpec
	for _, g := range image.Generations {
		for _, e := range ktab.Encodings(g) {
			out = append(out, layoutSpec{gen: g, enc: e, align: ktab.LabelAlign(g), order: ktab.ObjectOrder(g, e)})
		}
	}
	return out
}()

type layoutSpec struct {
	gen   image.Generation
	enc   ktab.Encoding
	align int
	order []string
}

// ReadKallsyms finds and decodes the embedded kallsyms tables of an
// x86-64 vmlinux in its .rodata section, by their structure rather than
// by one generation's order: a kallsyms_token_index (256 increasing u16
// offsets) behind a kallsyms_token_table of 256 NUL-terminated strings,
// and a kallsyms_num_syms whose kallsyms_names records (expanded with
// those tokens) end where kallsyms_markers lists them. The other objects
// (kallsyms_offsets, kallsyms_relative_base, kallsyms_seqs_of_names) must
// then lie where one generation's scripts/kallsyms.c:write_src puts them
// (6.1: offsets, relative_base, num_syms, names, markers, seqs, token
// table, token index, 8-byte aligned; 6.12: num_syms, names, markers,
// token table, token index, offsets, relative_base, seqs, 8-byte aligned;
// 7.3: the same without relative_base, 4-byte aligned), and decode, in one
// of the encodings that generation's tool writes, to addresses in
// ascending order with the symbol _text at the address of .text.
//
// The returned Tables hold the raw objects byte for byte, Syms decoded in
// kallsyms index order (per-cpu symbols under absolute per-cpu as the
// kernel prints them: type 'A', absolute address), Text = the address of
// _text, Gen and the encoding flags (Tables.Encoding) of the layout found,
// OffsetsAddr for PC-relative tables, and AllSymbols inferred (true when a
// symbol lies outside [_stext, _etext] and [_sinittext, _einittext]).
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

// alignUp rounds the offset p of a section loaded at base up so that
// base+p is a multiple of a.
func alignUp(p int, base uint64, a int) int {
	if r := int((base + uint64(p)) % uint64(a)); r != 0 {
		return p + a - r
	}
	return p
}

func aligned(p int, base uint64, a int) bool { return (base+uint64(p))%uint64(a) == 0 }

// tokenAnchor is a kallsyms_token_table / kallsyms_token_index pair.
type tokenAnchor struct {
	table, tableEnd, index int
	idx                    [256]uint16
	tokens                 [256][]byte
}

// findTokenAnchors lists every 4-byte aligned kallsyms_token_index of ro
// (kallsyms_token_index[0] = 0, each next entry at least 2 more: a
// non-empty string and its NUL) preceded, within the label alignment, by
// the 256 non-empty NUL-terminated strings it indexes.
func findTokenAnchors(ro []byte, base uint64) []tokenAnchor {
	var out []tokenAnchor
	for p := alignUp(0, base, 4); p+512 <= len(ro); p += 4 {
		if ro[p] != 0 || ro[p+1] != 0 {
			continue
		}
		var a tokenAnchor
		ok := true
		for i := 1; i < 256; i++ {
			a.idx[i] = le.Uint16(ro[p+2*i:])
			if int(a.idx[i]) < int(a.idx[i-1])+2 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		a.index = p
		// The table ends with its last string's NUL at most 7 bytes
		// (the largest label alignment) before the index.
		for end := p; end > p-8 && end > 0; end-- {
			if ro[end-1] != 0 {
				continue
			}
			if tokenTableAt(ro, end, &a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// tokenTableAt checks that a token table ending at end (after its last
// NUL) holds the 256 strings a.idx points at, and fills a.
func tokenTableAt(ro []byte, end int, a *tokenAnchor) bool {
	// The last string runs from the NUL before it to end-1.
	k := end - 2
	for k >= 0 && ro[k] != 0 {
		k--
	}
	start := k + 1 - int(a.idx[255])
	if start < 0 || start >= end-1 {
		return false
	}
	for i := range 256 {
		s := start + int(a.idx[i])
		e := end - 1
		if i < 255 {
			e = start + int(a.idx[i+1]) - 1
		}
		if e <= s || e >= end || ro[e] != 0 {
			return false
		}
		for _, c := range ro[s:e] {
			if c == 0 {
				return false
			}
		}
		a.tokens[i] = ro[s:e]
	}
	a.table, a.tableEnd = start, end
	return true
}

// namesChain is a kallsyms_num_syms, the kallsyms_names records it counts
// and the kallsyms_markers that list them.
type namesChain struct {
	numSyms, n, names, namesEnd, markers int
	recs                                 []int // record start offsets (absolute in ro)
}

// walkNames walks n kallsyms_names records from q, each of which must
// start with a token whose expansion starts with a printable type byte,
// and end by limit; it returns the record offsets and the end.
func walkNames(ro []byte, q, n, limit int, a *tokenAnchor, recs []int) ([]int, int, error) {
	off := q
	recs = recs[:0]
	for i := 0; i < n; i++ {
		if off+1 >= limit {
			return recs, 0, fmt.Errorf("kallsyms_names record %d runs past kallsyms_markers", i)
		}
		recs = append(recs, off)
		ln, h := int(ro[off]), 1
		if ln&0x80 != 0 {
			ln, h = ln&0x7f|int(ro[off+1])<<7, 2
			if ln < 0x80 {
				return recs, 0, fmt.Errorf("kallsyms_names record %d: non-canonical 2-byte length %d", i, ln)
			}
		}
		if ln == 0 || ln > ktab.KSYM_NAME_LEN {
			return recs, 0, fmt.Errorf("kallsyms_names record %d has length %d (want 1 to KSYM_NAME_LEN)", i, ln)
		}
		if off+h+ln > limit {
			return recs, 0, fmt.Errorf("kallsyms_names record %d runs past kallsyms_markers", i)
		}
		tok := a.tokens[ro[off+h]]
		if c := tok[0]; c <= ' ' || c >= 0x7f {
			return recs, 0, fmt.Errorf("kallsyms_names record %d has type byte %#02x", i, c)
		}
		off += h + ln
	}
	return recs, off, nil
}

// chainAt checks a kallsyms_num_syms candidate at p whose kallsyms_markers
// the layout group g puts at ms: the records from the aligned offset after
// p must end, at the aligned offset, exactly there, and the markers must
// equal every 256th record offset.
func chainAt(ro []byte, base uint64, p, ms int, g *layoutGroup, a *tokenAnchor, recs []int) (*namesChain, []int, error) {
	n := int(le.Uint32(ro[p:]))
	q := alignUp(p+4, base, g.align)
	recs, end, err := walkNames(ro, q, n, ms, a, recs)
	if err != nil {
		return nil, recs, err
	}
	if alignUp(end, base, g.align) != ms {
		return nil, recs, fmt.Errorf("kallsyms_names ends at %#x, kallsyms_markers would start at %#x", base+uint64(end), base+uint64(ms))
	}
	for i := range (n + 255) / 256 {
		if v := le.Uint32(ro[ms+4*i:]); int(v) != recs[256*i]-q {
			return nil, recs, fmt.Errorf("kallsyms_markers[%d] = %d, but record %d starts at %d", i, v, 256*i, recs[256*i]-q)
		}
	}
	return &namesChain{numSyms: p, n: n, names: q, namesEnd: end, markers: ms, recs: recs}, recs, nil
}

// layoutGroup is the layouts that agree on the label alignment and on
// the fixed-size objects between kallsyms_markers and
// kallsyms_token_table: given n, they put kallsyms_markers at one offset
// (counted back from the token table).
type layoutGroup struct {
	align int
	mids  []string
	specs []layoutSpec
}

var kallsymsLayoutGroups = func() []*layoutGroup {
	var out []*layoutGroup
next:
	for _, sp := range kallsymsLayoutSpecs {
		m := slices.Index(sp.order, ktab.ObjMarkers)
		t := slices.Index(sp.order, ktab.ObjTokenTable)
		if m < 0 || t < m {
			panic("elfload: a kallsyms layout without kallsyms_markers before kallsyms_token_table")
		}
		mids := sp.order[m+1 : t]
		for _, g := range out {
			if g.align == sp.align && slices.Equal(g.mids, mids) {
				g.specs = append(g.specs, sp)
				continue next
			}
		}
		out = append(out, &layoutGroup{align: sp.align, mids: mids, specs: []layoutSpec{sp}})
	}
	return out
}()

// markersAt is where group g puts kallsyms_markers for n symbols before
// the token table at tt, or -1.
func (g *layoutGroup) markersAt(tt, n int) int {
	s := tt
	for i := len(g.mids) - 1; i >= 0; i-- {
		sz := objSize(g.mids[i], n)
		if sz < 0 {
			return -1
		}
		s -= alignUp(sz, 0, g.align)
	}
	return s - alignUp(objSize(ktab.ObjMarkers, n), 0, g.align)
}

// plausibleMarkers is a cheap look at the k markers at ms before walking
// names of length at most max: 0 first, then rising by at least 512 (256
// records of >= 2 bytes), all below max.
func plausibleMarkers(ro []byte, ms, k, max int) bool {
	prev := -1
	for i := range k {
		v := int(le.Uint32(ro[ms+4*i:]))
		if i == 0 && v != 0 || i > 0 && v < prev+512 || v >= max {
			return false
		}
		prev = v
	}
	return true
}

// maxKallsymsTries bounds the token anchors findKallsyms scans before
// and the kallsyms_num_syms candidates whose names it walks. A real image
// has one of each; each try costs a pass over .rodata (or its names), so
// crafted .rodata full of look-alikes would otherwise load in quadratic
// time.
const maxKallsymsTries = 16

// findKallsyms finds the token anchors of ro (loaded at base), then scans
// it at 4-byte aligned offsets before each anchor's token table for a
// kallsyms_num_syms whose names and markers chain where a layout group
// puts them, and accepts the first chain around which a generation's
// layout validates in full. More than maxKallsymsTries anchors or
// candidates is an error.
func findKallsyms(ro []byte, base, textAddr uint64) (*ktab.Tables, *kallsymsLayout, error) {
	anchors := findTokenAnchors(ro, base)
	if len(anchors) == 0 {
		return nil, nil, errors.New("kallsyms tables not found / layout unknown (no kallsyms_token_index with its kallsyms_token_table in .rodata)")
	}
	if len(anchors) > maxKallsymsTries {
		return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (%d kallsyms_token_index candidates, more than %d)", len(anchors), maxKallsymsTries)
	}
	// A failed plausibleMarkers look depends only on where the markers
	// are and how many (see the check before it): remember it, so that
	// many num_syms look-alikes of one count cost one look.
	type markersKey struct{ ms, k int }
	implausible := map[markersKey]bool{}
	cands := 0
	var firstErr error
	var recs []int
	note := func(p int, err error) {
		if firstErr == nil {
			firstErr = fmt.Errorf("kallsyms_num_syms candidate at %#x: %v", base+uint64(p), err)
		}
	}
	for ai := range anchors {
		a := &anchors[ai]
		for p := alignUp(0, base, 4); p+4 <= a.table; p += 4 {
			n := int(le.Uint32(ro[p:]))
			// seqs are 24-bit; each record takes >= 2 bytes before the
			// token table.
			if n == 0 || n >= 1<<24 || 2*n > a.table-p {
				continue
			}
			for _, g := range kallsymsLayoutGroups {
				if !aligned(p, base, g.align) || !aligned(a.table, base, g.align) {
					continue
				}
				q := alignUp(p+4, base, g.align)
				ms := g.markersAt(a.table, n)
				k := (n + 255) / 256
				if ms < q+2*n || ms+4*k > len(ro) {
					continue
				}
				// The last 256-block of records (r of them, each of 2 to
				// 2 + KSYM_NAME_LEN bytes) must end within the alignment
				// before the markers.
				last, r := int(le.Uint32(ro[ms+4*(k-1):])), n-256*(k-1)
				if q+last+2*r > ms || q+last+(2+ktab.KSYM_NAME_LEN)*r <= ms-g.align || implausible[markersKey{ms, k}] {
					continue
				}
				if !plausibleMarkers(ro, ms, k, ms-q) {
					implausible[markersKey{ms, k}] = true
					continue
				}
				cands++
				if cands > maxKallsymsTries {
					return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (%d kallsyms_num_syms candidates, more than %d; first: %v)", cands, maxKallsymsTries, firstErr)
				}
				var c *namesChain
				var err error
				c, recs, err = chainAt(ro, base, p, ms, g, a, recs)
				if err != nil {
					note(p, err)
					continue
				}
				for _, sp := range g.specs {
					t, l, err := parseLayout(ro, base, textAddr, sp, c, a)
					if err != nil {
						note(p, fmt.Errorf("%s layout, %s: %v", sp.gen, sp.enc, err))
						continue
					}
					l.Candidates = cands
					return t, l, nil
				}
			}
		}
	}
	if cands == 0 {
		return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (%d token table(s), but no kallsyms_num_syms before one with kallsyms_markers where a layout puts them)", len(anchors))
	}
	return nil, nil, fmt.Errorf("kallsyms tables not found / layout unknown (%d candidate(s) rejected; first: %v)", cands, firstErr)
}

// objSize is the byte size of a fixed-size object of n symbols.
func objSize(name string, n int) int {
	switch name {
	case ktab.ObjOffsets:
		return 4 * n
	case ktab.ObjAddresses:
		return 8 * n
	case ktab.ObjRelativeBase:
		return 8
	case ktab.ObjNumSyms:
		return 4
	case ktab.ObjSeqsOfNames:
		return 3 * n
	case ktab.ObjMarkers:
		return 4 * ((n + 255) / 256)
	case ktab.ObjTokenIndex:
		return 512
	}
	return -1
}

// parseLayout places the objects of layout sp around the chain c and the
// anchor a, checks every one and decodes the tables.
func parseLayout(ro []byte, base, textAddr uint64, sp layoutSpec, c *namesChain, a *tokenAnchor) (*ktab.Tables, *kallsymsLayout, error) {
	n := c.n
	pos := map[string]int{ktab.ObjNumSyms: c.numSyms, ktab.ObjNames: c.names, ktab.ObjMarkers: c.markers}
	end := map[string]int{ktab.ObjNumSyms: c.numSyms + 4, ktab.ObjNames: c.namesEnd, ktab.ObjMarkers: c.markers + objSize(ktab.ObjMarkers, n)}
	ns := -1
	for i, o := range sp.order {
		if o == ktab.ObjNumSyms {
			ns = i
		}
	}
	if ns < 0 || ns+2 >= len(sp.order) || sp.order[ns+1] != ktab.ObjNames || sp.order[ns+2] != ktab.ObjMarkers {
		return nil, nil, errors.New("layout without kallsyms_num_syms, kallsyms_names, kallsyms_markers in a row")
	}
	// Backwards from num_syms: fixed-size objects only.
	next := c.numSyms
	for i := ns - 1; i >= 0; i-- {
		o := sp.order[i]
		sz := objSize(o, n)
		if sz < 0 || o == ktab.ObjNames || o == ktab.ObjMarkers {
			return nil, nil, fmt.Errorf("layout puts %s before kallsyms_num_syms", o)
		}
		p := next - alignUp(sz, 0, sp.align)
		if p < 0 {
			return nil, nil, fmt.Errorf("%s would start before .rodata", o)
		}
		pos[o], end[o] = p, p+sz
		next = p
	}
	// Forwards from markers.
	prev := end[ktab.ObjMarkers]
	for i := ns + 3; i < len(sp.order); i++ {
		o := sp.order[i]
		p := alignUp(prev, base, sp.align)
		sz := objSize(o, n)
		switch o {
		case ktab.ObjTokenTable:
			if p != a.table {
				return nil, nil, fmt.Errorf("kallsyms_token_table at %#x, where the layout puts it at %#x", base+uint64(a.table), base+uint64(p))
			}
			sz = a.tableEnd - a.table
		case ktab.ObjTokenIndex:
			if p != a.index {
				return nil, nil, fmt.Errorf("kallsyms_token_index at %#x, where the layout puts it at %#x", base+uint64(a.index), base+uint64(p))
			}
		}
		if sz < 0 {
			return nil, nil, fmt.Errorf("layout puts %s after kallsyms_markers", o)
		}
		if p+sz > len(ro) {
			return nil, nil, fmt.Errorf("%s runs past .rodata", o)
		}
		pos[o], end[o] = p, p+sz
		prev = p + sz
	}
	if _, ok := pos[ktab.ObjTokenIndex]; !ok {
		return nil, nil, errors.New("layout has no kallsyms_token_index after kallsyms_markers")
	}
	get := func(o string) int {
		if p, ok := pos[o]; ok {
			return p
		}
		return -1
	}
	l := &kallsymsLayout{Base: base, Gen: sp.gen, Encoding: sp.enc,
		Offsets: get(ktab.ObjOffsets), RelBase: get(ktab.ObjRelativeBase), NumSyms: c.numSyms, Names: c.names,
		Markers: c.markers, Seqs: get(ktab.ObjSeqsOfNames), TokenTable: a.table, TokenIdx: a.index, End: prev}
	if l.Offsets < 0 {
		l.Offsets = get(ktab.ObjAddresses)
	}

	// kallsyms_seqs_of_names: a permutation of 0..N-1, 3 bytes each, big-endian.
	seen := make([]bool, n)
	for j := 0; j < n; j++ {
		b := ro[l.Seqs+3*j:]
		s := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if s >= n || seen[s] {
			return nil, nil, fmt.Errorf("kallsyms_seqs_of_names[%d] = %d is not part of a permutation of %d symbols", j, s, n)
		}
		seen[s] = true
	}

	t := &ktab.Tables{
		NumSyms:     n,
		Names:       append([]byte(nil), ro[c.names:c.namesEnd]...),
		Markers:     make([]uint32, (n+255)/256),
		SeqsOfNames: append([]byte(nil), ro[l.Seqs:l.Seqs+3*n]...),
		TokenTable:  append([]byte(nil), ro[a.table:a.tableEnd]...),
		TokenIndex:  a.idx,
		Gen:         sp.gen,
		Syms:        make([]ktab.Symbol, n),
	}
	for i := range t.Markers {
		t.Markers[i] = le.Uint32(ro[c.markers+4*i:])
	}
	switch sp.enc {
	case ktab.EncodingAddresses:
		t.Addresses = make([]uint64, n)
		for i := range n {
			t.Addresses[i] = le.Uint64(ro[l.Offsets+8*i:])
		}
	default:
		t.Offsets = make([]int32, n)
		for i := range n {
			t.Offsets[i] = int32(le.Uint32(ro[l.Offsets+4*i:]))
		}
	}
	switch sp.enc {
	case ktab.EncodingBaseRelative:
		t.BaseRelative = true
	case ktab.EncodingBaseRelativeAbsolutePercpu:
		t.BaseRelative, t.AbsolutePercpu = true, true
	case ktab.EncodingPCRelative:
		t.PCRelative = true
		t.OffsetsAddr = base + uint64(l.Offsets)
	}
	if l.RelBase >= 0 {
		t.RelativeBase = le.Uint64(ro[l.RelBase:])
	}
	if t.Encoding() != sp.enc {
		return nil, nil, fmt.Errorf("internal: tables of encoding %s read as %s", sp.enc, t.Encoding())
	}

	var buf []byte
	var prevAddr uint64
	haveText := false
	for i := 0; i < n; i++ {
		addr := t.SymAddress(i)
		if i > 0 && addr < prevAddr {
			return nil, nil, fmt.Errorf("symbol %d address %#x below its predecessor %#x (kallsyms is sorted by address)", i, addr, prevAddr)
		}
		prevAddr = addr
		r := c.recs[i]
		ln, h := int(ro[r]), 1
		if ln&0x80 != 0 {
			ln, h = ln&0x7f|int(ro[r+1])<<7, 2
		}
		buf = buf[:0]
		for _, b := range ro[r+h : r+h+ln] {
			buf = append(buf, a.tokens[b]...)
		}
		if len(buf) < 2 {
			return nil, nil, fmt.Errorf("symbol %d expands to %q: want a type and a name", i, buf)
		}
		name := string(buf[1:])
		if name == "_text" {
			if addr != textAddr {
				return nil, nil, fmt.Errorf("symbol _text decodes to %#x, .text is at %#x", addr, textAddr)
			}
			haveText = true
		}
		t.Syms[i] = ktab.Symbol{Addr: addr, Type: buf[0], Name: name}
	}
	if !haveText {
		return nil, nil, errors.New("no symbol _text")
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
