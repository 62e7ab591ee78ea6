package kallsyms

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// KsymNameLen is KSYM_NAME_LEN: the name buffer the kernel expands into.
const KsymNameLen = 512

// moduleNameLen is MODULE_NAME_LEN (64 - sizeof(unsigned long)) on x86-64.
const moduleNameLen = 56

// FaultDynamic32Alloc makes the run-time allocation of the dynamic32 offset
// table fail: lookups fall back to the marker walk until Release.
var FaultDynamic32Alloc = sim.NewFaultPoint("kallsyms.dynamic32.alloc",
	"allocation of the run-time 32-bit kallsyms_names offset table (dynamic32 variant) fails; lookups fall back to kallsyms_markers")

// Bounds are the section symbols is_ksym_addr and get_symbol_pos use.
// A zero field is filled from the table's symbol of that name.
type Bounds struct {
	Stext, Etext, End    uint64 // _stext, _etext, _end
	Sinittext, Einittext uint64 // _sinittext, _einittext
}

// CompressedOptions configure NewCompressed.
type CompressedOptions struct {
	// Modules are the loaded modules in load order (oldest first, as
	// image.Kernel.Modules); the kernel's list is newest first.
	Modules []*image.Module
	// Faults is the fault plan (FaultDynamic32Alloc); nil injects nothing.
	Faults *sim.Faults
	// Bounds override the section symbols; zero fields come from the table.
	Bounds Bounds
}

// Compressed is a Resolver that runs the kernel's lookups over the
// compressed kallsyms table (ktab.Tables) as one Variant does, counting
// every hop, token, character and table byte. Every variant returns
// identical results; only the counts (and the Go time) differ.
//
// A Compressed is not safe for concurrent use (the dynamic32 table is built
// lazily, Stats accumulate).
type Compressed struct {
	t     *ktab.Tables
	v     Variant
	n     int
	idx3  []byte   // kallsyms_names_offsets (offset-index)
	half3 []byte   // stride-2 half table
	dyn   []uint32 // dynamic32 table while it exists
	// dynFailed: the allocation failed in this batch; markers until Release.
	dynFailed bool
	dynBuilds int
	faults    *sim.Faults
	mods      []*image.Module // newest first
	b         Bounds

	// simOffs is every record's offset in kallsyms_names: simulator data
	// (not a kernel table) that lets markerWalk produce the walk's counts
	// without walking (hops = i&0xFF, bytes = the records skipped).
	// TestMarkerWalkShortcutCounts proves it; nil (the default) means walk,
	// which is what Measure must time.
	simOffs []uint32
	posMemo *sim.Memo[uint64, symSpan] // nil: no memo (the default; EnableFastScan)
	// nameMemo holds the names at the top levels of the name bisection
	// (nil: expand every time; EnableFastScan turns it on).
	nameMemo *sim.Memo[nameKey, string]

	// Stats, when non-nil, accumulates per-comparison statistics of the
	// name lookups (simulator-side; not kernel work).
	Stats *LookupStats

	procReplay Replay // /proc/kallsyms text and counts (simulator-side)
}

// LookupStats are per-comparison statistics of kallsyms_lookup_names.
type LookupStats struct {
	Lookups      uint64 // kallsyms_lookup_names calls
	BsearchSteps uint64 // comparisons in the binary search
	WalkCmps     uint64 // comparisons in the duplicate walks (down and up)
	Comparisons  uint64 // BsearchSteps + WalkCmps
	// Comparisons decided at the first / within the first two characters
	// compared (chr_cmp of that comparison = 1 / ≤ 2).
	DecidedAt1, DecidedWithin2 uint64
	CharsCompared              uint64
	// HopDistance sums (seq & 0xFF) over comparisons: the marker hops the
	// baseline walks for them, whatever the variant.
	HopDistance uint64
	// OddSeqs counts comparisons whose record index is odd: the hops the
	// stride2 variant walks for them.
	OddSeqs uint64
}

// ErrNamesTooLarge is wrapped by NewCompressed when a record of
// kallsyms_names starts beyond the 24-bit range of a 3-byte offset index.
var ErrNamesTooLarge = errors.New("kallsyms_names too large for a 3-byte offset index")

