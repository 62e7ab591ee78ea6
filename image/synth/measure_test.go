package synth

import (
	"fmt"
	"math"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// proportions are the figures a generator profile (Config) is fitted to,
// measured the same way on a real image (the text as built: load with
// CPU none) and on a generated one.
type proportions struct {
	// Core counts the core-text functions as the loader's IBT vote does
	// (text symbols in [_stext, _etext) with a size, __pfx_/__cfi_
	// excluded; __SCT__ trampolines and the thunks included); Init the
	// init-text functions.
	Core, Init int
	// Pfx counts __pfx_ symbols; PfxBefore the core functions with one
	// 16 bytes before them.
	Pfx, PfxBefore int
	// ENDBR counts core functions starting with ENDBR64.
	ENDBR int
	// Sizes of the core functions as kallsyms_lookup_size_offset has
	// them, the distance to the next symbol (what a kallsyms-only image's
	// loader records; a generated image's symbols have the emitted size,
	// without the padding after it): median, log-normal shape fitted to
	// p50 and p90 (ln(p90/p50)/1.2816), largest.
	SizeMedian int
	SizeSigma  float64
	SizeMax    int
	Jump       int
	JumpKeys   int
	// JumpMix: NOP2, NOP5, JMP8, JMP32 as assembled, percent.
	JumpMix                [4]float64
	JumpBranch             float64 // percent of entries with the branch bit
	Static, StaticKeys     int
	StaticTail             float64 // percent
	Bug, Ex, Black, Mcount int
	Traced                 float64 // Mcount / Core, percent
	Entry, IRQEntry        int     // functions in __entry_text (outside __irqentry_text), __irqentry_text
	Noinstr, Kprobes       int
}

func (p proportions) String() string {
	return fmt.Sprintf("core %d init %d pfx %d (before %d) endbr %d size median %d sigma %.2f max %d; jump %d keys %d mix %.1f/%.1f/%.1f/%.1f branch %.1f%%; static %d keys %d tail %.1f%%; bug %d ex %d blacklist %d mcount %d traced %.1f%%; entry %d irqentry %d noinstr %d kprobes %d",
		p.Core, p.Init, p.Pfx, p.PfxBefore, p.ENDBR, p.SizeMedian, p.SizeSigma, p.SizeMax,
		p.Jump, p.JumpKeys, p.JumpMix[0], p.JumpMix[1], p.JumpMix[2], p.JumpMix[3], p.JumpBranch,
		p.Static, p.StaticKeys, p.StaticTail, p.Bug, p.Ex, p.Black, p.Mcount, p.Traced,
		p.Entry, p.IRQEntry, p.Noinstr, p.Kprobes)
}

func measure(k *image.Kernel) proportions {
	var p proportions
	core, init := k.CoreText(), k.InitText()
	pfx := map[uint64]bool{}
	var sizes []float64
	var coreFuncs []image.Symbol
	for _, s := range k.Symbols {
		if !s.IsText() {
			continue
		}
		if s.IsPadding() {
			if s.Name[:6] == "__pfx_" {
				p.Pfx++
				pfx[s.Addr+16] = true
			}
			continue
		}
		if s.Size == 0 {
			continue
		}
		switch {
		case core != nil && core.Contains(s.Addr):
			p.Core++
			coreFuncs = append(coreFuncs, s)
			sizes = append(sizes, float64(s.Size))
			if b := k.Text(s.Addr, 4); len(b) == 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa {
				p.ENDBR++
			}
		case init != nil && init.Contains(s.Addr):
			p.Init++
		}
	}
	for _, s := range coreFuncs {
		if pfx[s.Addr] {
			p.PfxBefore++
		}
	}
	// Next-symbol distances.
	var addrs []uint64
	for _, s := range k.Symbols {
		if core != nil && core.Contains(s.Addr) {
			addrs = append(addrs, s.Addr)
		}
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for i, s := range coreFuncs {
		j := sort.Search(len(addrs), func(j int) bool { return addrs[j] > s.Addr })
		if j < len(addrs) {
			// A loader caps a distance at trailing padding (its Size);
			// a generated function is followed by at most its alignment
			// gap and the next one's call padding.
			sizes[i] = float64(min(addrs[j]-s.Addr, s.Size+2*funcAlign))
		}
	}
	sort.Float64s(sizes)
	if n := len(sizes); n > 0 {
		q := func(f float64) float64 { return sizes[int(f*float64(n-1))] }
		p.SizeMedian, p.SizeMax = int(q(.5)), int(sizes[n-1])
		p.SizeSigma = math.Log(q(.9)/q(.5)) / 1.2816
	}
	p.Jump = len(k.JumpEntries)
	keys := map[uint64]bool{}
	branch := 0
	for _, e := range k.JumpEntries {
		keys[e.Key] = true
		if e.Branch {
			branch++
		}
		b := k.Text(e.Code, 5)
		switch {
		case len(b) > 0 && b[0] == 0xeb:
			p.JumpMix[2]++
		case len(b) > 0 && b[0] == 0xe9:
			p.JumpMix[3]++
		default:
			if in, err := x86.Decode(nil, b); err == nil && in.Len == 2 {
				p.JumpMix[0]++
			} else {
				p.JumpMix[1]++
			}
		}
	}
	p.JumpKeys = len(keys)
	if p.Jump > 0 {
		for i := range p.JumpMix {
			p.JumpMix[i] = 100 * p.JumpMix[i] / float64(p.Jump)
		}
		p.JumpBranch = 100 * float64(branch) / float64(p.Jump)
	}
	p.Static = len(k.StaticCallSites)
	skeys := map[uint64]bool{}
	tail := 0
	for _, s := range k.StaticCallSites {
		skeys[s.Key] = true
		if s.Tail {
			tail++
		}
	}
	p.StaticKeys = len(skeys)
	if p.Static > 0 {
		p.StaticTail = 100 * float64(tail) / float64(p.Static)
	}
	p.Bug, p.Ex, p.Black, p.Mcount = len(k.BugEntries), len(k.ExTable), len(k.Blacklist), len(k.McountLocs)
	if p.Core > 0 {
		p.Traced = 100 * float64(p.Mcount) / float64(p.Core)
	}
	in := func(name string) int {
		r, ok := k.Range(name)
		if !ok {
			return 0
		}
		n := 0
		for _, s := range coreFuncs {
			if s.Addr >= r.Start && s.Addr < r.End {
				n++
			}
		}
		return n
	}
	// __irqentry_text lies inside the entry text (the generator's
	// EntryFunctions are the entry text's others).
	p.Entry, p.IRQEntry = in(image.RangeEntryText), in(image.RangeIRQEntryText)
	if e, ok := k.Range(image.RangeEntryText); ok {
		if i, ok := k.Range(image.RangeIRQEntryText); ok && i.Start >= e.Start && i.End <= e.End {
			p.Entry -= p.IRQEntry
		}
	}
	p.Noinstr, p.Kprobes = in(image.RangeNoinstrText), in(image.RangeKprobesText)
	return p
}
