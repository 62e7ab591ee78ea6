package synth

import (
	"math/rand/v2"
	"sort"

	"github.com/kpsim/kpsim/image"
)

// emitCtx is what differs between vmlinux and a module when emitting code.
type emitCtx struct {
	jkeys  []uint64
	jtrue  []bool
	init   bool
	module string
	salt   uint64
	tb     *tables
	// Per-worker scratch and output (one emitter goroutine each).
	items  []item
	offs   []uint32
	filler []item
	fixed  []item
	units  []unitRange
	pos    []int
	truth  *[]FuncTruth
}

// unitRange is a run of fixedItems emitted together (a site, a
// stac/access/clac triple, ...).
type unitRange struct{ a, b int }

func (g *gen) coreCtx(tb *tables, init bool) *emitCtx {
	return &emitCtx{jkeys: g.jkeys, jtrue: g.jkeyTrue, init: init, tb: tb}
}

func (g *gen) plain(b []byte) item {
	it := item{kind: itPlain, n: uint8(len(b)), site: -1}
	copy(it.b[:], b)
	return it
}

// emitFunc writes one function of exactly p.size bytes at p.addr and
// records its instruction starts and table entries. Each function draws
// from its own random stream (seed, index), so a function's bytes do not
// depend on how many numbers earlier functions drew.
func (g *gen) emitFunc(p *fplan, reg *image.Region, tb *tables, init bool, module string, idx int) {
	ctx := g.coreCtx(tb, init)
	ctx.module = module
	g.emitWith(p, reg, ctx, idx)
}