// NewCompressed validates t and builds the variant's index (the
// kallsyms_names_offsets table for offset-index, the half table for
// stride2; dynamic32 builds its table at run time).
func NewCompressed(t *ktab.Tables, v Variant, opt CompressedOptions) (*Compressed, error) {
	if t == nil {
		return nil, errors.New("kallsyms: nil tables")
	}
	if int(v.Index) >= len(indexNames) {
		return nil, fmt.Errorf("kallsyms: invalid variant %v", v)
	}
	n := t.NumSyms
	if err := validate(t); err != nil {
		return nil, err
	}
	c := &Compressed{t: t, v: v, n: n, faults: opt.Faults, b: opt.Bounds}
	var err error
	switch v.Index {
	case IndexOffsets3:
		c.idx3, err = t.NamesOffsets()
	case IndexStride2:
		c.half3, err = t.NamesOffsetsStride2()
	}
	if err != nil {
		return nil, fmt.Errorf("kallsyms: %s: %w: %w", v, ErrNamesTooLarge, err)
	}
	for i := len(opt.Modules) - 1; i >= 0; i-- {
		c.mods = append(c.mods, opt.Modules[i])
	}
	c.fillBounds()
	return c, nil
}

// validate walks every record header of t.Names (simulator-side, not
// counted) and checks the markers and the other tables' shapes.
func validate(t *ktab.Tables) error {
	n := t.NumSyms
	if n < 0 || n >= 1<<24 {
		return fmt.Errorf("kallsyms: %d symbols do not fit kallsyms_seqs_of_names' 3 bytes", n)
	}
	if len(t.SeqsOfNames) != 3*n {
		return fmt.Errorf("kallsyms: kallsyms_seqs_of_names has %d bytes, want 3×%d", len(t.SeqsOfNames), n)
	}
	if addrs := t.Encoding() == ktab.EncodingAddresses; addrs && len(t.Addresses) != n || !addrs && len(t.Offsets) != n {
		return fmt.Errorf("kallsyms: address table length does not match %d symbols", n)
	}
	if want := (n + 255) / 256; len(t.Markers) != want {
		return fmt.Errorf("kallsyms: %d markers, want %d", len(t.Markers), want)
	}
	if len(t.TokenTable) == 0 || t.TokenTable[len(t.TokenTable)-1] != 0 {
		return errors.New("kallsyms: token table not NUL-terminated")
	}
	for b, ix := range t.TokenIndex {
		if int(ix) >= len(t.TokenTable) {
			return fmt.Errorf("kallsyms: token_index[%d] = %d beyond the token table", b, ix)
		}
	}
	p := 0
	for i := 0; i < n; i++ {
		if p >= len(t.Names) {
			return fmt.Errorf("kallsyms: kallsyms_names ends before record %d", i)
		}
		if uint64(p) > 0xFFFFFFFF {
			return fmt.Errorf("kallsyms: record %d beyond 4 GiB", i)
		}
		if i&0xFF == 0 && t.Markers[i>>8] != uint32(p) {
			return fmt.Errorf("kallsyms: marker %d = %d, record %d starts at %d", i>>8, t.Markers[i>>8], i, p)
		}
		l := int(t.Names[p])
		h := 1
		if l&0x80 != 0 {
			if p+1 >= len(t.Names) {
				return fmt.Errorf("kallsyms: record %d: truncated 2-byte header", i)
			}
			l = l&0x7F | int(t.Names[p+1])<<7
			h = 2
		}
		if l == 0 {
			return fmt.Errorf("kallsyms: record %d has length 0", i)
		}
		p += h + l
	}
	if p != len(t.Names) {
		return fmt.Errorf("kallsyms: %d records end at byte %d of %d-byte kallsyms_names", n, p, len(t.Names))
	}
	return nil
}

