package jumplabel

import (
	"bytes"
	"cmp"
	"slices"
	"sort"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// fastScan is simulator-side state that answers the linear core scan
// without walking it, with exactly the counts the walk would make. It is
// simulator work only (kpsim's "kernel work vs simulator work" rule):
// TestFastScanCountsMatchWalk proves the counts and answers identical.
//
// The walk over J entries in table order stops at the first conflict. When
// there is none, it visits all J entries and sizes every counted entry whose
// code is <= end; both numbers come from sorted arrays in O(log J). When
// there is a conflict, or a counted entry at or below end has bytes the
// size function rejects (the kernel's BUG), the real walk runs.
type fastScan struct {
	byCode []fastSite // every core entry, sorted by code
	// codes[init][mode] are the codes of the entries counted when init
	// sites count (init=1) or not (init=0), sorted.
	codes [2][]uint64
	// bad[init][sizeMode] is the lowest code of a counted entry whose bytes
	// the size function (0: decode, 1: opcode) rejects; ^0 if none.
	bad [2][2]uint64
}

type fastSite struct {
	code uint64
	init bool
	size [2]int8 // per size mode; 0 when rejected
}

// EnableFastScan turns on the simulator's fast path for the linear core
// scan, and sizes sites with x86.JumpEntrySizeSim instead of a decode. The
// caller promises that neither the text nor the tables change afterwards
// (scenario runs never patch text); tests that corrupt site bytes leave it
// off and exercise the literal walk.
func (t *Table) EnableFastScan() {
	t.scan = &fastScanner{f: t.sharedFastScan(), walk: coreWalk{t}, n: len(t.core), opcode: t.sw.Has(sim.JumpSizeOpcode)}
	t.sizeSite = memoSize(t.insn.JumpEntrySizeSim)
}

// sizeCache remembers a successful size computation together with the
// bytes it depended on (an instruction's length depends only on its own
// bytes). A hit replays the kernel's count instead of re-running the
// simulator's decoder: the count is identical, only simulator time is saved.
type sizeCache struct {
	n int8
	b [JumpLabelMaxSize]byte
}

// memoSize is the kernel's size computation (jumpEntrySize's) behind a
// memo per site and size mode: a hit on unchanged bytes replays the one
// count the computation makes (OpDecode or OpJumpSizeOpcode); a miss
// computes, with x86.JumpEntrySize under P3, else with decode: New passes
// the kernel's decode (x86.JumpEntrySizeDecode), EnableFastScan
// x86.JumpEntrySizeSim (the same answers and counts, the site encodings
// read from their bytes).
func memoSize(decode func(*sim.Counters, []byte) (int, error)) func(*sim.Counters, *site, bool) (int, error) {
	return func(c *sim.Counters, s *site, opcode bool) (int, error) {
		mode, op, size := 0, x86.OpDecode, decode
		if opcode {
			mode, op, size = 1, x86.OpJumpSizeOpcode, x86.JumpEntrySize
		}
		sc := &s.cache[mode]
		if sc.n != 0 && len(s.text) >= int(sc.n) && bytes.Equal(s.text[:sc.n], sc.b[:sc.n]) {
			c.Inc(op)
			return int(sc.n), nil
		}
		n, err := size(c, s.text)
		if err != nil {
			return 0, err
		}
		sc.n = int8(n)
		copy(sc.b[:], s.text[:n])
		return n, nil
	}
}

// fastScanner is the coreScanner EnableFastScan chooses: the fast scan's
// answer when it has one, else the walk.
type fastScanner struct {
	f      *fastScan
	walk   coreWalk
	n      int
	opcode bool
}

func (s *fastScanner) scanCore(c *sim.Counters, start, end uint64, init bool) (bool, error) {
	if s.f.scan(c, s.n, start, end, init, s.opcode) {
		return false, nil
	}
	return s.walk.scanCore(c, start, end, init)
}

// newFastScan builds the fast scan of core sites, sized by the image
// generation's decoder d.
func newFastScan(core []site, d *x86.Decoder) *fastScan {
	f := &fastScan{bad: [2][2]uint64{{^uint64(0), ^uint64(0)}, {^uint64(0), ^uint64(0)}}}
	f.byCode = make([]fastSite, 0, len(core))
	for i := range core {
		s := &core[i]
		fs := fastSite{code: s.code, init: s.init}
		if n, err := d.JumpEntrySizeSim(nil, s.text); err == nil {
			fs.size[0] = int8(n)
		}
		if n, err := x86.JumpEntrySize(nil, s.text); err == nil {
			fs.size[1] = int8(n)
		}
		f.byCode = append(f.byCode, fs)
		for init := 0; init < 2; init++ {
			if init == 0 && s.init {
				continue
			}
			for mode := 0; mode < 2; mode++ {
				if fs.size[mode] == 0 && s.code < f.bad[init][mode] {
					f.bad[init][mode] = s.code
				}
			}
		}
	}
	// Simulator-side sort (uncounted), once: the counted-code lists are
	// read off the sorted sites (slices' generic sort, without
	// sort.Slice's reflection; the three sorts were a tenth of a boot).
	slices.SortFunc(f.byCode, func(a, b fastSite) int { return cmp.Compare(a.code, b.code) })
	f.codes[1] = make([]uint64, 0, len(f.byCode))
	for _, fs := range f.byCode {
		f.codes[1] = append(f.codes[1], fs.code)
		if !fs.init {
			f.codes[0] = append(f.codes[0], fs.code)
		}
	}
	return f
}

// scan answers the core linear scan if it can; ok=false means: walk.
func (f *fastScan) scan(c *sim.Counters, n int, start, end uint64, init bool, opcode bool) (ok bool) {
	ii, mode := 0, 0
	if init {
		ii = 1
	}
	if opcode {
		mode = 1
	}
	if f.bad[ii][mode] <= end {
		return false
	}
	// Any counted entry with code in [start-4, end] that overlaps start?
	lo := uint64(0)
	if start >= JumpLabelMaxSize-1 {
		lo = start - (JumpLabelMaxSize - 1)
	}
	i := sort.Search(len(f.byCode), func(i int) bool { return f.byCode[i].code >= lo })
	for ; i < len(f.byCode) && f.byCode[i].code <= end; i++ {
		s := &f.byCode[i]
		if (init || !s.init) && s.code+uint64(s.size[mode]) > start {
			return false // a conflict: let the walk find the first in table order
		}
	}
	codes := f.codes[ii]
	sized := sort.Search(len(codes), func(i int) bool { return codes[i] > end })
	c.Add(OpScanEntry, uint64(n))
	if opcode {
		c.Add(x86.OpJumpSizeOpcode, uint64(sized))
	} else {
		c.Add(x86.OpDecode, uint64(sized))
	}
	return true
}