func (g *gen) emitWith(p *fplan, reg *image.Region, ctx *emitCtx, idx int) {
	rng := rand.New(rand.NewPCG(g.cfg.Seed^ctx.salt, uint64(idx)*0x9E3779B97F4A7C15+0x5851F42D4C957F2D))
	items := ctx.items[:0]

	// Entry: ENDBR64, the __fentry__ call, the prologue.
	entry := 0
	if g.cfg.IBT {
		items = append(items, g.plain(bENDBR64))
		entry += 4
	}
	if p.traced {
		it := item{kind: itCallAbs, n: 5, abs: g.fentry, site: -1, rec: recMcount}
		it.b[0] = opCALL
		items = append(items, it)
		entry += 5
	}
	for _, b := range prologues[p.frame] {
		items = append(items, g.plain(b))
	}

	// Fixed body units, inserted at random points among the filler.
	fixedItems, units := ctx.fixed[:0], ctx.units[:0]
	addUnit := func(its ...item) {
		units = append(units, unitRange{len(fixedItems), len(fixedItems) + len(its)})
		fixedItems = append(fixedItems, its...)
	}
	for i, s := range p.sites {
		var it item
		switch s.kind {
		case siteNOP2, siteNOP5, siteJMP8, siteJMP32:
			it = item{kind: itJL, n: uint8(s.kind.size()), site: i}
		case siteCall, siteTail:
			it = item{kind: itCallAbs, n: 5, abs: g.sct[s.key], site: i, rec: recStatic}
			it.b[0] = opCALL
			if s.kind == siteTail {
				it.kind, it.b[0] = itJmpAbs, opJMP32
			}
		case siteBug:
			it = g.plain(bUD2)
			it.site, it.rec = i, recBug
		}
		addUnit(it)
	}
	if p.uaccess {
		acc := g.plain(bUACCESS)
		acc.rec = recEx
		addUnit(g.plain(bSTAC), acc, g.plain(bCLAC))
	}
	if p.indirect {
		if g.cfg.Retpoline {
			it := item{kind: itJmpAbs, n: 5, abs: g.thunks[0], site: -1}
			it.b[0] = opJMP32
			addUnit(it)
		} else {
			addUnit(g.plain(bJMPRAX))
		}
	}
	if p.loop {
		it := item{kind: itLoop, n: 6, site: -1}
		it.b[0], it.b[1] = 0x0f, 0x85 // jne rel32
		addUnit(it)
	}

	// Filler: exactly the bytes left.
	filler := ctx.filler[:0]
	budget := p.size - g.minSize(p)
	for budget > 0 {
		r := rng.Float64()
		var it item
		switch {
		case r < 0.075 && budget >= 2:
			it = item{kind: itJccS, n: 2, site: -1}
			it.b[0] = 0x70 | byte(rng.IntN(16))
		case r < 0.10 && budget >= 6:
			it = item{kind: itJccN, n: 6, site: -1}
			it.b[0], it.b[1] = 0x0f, 0x80|byte(rng.IntN(16))
		case r < 0.115 && budget >= 2:
			it = item{kind: itJmpS, n: 2, site: -1}
			it.b[0] = opJMP8
		case r < 0.12 && budget >= 5:
			it = item{kind: itJmpN, n: 5, site: -1}
			it.b[0] = opJMP32
		case r < 0.17 && budget >= 5:
			it = item{kind: itCallAbs, n: 5, abs: g.callables[rng.IntN(len(g.callables))], site: -1}
			it.b[0] = opCALL
		case r < 0.18 && budget >= 5:
			if g.cfg.Retpoline {
				reg := rng.IntN(12)
				if reg == 4 {
					reg = 0
				}
				it = item{kind: itCallAbs, n: 5, abs: g.thunks[reg], site: -1}
				it.b[0] = opCALL
			} else {
				it = g.plain([]byte{0xff, 0xd0}) // call *%rax
			}
		default:
			n := pickLen(rng, budget)
			it = item{kind: itPlain, n: uint8(n), site: -1}
			emitPlain(rng, it.b[:n], n)
		}
		filler = append(filler, it)
		budget -= int(it.n)
	}
	pos := ctx.pos[:0]
	for range units {
		pos = append(pos, 0)
	}
	for i := range pos {
		pos[i] = rng.IntN(len(filler) + 1)
	}
	sort.Ints(pos)
	fi := 0
	for ui, u := range units {
		for ; fi < pos[ui]; fi++ {
			items = append(items, filler[fi])
		}
		items = append(items, fixedItems[u.a:u.b]...)
	}
	items = append(items, filler[fi:]...)

	if p.vzero {
		items = append(items, g.plain(bVZU))
	}
	epiIdx := len(items)
	for _, b := range epilogues[p.frame] {
		items = append(items, g.plain(b))
	}
	ret := g.retSeq()
	if ret[0] == opJMP32 {
		it := item{kind: itJmpAbs, n: 5, abs: g.retThunk, site: -1}
		it.b[0] = opJMP32
		items = append(items, it)
	} else {
		for i := range ret {
			items = append(items, g.plain(ret[i:i+1]))
		}
	}
	coldIdx := -1
	if g.needsCold(p) {
		coldIdx = len(items)
		items = append(items, g.plain(bCOLD))
		it := item{kind: itColdJmp, n: 5, site: -1}
		it.b[0] = opJMP32
		items = append(items, it)
	}

	// Lay out, then resolve branch targets to instruction boundaries.
	offs := ctx.offs[:0]
	off := 0
	for i := range items {
		offs = append(offs, uint32(off))
		off += int(items[i].n)
	}
	if off != p.size {
		panic("synth: function size bookkeeping is off") // a generator bug, never input
	}
	base := p.addr
	buf := reg.Bytes[base-reg.Start : base-reg.Start+uint64(p.size)]
	epiOff := uint64(offs[epiIdx])
	var coldOff uint64
	if coldIdx >= 0 {
		coldOff = uint64(offs[coldIdx])
	}
	// pickIn returns a random boundary offset in [lo, hi] other than self, or -1.
	pickIn := func(lo, hi int, self uint32) int {
		if lo < 0 {
			lo = 0
		}
		a := sort.Search(len(offs), func(i int) bool { return int(offs[i]) >= lo })
		b := sort.Search(len(offs), func(i int) bool { return int(offs[i]) > hi })
		if b-a <= 0 || (b-a == 1 && offs[a] == self) {
			return -1
		}
		for {
			c := offs[a+rng.IntN(b-a)]
			if c != self {
				return int(c)
			}
		}
	}
	loop := false
	for i := range items {
		it := &items[i]
		o := offs[i]
		a := base + uint64(o)
		next := int(o) + int(it.n)
		d := buf[o : o+uint32(it.n)]
		copy(d, it.b[:it.n])
		switch it.kind {
		case itJccS, itJmpS:
			t := -1
			if rng.IntN(10) < 7 {
				t = pickIn(next, next+127, o)
			}
			if t < 0 {
				t = pickIn(next-128, next+127, o)
			}
			if t < 0 {
				t = next
			}
			d[1] = byte(int8(t - next))
		case itJccN, itJmpN:
			t := pickIn(0, p.size-1, o)
			if t < 0 {
				t = next
			}
			putRel32(d[len(d)-4:], a+uint64(it.n), base+uint64(t))
		case itLoop:
			t := pickIn(entry+1, entry+5, o)
			if t < 0 {
				t = pickIn(1, 12, o)
			}
			if t < 0 {
				t = next
			} else {
				loop = true
			}
			putRel32(d[2:], a+6, base+uint64(t))
		case itCallAbs, itJmpAbs:
			putRel32(d[1:], a+5, it.abs)
		case itColdJmp:
			putRel32(d[1:], a+5, base+epiOff)
		case itJL:
			s := p.sites[it.site]
			var tgt uint64
			switch s.kind {
			case siteNOP2, siteJMP8:
				t := pickIn(next, next+127, o)
				if t < 0 {
					t = next
				}
				tgt = base + uint64(t)
				if s.kind == siteNOP2 {
					copy(d, bNOP2)
				} else {
					d[0], d[1] = opJMP8, byte(int8(t-next))
				}
			default:
				tgt = base + coldOff
				if s.kind == siteNOP5 {
					copy(d, bNOP5)
				} else {
					d[0] = opJMP32
					putRel32(d[1:], a+5, tgt)
				}
			}
			ctx.tb.jump = append(ctx.tb.jump, image.JumpEntry{Code: a, Target: tgt, Key: ctx.jkeys[s.key], Branch: ctx.jtrue[s.key], Init: ctx.init})
		}
		switch it.rec {
		case recMcount:
			ctx.tb.mcount = append(ctx.tb.mcount, a)
		case recStatic:
			s := p.sites[it.site]
			ctx.tb.static = append(ctx.tb.static, image.StaticCallSite{Addr: a, Key: g.sck[s.key], Tail: s.kind == siteTail, Init: ctx.init})
		case recBug:
			ctx.tb.bugs = append(ctx.tb.bugs, image.BugEntry{Addr: a, File: srcFiles[rng.IntN(len(srcFiles))],
				Line: uint16(1 + rng.IntN(4000)), Flags: bugFlags(rng)})
		case recEx:
			ctx.tb.ex = append(ctx.tb.ex, image.ExEntry{Insn: a, Fixup: base + coldOff})
		}
	}
	sink := &g.truth.Funcs
	if ctx.truth != nil {
		sink = ctx.truth
	}
	ft := FuncTruth{
		Name: p.name, Addr: p.addr, Size: uint32(p.size), Module: ctx.module, Zone: p.zone,
		Insns: append([]uint32(nil), offs...), Traced: p.traced, LoopToEntry: loop,
	}
	padAfter(&ft, reg, p.pad, p.fill)
	*sink = append(*sink, ft)
	ctx.items, ctx.offs = items, offs
	ctx.filler, ctx.fixed, ctx.units, ctx.pos = filler, fixedItems, units, pos
}

// bugFlags: most entries are WARN()s (BUGFLAG_WARNING), many WARN_ONCE.
func bugFlags(rng *rand.Rand) uint16 {
	switch r := rng.IntN(10); {
	case r < 2:
		return 0 // BUG()
	case r < 6:
		return 1 // BUGFLAG_WARNING
	default:
		return 1 | 2 // BUGFLAG_WARNING | BUGFLAG_ONCE
	}
}