func (c *Compressed) fillBounds() {
	b := &c.b
	for _, s := range c.t.Syms {
		switch s.Name {
		case "_stext":
			setIfZero(&b.Stext, s.Addr)
		case "_etext":
			setIfZero(&b.Etext, s.Addr)
		case "_end":
			setIfZero(&b.End, s.Addr)
		case "_sinittext":
			setIfZero(&b.Sinittext, s.Addr)
		case "_einittext":
			setIfZero(&b.Einittext, s.Addr)
		}
	}
	if c.n > 0 {
		setIfZero(&b.Stext, c.t.SymAddress(0))
		last := c.t.SymAddress(c.n - 1)
		setIfZero(&b.End, last+1)
		setIfZero(&b.Etext, last+1)
	}
}

func setIfZero(p *uint64, v uint64) {
	if *p == 0 {
		*p = v
	}
}

// Variant returns the resolver's variant.
func (c *Compressed) Variant() Variant { return c.v }

// Tables returns the table the resolver walks.
func (c *Compressed) Tables() *ktab.Tables { return c.t }

// tally accumulates counts inside one call; flush adds them to the
// counters once, so the Go time of a call stays the modelled loop's.
// It is also where a memo replays a walk's counts (addTally).
//
// The fields the memos replay come first, in the order addTally meets
// them: get_symbol_pos' (bytes, addrProbe, aliasStep), then the name
// fetch's.
type tally struct {
	bytes, addrProbe, aliasStep           uint64
	ld3, ld4, addr, hop, tok, chrOut      uint64
	chrCmp, cmp, visit, modSym, modLookup uint64
	streamTok                             uint64
}

// tallyOps are the ops of a tally's fields, in field order.
var tallyOps = [...]sim.Op{
	OpBytes, OpAddrProbe, OpAliasStep,
	OpLd3, OpLd4, OpAddr, OpHop, OpTok, OpChrOut,
	OpChrCmp, OpCmp, OpVisit, OpModSym, OpModLookup,
	OpStreamTok,
}

// A tally is its fields' counts side by side, one per tallyOps entry:
// the array counts views (a compile error if a field is added without
// its op).
var _ = [1]struct{}{}[unsafe.Sizeof(tally{})-uintptr(8*len(tallyOps))]

// counts is tl's fields as an array indexed like tallyOps.
func (tl *tally) counts() *[len(tallyOps)]uint64 {
	return (*[len(tallyOps)]uint64)(unsafe.Pointer(tl))
}

// streamed moves the tokens expand counted to kallsyms.stream.tok: a
// whole-table walk decodes its records in table order, a stream, which
// costs less per token than a record found at random (kallsyms.tok).
// The tokens, and every other count, are the same.
func (tl *tally) streamed() {
	tl.streamTok += tl.tok
	tl.tok = 0
}

func (tl *tally) flush(c *sim.Counters) {
	if c == nil {
		return
	}
	for i, n := range tl.counts() {
		if n != 0 {
			c.Add(tallyOps[i], n)
		}
	}
}

// toTally adds tl's counts to t, in field order (what addTally expects
// to find, though any order replays correctly).
func (tl *tally) toTally(t *sim.Tally) {
	for i, n := range tl.counts() {
		if n != 0 {
			t.Add(tallyOps[i], n)
		}
	}
}

// addTally adds a memo's stored counts (sim.Memo.Get). Each op is found
// by a scan of tallyOps that goes on from the previous op's field: the
// counts toTally stored are in field order, so one pass finds them all
// (anything else is searched for from the start).
func (tl *tally) addTally(t *sim.Tally) {
	first, rest := t.Parts()
	j := tl.addCounts(first, 0)
	if len(rest) != 0 {
		tl.addCounts(rest, j)
	}
}

// addCounts adds counts to tl, scanning tallyOps from j, and returns
// where the scan stopped.
func (tl *tally) addCounts(counts []sim.OpCount, j int) int {
	cs := tl.counts()
	for _, x := range counts {
		for j < len(tallyOps) && tallyOps[j] != x.Op {
			j++
		}
		if j == len(tallyOps) {
			j = tallyIndex(x.Op)
		}
		cs[j] += x.N
		j++
	}
	return j
}

// tallyIndex is op's field in a tally.
func tallyIndex(op sim.Op) int {
	for i, o := range tallyOps {
		if o == op {
			return i
		}
	}
	panic("kallsyms: tally of a foreign op " + op.Name())
}

// hop models one iteration of get_symbol_offset's loop.
func (c *Compressed) hop(p int, tl *tally) int {
	names := c.t.Names
	l := int(names[p])
	if l&0x80 != 0 {
		l = (l&0x7F | int(names[p+1])<<7) + 1
	}
	tl.hop++
	tl.bytes += uint64(l + 1)
	return p + l + 1
}

// EnableFastScan lets the marker walk take its counts from precomputed
// record offsets instead of walking: identical counts, less simulator time.
// For scenarios that only count (the registration pipeline); never for
// Go timings of the lookups themselves (Measure, test_kallsyms_perf), which
// must run the walk.
//
// It also turns on the get_symbol_pos memo (newSymPosMemo) when the
// address table is sorted, as kallsyms_offsets always is, and the name
// memo (newNameMemo) for the variants whose name fetch is a table read.
func (c *Compressed) EnableFastScan() {
	sh := c.scanShare()
	c.simOffs = sh.offs
	if !sh.sorted {
		return
	}
	c.posMemo = newSymPosMemo()
	if !c.v.TokenCmp && c.v.Index != IndexDynamic32 {
		c.nameMemo = newNameMemo()
	}
}

// markerWalk is upstream get_symbol_offset.
func (c *Compressed) markerWalk(i int, tl *tally) int {
	tl.ld4++
	tl.bytes += 4
	p := int(c.t.Markers[i>>8])
	if c.simOffs != nil {
		// The walk's exact counts: i&0xFF header hops over the records
		// between the marker and record i, touching their bytes.
		end := int(c.simOffs[i])
		tl.hop += uint64(i & 0xFF)
		tl.bytes += uint64(end - p)
		return end
	}
	for k := 0; k < i&0xFF; k++ {
		p = c.hop(p, tl)
	}
	return p
}

func ld3(b []byte, i int) int {
	return int(b[3*i])<<16 | int(b[3*i+1])<<8 | int(b[3*i+2])
}

// symbolOffset is get_symbol_offset(i) as the variant implements it.
func (c *Compressed) symbolOffset(i int, tl *tally) int {
	switch c.v.Index {
	case IndexOffsets3:
		tl.ld3++
		tl.bytes += 3
		return ld3(c.idx3, i)
	case IndexStride2:
		tl.ld3++
		tl.bytes += 3
		p := ld3(c.half3, i>>1)
		if i&1 != 0 {
			p = c.hop(p, tl)
		}
		return p
	case IndexDynamic32:
		if c.ensureDynamic(tl) {
			tl.ld4++
			tl.bytes += 4
			return int(c.dyn[i])
		}
	}
	return c.markerWalk(i, tl)
}

// seq is get_symbol_seq(j): one ld3 of kallsyms_seqs_of_names.
func (c *Compressed) seq(j int, tl *tally) int {
	tl.ld3++
	tl.bytes += 3
	return ld3(c.t.SeqsOfNames, j)
}

func (c *Compressed) symAddr(i int, tl *tally) uint64 {
	tl.addr++
	tl.bytes += 4
	return c.t.SymAddress(i)
}

// expand is kallsyms_expand_symbol(off, buf, KSYM_NAME_LEN): it returns the
// name's length in buf and the next record's offset.
func (c *Compressed) expand(off int, buf *[KsymNameLen]byte, tl *tally) (int, int) {
	names, ttab, tidx := c.t.Names, c.t.TokenTable, &c.t.TokenIndex
	l := int(names[off])
	off++
	h := 1
	if l&0x80 != 0 {
		l = l&0x7F | int(names[off])<<7
		off++
		h = 2
	}
	data := names[off : off+l]
	next := off + l
	tl.bytes += uint64(h + l)
	n, maxlen := 0, KsymNameLen
	skipped := false
	toks := 0
tokens:
	for _, b := range data {
		toks++
		for p := int(tidx[b]); ttab[p] != 0; p++ {
			if !skipped {
				skipped = true
				continue
			}
			if maxlen <= 1 {
				break tokens
			}
			buf[n] = ttab[p]
			n++
			maxlen--
		}
	}
	tl.tok += uint64(toks)
	tl.chrOut += uint64(n)
	return n, next
}

// strcmpCount is strcmp(name, buf) with the characters examined counted:
// the common prefix plus the deciding character (the NUL on equality).
func strcmpCount(name string, buf []byte, tl *tally) int {
	k := 0
	for k < len(name) && k < len(buf) && name[k] == buf[k] {
		k++
	}
	tl.chrCmp += uint64(k + 1)
	switch {
	case k < len(name) && k < len(buf):
		if name[k] < buf[k] {
			return -1
		}
		return 1
	case k < len(name):
		return 1
	case k < len(buf):
		return -1
	}
	return 0
}

// tokenCmp is the proposed kallsyms_strcmp_symbol(name, off): compare the
// query with the compressed record token by token, skipping the type
// character, returning at the first differing character. The query's NUL
// counts as a character; at the end of the record the query's next
// character is compared with NUL.
func (c *Compressed) tokenCmp(off int, name string, tl *tally) int {
	names, ttab, tidx := c.t.Names, c.t.TokenTable, &c.t.TokenIndex
	l := int(names[off])
	off++
	tl.bytes++
	if l&0x80 != 0 {
		l = l&0x7F | int(names[off])<<7
		off++
		tl.bytes++
	}
	skipped := false
	q := 0
	var cmp uint64
	for _, b := range names[off : off+l] {
		tl.tok++
		tl.bytes++
		for p := int(tidx[b]); ttab[p] != 0; p++ {
			if !skipped {
				skipped = true
				continue
			}
			ch := ttab[p]
			cmp++
			if q == len(name) {
				tl.chrCmp += cmp
				return -1
			}
			if name[q] != ch {
				tl.chrCmp += cmp
				if name[q] < ch {
					return -1
				}
				return 1
			}
			q++
		}
	}
	tl.chrCmp += cmp + 1
	if q == len(name) {
		return 0
	}
	return 1
}

// compare is one name comparison of kallsyms_lookup_names at name-order
// position j: get_symbol_seq + get_symbol_offset + compare_symbol_name.
func (c *Compressed) compare(j int, name string, tl *tally, walk bool) int {
	tl.cmp++
	seq := c.seq(j, tl)
	off := c.symbolOffset(seq, tl)
	before := tl.chrCmp
	var r int
	if c.v.TokenCmp {
		r = c.tokenCmp(off, name, tl)
	} else {
		var buf [KsymNameLen]byte
		n, _ := c.expand(off, &buf, tl)
		r = strcmpCount(name, buf[:n], tl)
	}
	if s := c.Stats; s != nil {
		s.Comparisons++
		if walk {
			s.WalkCmps++
		} else {
			s.BsearchSteps++
		}
		lam := tl.chrCmp - before
		s.CharsCompared += lam
		if lam <= 1 {
			s.DecidedAt1++
		}
		if lam <= 2 {
			s.DecidedWithin2++
		}
		s.HopDistance += uint64(seq & 0xFF)
		s.OddSeqs += uint64(seq & 1)
	}
	return r
}

// fetchName is the name at name-order position j: get_symbol_seq +
// get_symbol_offset + kallsyms_expand_symbol, as compare fetches it.
func (c *Compressed) fetchName(j int, tl *tally) string {
	off := c.symbolOffset(c.seq(j, tl), tl)
	var buf [KsymNameLen]byte
	n, _ := c.expand(off, &buf, tl)
	return string(buf[:n])
}

// strcmpCountString is strcmpCount on a string.
func strcmpCountString(name, s string, tl *tally) int {
	k := 0
	for k < len(name) && k < len(s) && name[k] == s[k] {
		k++
	}
	tl.chrCmp += uint64(k + 1)
	switch {
	case k < len(name) && k < len(s):
		if name[k] < s[k] {
			return -1
		}
		return 1
	case k < len(name):
		return 1
	case k < len(s):
		return -1
	}
	return 0
}

// cstr cuts a Go string at its first NUL, as the kernel sees a C string.
func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// lookupNames models kernel/kallsyms.c:kallsyms_lookup_names: binary
// search over the name order, then the walk down to the first equal name
// and, with wantEnd, up to the last. start and end are name-order
// positions (indices into kallsyms_seqs_of_names).
func (c *Compressed) lookupNames(name string, wantEnd bool, tl *tally) (start, end int, ok bool) {
	if c.Stats != nil {
		c.Stats.Lookups++
	}
	low, high, mid := 0, c.n-1, 0
	found := false
	node := 1 // the bisection node (root 1, children 2h and 2h+1): the name memo's slot
	for low <= high {
		mid = low + (high-low)/2
		r := c.compareAt(node, mid, name, tl)
		node *= 2
		if r > 0 {
			low = mid + 1
			node++
		} else if r < 0 {
			high = mid - 1
		} else {
			found = true
			break
		}
	}
	if !found {
		return 0, 0, false
	}
	low = mid
	for low > 0 {
		if c.compare(low-1, name, tl, true) != 0 {
			break
		}
		low--
	}
	start, end = low, mid
	if wantEnd {
		high = mid
		for high < c.n-1 {
			if c.compare(high+1, name, tl, true) != 0 {
				break
			}
			high++
		}
		end = high
	}
	return start, end, true
}

// LookupNames models kallsyms_lookup_names(name, &start, &end): the first
// and (with wantEnd) last name-order positions holding exactly name. It
// does not look at modules. A NUL cuts name, as a C string.
func (c *Compressed) LookupNames(cn *sim.Counters, name string, wantEnd bool) (start, end int, ok bool) {
	var tl tally
	start, end, ok = c.lookupNames(cstr(name), wantEnd, &tl)
	tl.flush(cn)
	return start, end, ok
}

// SeqAt is get_symbol_seq(j) without counting: the kallsyms index of the
// j-th symbol in name order.
func (c *Compressed) SeqAt(j int) int { return ld3(c.t.SeqsOfNames, j) }

// LookupName models kernel/kallsyms.c:kallsyms_lookup_name: vmlinux (the
// lowest-address copy), then module_kallsyms_lookup_name.
func (c *Compressed) LookupName(cn *sim.Counters, name string) (uint64, bool) {
	name = cstr(name)
	if name == "" {
		return 0, false
	}
	var tl tally
	i, _, ok := c.lookupNames(name, false, &tl)
	if ok {
		a := c.symAddr(c.seq(i, &tl), &tl)
		tl.flush(cn)
		return a, true
	}
	tl.flush(cn)
	return c.ModuleLookupName(cn, name)
}

// OnEachMatchSymbol models kallsyms_on_each_match_symbol: fn(addr) for
// every vmlinux symbol named name, address ascending, until fn returns
// non-zero (returned). A miss returns 0 without looking at modules.
func (c *Compressed) OnEachMatchSymbol(cn *sim.Counters, name string, fn func(addr uint64) int) int {
	var tl tally
	defer tl.flush(cn)
	start, end, ok := c.lookupNames(cstr(name), true, &tl)
	if !ok {
		return 0
	}
	ret := 0
	for i := start; ret == 0 && i <= end; i++ {
		a := c.symAddr(c.seq(i, &tl), &tl)
		tl.visit++
		ret = fn(a)
	}
	return ret
}

// OnEachSymbol models kallsyms_on_each_symbol: every vmlinux symbol in
// kallsyms (address) order, the record offset carried from one record to
// the next. name is the kernel's namebuf: valid only during the call.
// Stops at, and returns, the first non-zero fn result.
func (c *Compressed) OnEachSymbol(cn *sim.Counters, fn func(name []byte, addr uint64) int) int {
	var tl tally
	defer func() { tl.streamed(); tl.flush(cn) }()
	var buf [KsymNameLen]byte
	off := 0
	for i := 0; i < c.n; i++ {
		var n int
		n, off = c.expand(off, &buf, &tl)
		a := c.symAddr(i, &tl)
		tl.visit++
		if r := fn(buf[:n], a); r != 0 {
			return r
		}
	}
	return 0
}

func (c *Compressed) isInitText(addr uint64) bool {
	return addr >= c.b.Sinittext && addr < c.b.Einittext
}

// IsKsymAddr models include/linux/kallsyms.h:is_ksym_addr: [_stext, _end)
// with CONFIG_KALLSYMS_ALL (Tables.AllSymbols), else [_stext, _etext) or
// init text.
func (c *Compressed) IsKsymAddr(addr uint64) bool {
	if c.t.AllSymbols {
		return addr >= c.b.Stext && addr < c.b.End
	}
	return addr >= c.b.Stext && addr < c.b.Etext || c.isInitText(addr)
}

// getSymbolPos models kernel/kallsyms.c:get_symbol_pos: the binary
// search and the alias walks (symbolSpan), then, with no higher address,
// the end of the section.
func (c *Compressed) getSymbolPos(addr uint64, tl *tally) (pos int, size, offset uint64) {
	sp := c.findSymbolSpan(addr, tl)
	end := sp.end
	if end == 0 {
		switch {
		case c.isInitText(addr):
			end = c.b.Einittext
		case c.t.AllSymbols:
			end = c.b.End
		default:
			end = c.b.Etext
		}
	}
	return sp.pos, end - sp.start, addr - sp.start
}

// symSpan is where get_symbol_pos's walks end: the first alias at or
// below the address, its address, and the next higher address (0: none).
type symSpan struct {
	pos        int
	start, end uint64
}

// symbolSpan is get_symbol_pos's binary search over the addresses, the
// walk down to the first alias and the walk up to the next higher address.
func (c *Compressed) symbolSpan(addr uint64, tl *tally) symSpan {
	t := c.t
	low, high := 0, c.n
	for high-low > 1 {
		mid := low + (high-low)/2
		tl.addrProbe++
		tl.bytes += 4
		if t.SymAddress(mid) <= addr {
			low = mid
		} else {
			high = mid
		}
	}
	for low > 0 {
		tl.aliasStep++
		tl.bytes += 4
		if t.SymAddress(low-1) != t.SymAddress(low) {
			break
		}
		low--
	}
	start := t.SymAddress(low)
	var end uint64
	for i := low + 1; i < c.n; i++ {
		tl.aliasStep++
		tl.bytes += 4
		if a := t.SymAddress(i); a > start {
			end = a
			break
		}
	}
	return symSpan{pos: low, start: start, end: end}
}

// GetSymbolPos models get_symbol_pos: the kallsyms index of the first
// alias at or below addr, the size to the next higher address and the
// offset. Like the kernel it does not check is_ksym_addr.
func (c *Compressed) GetSymbolPos(cn *sim.Counters, addr uint64) (pos int, size, offset uint64) {
	var tl tally
	pos, size, offset = c.getSymbolPos(addr, &tl)
	tl.flush(cn)
	return pos, size, offset
}

// LookupSizeOffset models kallsyms_lookup_size_offset (BPF JIT images are
// not modelled).
func (c *Compressed) LookupSizeOffset(cn *sim.Counters, addr uint64) (size, offset uint64, ok bool) {
	var tl tally
	defer tl.flush(cn)
	if c.IsKsymAddr(addr) {
		_, size, offset = c.getSymbolPos(addr, &tl)
		return size, offset, true
	}
	if m, sym, next := c.moduleAddressLookup(addr, &tl); m != nil {
		return next - sym.Addr, addr - sym.Addr, true
	}
	return 0, 0, false
}

// nameAt is get_symbol_offset(pos) + kallsyms_expand_symbol.
func (c *Compressed) nameAt(pos int, tl *tally) string {
	var buf [KsymNameLen]byte
	n, _ := c.expand(c.symbolOffset(pos, tl), &buf, tl)
	return string(buf[:n])
}

// KallsymsLookup models kallsyms_lookup (kallsyms_lookup_buildid without
// the build id): name, size, offset and module name ("" for vmlinux) of
// the symbol containing addr. BPF and ftrace trampolines are not modelled.
func (c *Compressed) KallsymsLookup(cn *sim.Counters, addr uint64) (name string, size, offset uint64, modname string, ok bool) {
	var tl tally
	defer tl.flush(cn)
	if c.IsKsymAddr(addr) {
		pos, size, offset := c.getSymbolPos(addr, &tl)
		return c.nameAt(pos, &tl), size, offset, "", true
	}
	if m, sym, next := c.moduleAddressLookup(addr, &tl); m != nil {
		return sym.Name, next - sym.Addr, addr - sym.Addr, m.Name, true
	}
	return "", 0, 0, "", false
}

// LookupSymbolName models lookup_symbol_name.
func (c *Compressed) LookupSymbolName(cn *sim.Counters, addr uint64) (string, bool) {
	var tl tally
	defer tl.flush(cn)
	if c.IsKsymAddr(addr) {
		pos, _, _ := c.getSymbolPos(addr, &tl)
		return c.nameAt(pos, &tl), true
	}
	if m, sym, _ := c.moduleAddressLookup(addr, &tl); m != nil {
		return sym.Name, true
	}
	return "", false
}

// SprintSymbol models sprint_symbol: "name+0x1f/0x40", " [mod]" appended
// for a module symbol, "0x<addr>" when nothing is found. Hex is the
// kernel's %#lx, which prints zero as 0x0.
func (c *Compressed) SprintSymbol(cn *sim.Counters, addr uint64) string {
	return c.sprint(cn, addr, 0, true)
}

// SprintSymbolNoOffset models sprint_symbol_no_offset: "name" or
// "name [mod]".
func (c *Compressed) SprintSymbolNoOffset(cn *sim.Counters, addr uint64) string {
	return c.sprint(cn, addr, 0, false)
}

// SprintBacktrace models sprint_backtrace: looks up addr-1 (a return
// address), prints the offset relative to addr.
func (c *Compressed) SprintBacktrace(cn *sim.Counters, addr uint64) string {
	return c.sprint(cn, addr, -1, true)
}

// sprint models __sprint_symbol(buf, address, symbol_offset, add_offset, 0).
func (c *Compressed) sprint(cn *sim.Counters, addr uint64, symOff int64, addOffset bool) string {
	a := addr + uint64(symOff)
	name, size, offset, mod, ok := c.KallsymsLookup(cn, a)
	if !ok {
		return fmt.Sprintf("0x%x", a-uint64(symOff))
	}
	offset -= uint64(symOff)
	var sb strings.Builder
	sb.WriteString(name)
	if addOffset {
		fmt.Fprintf(&sb, "+%#x/%#x", offset, size)
	}
	if mod != "" {
		sb.WriteString(" [")
		sb.WriteString(mod)
		sb.WriteString("]")
	}
	return sb.String()
}

// ModuleLookupName models kernel/module/kallsyms.c:
// module_kallsyms_lookup_name: "mod:name" scans only that module; a plain
// name scans every formed module, newest first, linearly.
func (c *Compressed) ModuleLookupName(cn *sim.Counters, name string) (uint64, bool) {
	var tl tally
	defer tl.flush(cn)
	name = cstr(name)
	lim := min(len(name), moduleNameLen)
	if i := strings.IndexByte(name[:lim], ':'); i >= 0 {
		for _, m := range c.mods {
			if m.State != image.ModuleUnformed && m.Name == name[:i] {
				return c.findSymbolValue(m, name[i+1:], &tl)
			}
		}
		return 0, false
	}
	for _, m := range c.mods {
		if m.State == image.ModuleUnformed {
			continue
		}
		if a, ok := c.findSymbolValue(m, name, &tl); ok {
			return a, true
		}
	}
	return 0, false
}

// findSymbolValue models find_kallsyms_symbol_value (0 means not found).
func (c *Compressed) findSymbolValue(m *image.Module, name string, tl *tally) (uint64, bool) {
	for _, s := range m.Symbols {
		tl.modSym++
		if s.Name == name {
			return s.Addr, s.Addr != 0
		}
	}
	return 0, false
}

// moduleAddressLookup models module_address_lookup → __module_address +
// find_kallsyms_symbol for the Compressed resolver: the shared scan
// (kallsyms.go), tallied.
func (c *Compressed) moduleAddressLookup(addr uint64, tl *tally) (*image.Module, *image.Symbol, uint64) {
	tl.modLookup++
	m, best, next, visited := moduleAddressLookup(c.mods, addr)
	tl.modSym += uint64(visited)
	return m, best, next
}

var _ Resolver = (*Compressed)(nil)
