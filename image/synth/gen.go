// Package synth fills an image.Kernel with a deterministic synthetic x86-64
// kernel: real machine code (so x86asm decodes it), function symbols, the
// jump-label, static-call, bug and exception tables, the kprobe blacklist
// and its section ranges, __mcount_loc, and a few modules, all from a seed.
package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// Address layout (x86-64, no KASLR): core text at the kernel's link
// address, modules in the module area.
const (
	TextBase   = 0xffffffff81000000
	ModuleBase = 0xffffffffc0000000
	moduleSpan = 0x200000
	funcAlign  = 16
	// gapAfterText leaves room after _etext for probe targets added later
	// (AddProbeTargets), before the data that holds the keys.
	gapAfterText = 32 << 20
)

// Zone says which part of the text a function lives in.
type Zone uint8

const (
	ZoneMain Zone = iota
	ZoneEntry
	ZoneIRQEntry
	ZoneSoftIRQEntry
	ZoneNoinstr
	ZoneKprobes
	ZoneThunk
	ZoneTrampoline
	ZoneInit
	ZoneModule
	ZoneModuleInit
	ZoneProbeTarget
)

var zoneNames = [...]string{"main", "entry", "irqentry", "softirqentry", "noinstr", "kprobes", "thunk", "trampoline", "init", "module", "module-init", "probe-target"}

func (z Zone) String() string { return zoneNames[z] }

// FuncTruth is what the generator emitted for one function: the ground
// truth a decoder must recover.
type FuncTruth struct {
	Name   string
	Addr   uint64
	Size   uint32
	Module string
	Zone   Zone
	// Insns holds the offset of every instruction start, ascending.
	Insns []uint32
	// Traced: a __fentry__ call follows the ENDBR.
	Traced bool
	// LoopToEntry: a branch targets the bytes just after the entry probe point.
	LoopToEntry bool
	// Pad is the gap after the function (Size .. Size+Pad) up to the next
	// function's alignment, Fill what fills it, and PadInsns the offsets
	// (from Addr, like Insns) of the padding instructions a decoder walking
	// to the next symbol meets. Fixed asm functions (thunks, __fentry__,
	// trampolines) leave Fill at FillNone: their gaps are the linker's int3.
	Pad      uint32
	Fill     Fill
	PadInsns []uint32
}

// Truth lists every generated function in emission order.
type Truth struct {
	Funcs []FuncTruth
}

type siteKind uint8

const (
	siteNOP2 siteKind = iota
	siteNOP5
	siteJMP8
	siteJMP32
	siteCall // static call
	siteTail // static tail call
	siteBug
)

func (k siteKind) size() int {
	switch k {
	case siteNOP2, siteJMP8, siteBug:
		return 2
	}
	return 5
}

type site struct {
	kind siteKind
	key  int // jump key or static-call key index
}

type fplan struct {
	name     string
	typ      image.SymType
	zone     zone
	size     int
	addr     uint64
	traced   bool
	uaccess  bool
	loop     bool
	indirect bool
	vzero    bool
	frame    int
	sites    []site
	// pfx: CONFIG_CALL_PADDING's 16 NOPs (__pfx_<name>) precede addr.
	pfx bool
	// objEnd: the last function of its object; fill and pad describe the
	// gap after it, set at layout.
	objEnd bool
	fill   Fill
	pad    int
}

type zone = Zone

// Frame variants: prologue / epilogue instructions (push %rbp; mov
// %rsp,%rbp; callee-saved pushes; stack frame), mirrored on the way out.
var (
	prologues = [][][]byte{nil,
		{{0x55}, {0x48, 0x89, 0xe5}},
		{{0x55}, {0x48, 0x89, 0xe5}, {0x53}},
		{{0x55}, {0x48, 0x89, 0xe5}, {0x41, 0x54}, {0x53}},
		{{0x55}, {0x48, 0x89, 0xe5}, {0x41, 0x54}, {0x53}, {0x48, 0x83, 0xec, 0x18}}}
	epilogues = [][][]byte{nil,
		{{0x5d}},
		{{0x5b}, {0x5d}},
		{{0x5b}, {0x41, 0x5c}, {0x5d}},
		{{0x48, 0x83, 0xc4, 0x18}, {0x5b}, {0x41, 0x5c}, {0x5d}}}
)

func insnBytes(list [][]byte) int {
	n := 0
	for _, b := range list {
		n += len(b)
	}
	return n
}

type gen struct {
	cfg   Config
	k     *image.Kernel
	truth *Truth
	nm    *namer
	rng   *rand.Rand

	fentry    uint64
	retThunk  uint64
	thunks    []uint64 // __x86_indirect_thunk_<reg>, by reg number (rsp excluded)
	sct       []uint64 // __SCT__ trampoline per static-call key
	sck       []uint64 // __SCK__ key address per static-call key
	jkeys     []uint64 // core jump keys
	jkeyTrue  []bool
	callables []uint64 // core functions other code may call

}

type itemKind uint8

const (
	itPlain itemKind = iota
	itJccS
	itJccN
	itJmpS
	itJmpN
	itLoop
	itCallAbs
	itJmpAbs
	itJL
	itColdJmp
)

type item struct {
	kind itemKind
	n    uint8
	b    [15]byte
	abs  uint64 // absolute target for itCallAbs / itJmpAbs
	site int    // index into the plan's sites for itJL; -1 otherwise
	rec  uint8  // what to record: recNone, recMcount, recStatic, recBug, recEx
}

const (
	recNone uint8 = iota
	recMcount
	recStatic
	recBug
	recEx
)

// Generate builds a synthetic kernel from cfg.
func Generate(cfg Config) (*image.Kernel, *Truth, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	g := &gen{
		cfg:   cfg,
		truth: &Truth{},
		rng:   sim.NewRNG(cfg.Seed, "image.synth"),
	}
	g.nm = newNamer(sim.NewRNG(cfg.Seed, "image.synth.names"))
	g.k = &image.Kernel{
		Name: fmt.Sprintf("synthetic seed=%d", cfg.Seed),
		Config: image.Config{
			IBT: cfg.IBT, Retpoline: cfg.Retpoline, RetThunk: cfg.RetThunk,
			ReturnsPatched: cfg.ReturnsPatched, KprobesOnFtrace: true, BugVerbose: true,
			Gen: cfg.Gen, // a synthetic image has no release (Version "")
		},
	}
	if cfg.CallPadding {
		g.k.Config.CallPadding, g.k.Config.FunctionAlignment = true, funcAlign
	}
	if cfg.CallPadding || cfg.Gen.AtLeast(image.Gen612) {
		// The build facts of a post-6.2 image, named as a loaded image
		// names them, whatever flags turned off (6.1 images keep none,
		// as before generations).
		yn := func(b bool) string {
			if b {
				return "y"
			}
			return "n"
		}
		facts := [][2]string{{"CONFIG_X86_KERNEL_IBT", yn(cfg.IBT)}, {"CONFIG_CALL_PADDING", yn(cfg.CallPadding)}}
		if cfg.CallPadding {
			facts = append(facts, [2]string{"CONFIG_FUNCTION_ALIGNMENT", "16"})
		}
		facts = append(facts, [2]string{"CONFIG_RETPOLINE", yn(cfg.Retpoline)}, [2]string{"CONFIG_RETHUNK", yn(cfg.RetThunk)})
		for _, f := range facts {
			g.k.Config.Facts = append(g.k.Config.Facts, image.ConfigFact{Option: f[0], Value: f[1], From: "generator"})
		}
	}
	if cfg.Padding == PaddingInt3 {
		g.k.Name += " padding=int3" // a counterfactual: say so wherever the image is named
	}
	if err := g.build(); err != nil {
		return nil, nil, err
	}
	if cfg.ProbeTargets > 0 && cfg.ProbeTargetsAt >= 1 {
		if _, err := addProbeTargets(g.k, g.truth, cfg.ProbeTargets, cfg.ProbeTargetsTraced, cfg.Padding); err != nil {
			return nil, nil, err
		}
	}
	return g.k, g.truth, nil
}

func (g *gen) build() error {
	cfg := &g.cfg
	k := g.k

	// 1. Plan the core functions zone by zone, and init text.
	var core []*fplan
	addZone := func(n int, z Zone, names []string, typ image.SymType) {
		for i := 0; i < n; i++ {
			var name string
			if i < len(names) {
				name = g.nm.fixed(names[i])
			} else {
				name = g.nm.name(cfg.DupNamePercent, cfg.ClonePercent)
			}
			core = append(core, &fplan{name: name, typ: typ, zone: z, size: g.drawSize()})
		}
	}
	special := cfg.EntryFunctions + cfg.IRQEntryFunctions + 1 + cfg.NoinstrFunctions + cfg.KprobesTextFunctions
	addZone(cfg.EntryFunctions, ZoneEntry, entryNames, 'T')
	addZone(cfg.IRQEntryFunctions, ZoneIRQEntry, irqEntryNames, 'T')
	addZone(1, ZoneSoftIRQEntry, []string{"__do_softirq"}, 'T')
	addZone(cfg.NoinstrFunctions, ZoneNoinstr, noinstrNames, 'T')
	addZone(cfg.KprobesTextFunctions, ZoneKprobes, kprobesNames, 't')
	mainStart := len(core)
	for i := 0; i < cfg.Functions-special; i++ {
		typ := image.SymType('T')
		name := g.nm.name(cfg.DupNamePercent, cfg.ClonePercent)
		if g.rng.IntN(100) < 35 || isDotted(name) || isCommonStatic(name) {
			typ = 't'
		}
		core = append(core, &fplan{name: name, typ: typ, zone: ZoneMain, size: g.drawSize()})
	}
	var initf []*fplan
	for i := 0; i < cfg.InitFunctions; i++ {
		initf = append(initf, &fplan{name: g.nm.fresh() + "_init", typ: 't', zone: ZoneInit, size: g.drawSize()})
	}

	// Per-function attributes (drawn before sites so the capacity check
	// sees the final shapes).
	for _, p := range append(append([]*fplan{}, core...), initf...) {
		g.drawAttrs(p)
	}

	// 2. Keys, then sites over main + init functions, weighted by size.
	g.jkeys, g.jkeyTrue = g.newKeys(cfg.JumpKeys)
	nSCKeys := cfg.StaticCallKeys
	hosts := append(append([]*fplan{}, core[mainStart:]...), initf...)
	if err := g.assignSites(hosts, cfg.JumpEntries, cfg.StaticCallSites, cfg.BugEntries, cfg.JumpKeys, nSCKeys, ""); err != nil {
		return err
	}

	// 3. Lay out core text: zones, then thunks, __fentry__, trampolines.
	addr := uint64(TextBase)
	var ranges []image.Range
	zoneStart := map[Zone]uint64{}
	zoneEnd := map[Zone]uint64{}
	// Probe targets placed inside .text (ProbeTargetsAt < 1) come after
	// that fraction of the ordinary functions, as the sample's object
	// sits in the link order.
	insertAt := -1
	var tbody *targetBody
	var tgtAddrs []uint64
	if cfg.ProbeTargets > 0 && cfg.ProbeTargetsAt < 1 {
		insertAt = mainStart + int(cfg.ProbeTargetsAt*float64(len(core)-mainStart))
		tbody = newTargetBody(cfg.IBT, cfg.ProbeTargetsTraced, cfg.RetThunk, cfg.ReturnsPatched)
	}
	// Objects: each zone is its own set of input sections (.entry.text,
	// .noinstr.text, ...), so a zone change ends an object, and so does
	// the sample's object (kprobes_many.o) wherever it sits.
	ends := g.objectEnds(len(core), sim.NewRNG(cfg.Seed, "image.synth.objects"))
	for i, p := range core {
		p.objEnd = ends[i] || i == len(core)-1 || core[i+1].zone != p.zone || i+1 == insertAt
	}
	for idx, p := range core {
		if idx == insertAt {
			for i := 0; i < cfg.ProbeTargets; i++ {
				addr += g.prefix()
				tgtAddrs = append(tgtAddrs, addr)
				addr = alignUp(addr+uint64(len(tbody.code)), funcAlign)
			}
		}
		p.size = max(p.size, g.minSize(p))
		if _, ok := zoneStart[p.zone]; !ok {
			zoneStart[p.zone] = addr
		}
		addr += g.padBefore(p)
		p.addr = addr
		addr = alignUp(addr+uint64(p.size), funcAlign)
		p.pad, p.fill = int(addr-p.addr)-p.size, padFill(cfg.Padding, p.objEnd, FillLinkerINT3)
		zoneEnd[p.zone] = addr
	}
	for _, z := range []struct {
		zone Zone
		name string
	}{{ZoneEntry, image.RangeEntryText}, {ZoneIRQEntry, image.RangeIRQEntryText},
		{ZoneSoftIRQEntry, image.RangeSoftIRQEntryText}, {ZoneNoinstr, image.RangeNoinstrText},
		{ZoneKprobes, image.RangeKprobesText}} {
		if s, ok := zoneStart[z.zone]; ok {
			ranges = append(ranges, image.Range{Name: z.name, Start: s, End: zoneEnd[z.zone]})
		}
	}

	// Thunk zone: __indirect_thunk_start .. __indirect_thunk_end holds the
	// retpoline thunks and (6.1 linker script) .text..__x86.return_thunk.
	type fixedFn struct {
		name string
		zone Zone
		addr uint64
		code []byte
		offs []uint32
	}
	var fixed []*fixedFn
	thunkStart := addr
	g.thunks = make([]uint64, 16)
	for r := 0; r < 16; r++ {
		if r == 4 { // no thunk for %rsp
			continue
		}
		f := &fixedFn{name: "__x86_indirect_thunk_" + regNames[r], zone: ZoneThunk, addr: addr}
		f.code, f.offs = retpolineThunk(r)
		g.thunks[r] = addr
		fixed = append(fixed, f)
		addr = alignUp(addr+uint64(len(f.code)), 32)
	}
	g.retThunk = addr
	fixed = append(fixed, &fixedFn{name: "__x86_return_thunk", zone: ZoneThunk, addr: addr, code: []byte{0xc3, 0xcc}, offs: []uint32{0, 1}})
	addr = alignUp(addr+2, 64)
	ranges = append(ranges, image.Range{Name: image.RangeIndirectThunk, Start: thunkStart, End: addr})
	g.fentry = addr
	fixed = append(fixed, &fixedFn{name: "__fentry__", zone: ZoneMain, addr: addr})
	addr = alignUp(addr+uint64(len(g.retSeq())), funcAlign)
	g.sct = make([]uint64, nSCKeys)
	for i := range g.sct {
		g.sct[i] = addr
		addr += 16
	}
	etext := addr

	// Callable functions: main-zone core functions.
	for _, p := range core[mainStart:] {
		g.callables = append(g.callables, p.addr)
	}

	// Data: static keys and static-call keys, in shuffled order.
	dataBase := alignUp(etext+gapAfterText, 2<<20)
	nData := len(g.jkeys) + nSCKeys
	perm := g.rng.Perm(max(nData, 1))
	var dataSyms []image.Symbol
	keyNames := newNamer(sim.NewRNG(cfg.Seed, "image.synth.keys"))
	for i := range g.jkeys {
		g.jkeys[i] = dataBase + uint64(perm[i])*16
		dataSyms = append(dataSyms, image.Symbol{Name: keyNames.fresh() + "_key", Addr: g.jkeys[i], Size: 16, Type: 'd'})
	}
	g.sck = make([]uint64, nSCKeys)
	sctNames := make([]string, nSCKeys)
	for i := range g.sck {
		g.sck[i] = dataBase + uint64(perm[len(g.jkeys)+i])*16
		sctNames[i] = staticCallName(keyNames, i)
		dataSyms = append(dataSyms, image.Symbol{Name: "__SCK__" + sctNames[i], Addr: g.sck[i], Size: 16, Type: 'D'})
	}
	initBase := alignUp(dataBase+uint64(nData)*16+(1<<20), 2<<20)

	// Init text layout: __init functions are __cold, which gcc does not
	// align, so they follow each other without gaps.
	iaddr := initBase
	for i, p := range initf {
		p.size = max(p.size, g.minSize(p))
		iaddr += g.padBefore(p)
		p.addr = iaddr
		iaddr += uint64(p.size)
		if cfg.CallPadding && i+1 < len(initf) {
			// With call padding the __init functions are 16-byte
			// aligned: gas NOPs up to the next one's padding.
			next := alignUp(iaddr, funcAlign)
			p.pad, p.fill = int(next-iaddr), padFill(cfg.Padding, false, FillLinkerINT3)
			iaddr = next
		}
	}

	// 4. Emit core text. The region starts as int3, the linker's fill:
	// what no function and no gas padding overwrites (gaps between
	// objects, the asm thunks' .align) stays int3.
	coreReg := &image.Region{Name: ".text", Kind: image.CoreText, Start: TextBase, Bytes: make([]byte, etext-TextBase)}
	fill(coreReg.Bytes, opINT3)
	initReg := &image.Region{Name: ".init.text", Kind: image.InitText, Start: initBase, Bytes: make([]byte, iaddr-initBase)}
	fill(initReg.Bytes, opINT3)
	k.Regions = []*image.Region{coreReg, initReg}

	tb := &tables{}
	g.emitParallel(core, coreReg, tb)
	for i, p := range initf {
		g.emitFunc(p, initReg, tb, true, "", len(core)+i)
	}
	pfxSyms := g.writePrefixes(coreReg, core)
	pfxSyms = append(pfxSyms, g.writePrefixes(initReg, initf)...)
	counter := dataBase + uint64(nData)*16 // the targets' counter word
	for i, a := range tgtAddrs {
		if n := g.prefix(); n > 0 {
			pfx := image.Symbol{Name: PfxName(ProbeTargetName(i)), Addr: a - n, Size: n, Type: 't'}
			fill(coreReg.Bytes[pfx.Addr-TextBase:a-TextBase], opNOP)
			pfxSyms = append(pfxSyms, pfx)
			g.truth.Funcs = append(g.truth.Funcs, pfxTruth(pfx))
		}
		if mc, ok := tbody.write(coreReg.Bytes[a-TextBase:], a, g.fentry, g.retThunk, counter); ok {
			tb.mcount = append(tb.mcount, mc)
		}
		g.truth.Funcs = append(g.truth.Funcs, tbody.pad(coreReg, ProbeTargetName(i), a, padFill(cfg.Padding, i == len(tgtAddrs)-1, FillLinkerINT3)))
	}
	for _, f := range fixed {
		if f.name == "__fentry__" {
			f.code = g.retSeq()
			f.offs = retOffs(f.code)
		}
		copy(coreReg.Bytes[f.addr-TextBase:], f.code)
		g.truth.Funcs = append(g.truth.Funcs, FuncTruth{Name: f.name, Addr: f.addr, Size: uint32(len(f.code)), Zone: f.zone, Insns: f.offs})
	}
	// Static-call trampolines: jmp <current target>; ud1 %esp,%ecx (the
	// trampoline signature, arch/x86/kernel/static_call.c).
	for i, a := range g.sct {
		tgt := g.callables[g.rng.IntN(len(g.callables))]
		b := coreReg.Bytes[a-TextBase:]
		b[0] = opJMP32
		putRel32(b[1:], a+5, tgt)
		copy(b[5:], []byte{0x0f, 0xb9, 0xcc})
		g.truth.Funcs = append(g.truth.Funcs, FuncTruth{Name: "__SCT__" + sctNames[i], Addr: a, Size: 8, Zone: ZoneTrampoline, Insns: []uint32{0, 5}})
	}

	// 5. Symbols. Linker-provided markers (_stext, __entry_text_start, ...)
	// go after the function at the same address: scripts/kallsyms.c ranks
	// them last among equal addresses (may_be_linker_script_provide_symbol).
	var syms, marks []image.Symbol
	mark := func(name string, a uint64) { marks = append(marks, image.Symbol{Name: name, Addr: a, Type: 'T'}) }
	mark("_stext", TextBase)
	for _, r := range ranges {
		mark(r.Name+"_start", r.Start)
		mark(r.Name+"_end", r.End)
	}
	for _, p := range core {
		syms = append(syms, image.Symbol{Name: p.name, Addr: p.addr, Size: uint64(p.size), Type: p.typ})
	}
	for _, f := range fixed {
		syms = append(syms, image.Symbol{Name: f.name, Addr: f.addr, Size: uint64(len(f.code)), Type: 'T'})
	}
	for i, a := range tgtAddrs {
		syms = append(syms, image.Symbol{Name: ProbeTargetName(i), Addr: a, Size: uint64(len(tbody.code)), Type: 't'})
	}
	for i, a := range g.sct {
		syms = append(syms, image.Symbol{Name: "__SCT__" + sctNames[i], Addr: a, Size: 8, Type: 'T'})
	}
	mark("_etext", etext)
	syms = append(syms, dataSyms...)
	mark("_sinittext", initBase)
	for _, p := range initf {
		syms = append(syms, image.Symbol{Name: p.name, Addr: p.addr, Size: uint64(p.size), Type: p.typ})
	}
	mark("_einittext", iaddr)
	syms = append(syms, pfxSyms...)
	syms = append(syms, marks...)
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].Addr < syms[j].Addr })
	k.Symbols = syms
	k.Ranges = ranges

	// 6. Tables, in the order the running kernel holds them.
	lib.SortJumpEntries(tb.jump)
	lib.SortStaticCallSites(tb.static)
	sort.Slice(tb.ex, func(i, j int) bool { return tb.ex[i].Insn < tb.ex[j].Insn }) // sort_main_extable
	sort.Slice(tb.mcount, func(i, j int) bool { return tb.mcount[i] < tb.mcount[j] })
	k.JumpEntries, k.StaticCallSites, k.BugEntries, k.ExTable, k.McountLocs = tb.jump, tb.static, tb.bugs, tb.ex, tb.mcount

	// NOKPROBE_SYMBOL table: link order (address order) over a random
	// choice of main functions.
	idx := g.rng.Perm(len(core) - mainStart)[:cfg.Blacklist]
	sort.Ints(idx)
	for _, i := range idx {
		k.Blacklist = append(k.Blacklist, core[mainStart+i].addr)
	}

	// 7. Modules.
	for m := 0; m < cfg.Modules; m++ {
		if err := g.buildModule(m); err != nil {
			return err
		}
	}
	return nil
}

// emitParallel emits the core functions on two goroutines over contiguous
// halves and merges their tables and truth in order: every function draws
// from its own (seed, index) stream and writes its own bytes, so the
// result is identical to a sequential pass (TestDeterministic).
func (g *gen) emitParallel(core []*fplan, reg *image.Region, tb *tables) {
	const workers = 2
	var wg sync.WaitGroup
	parts := make([]struct {
		tb    tables
		truth []FuncTruth
	}, workers)
	for w := 0; w < workers; w++ {
		lo, hi := w*len(core)/workers, (w+1)*len(core)/workers
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			ctx := g.coreCtx(&parts[w].tb, false)
			ctx.truth = &parts[w].truth
			for i := lo; i < hi; i++ {
				g.emitWith(core[i], reg, ctx, i)
			}
		}(w, lo, hi)
	}
	wg.Wait()
	for _, p := range parts {
		tb.jump = append(tb.jump, p.tb.jump...)
		tb.static = append(tb.static, p.tb.static...)
		tb.bugs = append(tb.bugs, p.tb.bugs...)
		tb.ex = append(tb.ex, p.tb.ex...)
		tb.mcount = append(tb.mcount, p.tb.mcount...)
		g.truth.Funcs = append(g.truth.Funcs, p.truth...)
	}
}

type tables struct {
	jump   []image.JumpEntry
	static []image.StaticCallSite
	bugs   []image.BugEntry
	ex     []image.ExEntry
	mcount []uint64
}

// drawSize draws a function size from the log-normal distribution.
func (g *gen) drawSize() int {
	c := &g.cfg
	s := float64(c.SizeMedian) * math.Exp(c.SizeSigma*g.rng.NormFloat64())
	return int(min(max(s, float64(c.MinSize)), float64(c.MaxSize)))
}

func (g *gen) drawAttrs(p *fplan) {
	c := &g.cfg
	pct := func(v float64) bool { return g.rng.Float64()*100 < v }
	switch p.zone {
	case ZoneMain, ZoneInit, ZoneModule, ZoneModuleInit:
		p.traced = pct(c.TracedPercent)
	}
	p.uaccess = pct(c.UaccessPercent) && p.size >= 48
	p.loop = pct(c.LoopToEntryPercent) && p.size >= 40
	p.indirect = pct(c.IndirectJumpPercent)
	p.vzero = pct(c.VzeroupperPercent)
	switch {
	case p.size < 40:
		p.frame = 0
	case p.size < 120:
		p.frame = g.rng.IntN(3)
	default:
		p.frame = 1 + g.rng.IntN(4)
	}
}

// newKeys makes n jump keys (addresses filled at layout), JumpBranchPercent
// of them default-true.
func (g *gen) newKeys(n int) ([]uint64, []bool) {
	keys, branch := make([]uint64, n), make([]bool, n)
	for i := range branch {
		branch[i] = g.rng.Float64()*100 < g.cfg.JumpBranchPercent
	}
	return keys, branch
}

// capacity is how many sites a function of this plan may host: one per 8
// bytes beyond a small fixed part.
func capacity(p *fplan) int {
	return max(0, (p.size-24)/8)
}

// assignSites distributes jump-label, static-call and bug sites over hosts,
// weighted by size. It fails, naming the flag, when the text cannot hold them.
func (g *gen) assignSites(hosts []*fplan, nJ, nS, nB, nJK, nSK int, flagPrefix string) error {
	var slots []int32
	for i, p := range hosts {
		for c := capacity(p); c > 0; c-- {
			slots = append(slots, int32(i))
		}
	}
	need := nJ + nS + nB
	if need > len(slots) {
		flag := flagPrefix + "jump-entries"
		if nJ == 0 {
			flag = flagPrefix + "bug-entries"
		}
		return cfgErr(flag, "%d jump-label + %d static-call + %d bug sites do not fit: the text of %d functions holds at most %d sites",
			nJ, nS, nB, len(hosts), len(slots))
	}
	for i := 0; i < need; i++ { // partial Fisher-Yates
		j := i + g.rng.IntN(len(slots)-i)
		slots[i], slots[j] = slots[j], slots[i]
	}
	mix := g.cfg.JumpMix
	var mixTotal float64
	for _, m := range mix {
		mixTotal += m
	}
	keyFor := func(i, nkeys int) int {
		if i < nkeys {
			return i // every key gets at least one site
		}
		u := g.rng.Float64()
		return int(u * u * float64(nkeys)) // skewed: a few keys have many sites
	}
	for i := 0; i < need; i++ {
		p := hosts[slots[i]]
		var s site
		switch {
		case i < nJ:
			r := g.rng.Float64() * mixTotal
			s.kind = siteNOP2
			for kind, m := range mix {
				if r < m {
					s.kind = siteKind(kind)
					break
				}
				r -= m
			}
			s.key = keyFor(i, nJK)
		case i < nJ+nS:
			s.kind = siteCall
			if g.rng.Float64()*100 < g.cfg.StaticCallTailPercent {
				s.kind = siteTail
			}
			s.key = keyFor(i-nJ, nSK)
		default:
			s.kind = siteBug
		}
		p.sites = append(p.sites, s)
	}
	return nil
}

func (g *gen) needsCold(p *fplan) bool {
	if p.uaccess {
		return true
	}
	for _, s := range p.sites {
		if s.kind == siteNOP5 || s.kind == siteJMP32 {
			return true
		}
	}
	return false
}

// retSeq is a function's return as the running kernel holds it. With
// CONFIG_RETHUNK gcc (-mfunction-return=thunk-extern) emits "jmp
// __x86_return_thunk" and no int3 after it (-mharden-sls=all pads only
// ret and indirect jmp; checked with gcc 12.2); apply_returns on a CPU
// that needs no thunk rewrites it to "ret; int3; int3; int3; int3"
// (arch/x86/kernel/alternative.c:patch_return pads with INT3 to the
// jump's length). Without RETHUNK, SLS gives "ret; int3".
func (g *gen) retSeq() []byte {
	switch {
	case g.cfg.RetThunk && !g.cfg.ReturnsPatched:
		return []byte{opJMP32, 0, 0, 0, 0}
	case g.cfg.RetThunk:
		return bRETPatched
	}
	return bRET
}

// retOffs lists the instruction starts of a retSeq.
func retOffs(code []byte) []uint32 {
	if code[0] == opJMP32 {
		return []uint32{0}
	}
	offs := make([]uint32, len(code))
	for i := range offs {
		offs[i] = uint32(i)
	}
	return offs
}

// padFill is the fill after a function: gas NOPs inside an object, the
// linker's fill (between) at an object's end; int3 everywhere with
// --padding int3.
func padFill(padding Padding, objEnd bool, between Fill) Fill {
	switch {
	case padding == PaddingInt3:
		return FillLinkerINT3
	case objEnd:
		return between
	}
	return FillGasNOP
}

// prefix is the CONFIG_CALL_PADDING bytes before a padded function:
// FUNCTION_PADDING_BYTES, the function alignment (no CFI_CLANG).
func (g *gen) prefix() uint64 {
	if g.cfg.CallPadding {
		return funcAlign
	}
	return 0
}

// padBefore marks p as padded when the image has call padding and p is
// C code (the entry and irqentry zones are asm: SYM_CODE, no __pfx_; in
// Debian's 7.3 image none of their 102 functions has one) and returns
// the bytes to leave before it.
func (g *gen) padBefore(p *fplan) uint64 {
	if g.cfg.CallPadding && p.zone != ZoneEntry && p.zone != ZoneIRQEntry {
		p.pfx = true
		return g.prefix()
	}
	return 0
}

// writePrefixes fills the call padding before the padded functions of ps
// with single-byte NOPs (gcc's -fpatchable-function-entry=16,16, as the
// real 6.12 and 7.3 images hold every __pfx_ as built: 16 x 0x90) and
// returns their __pfx_ symbols (the function's type, as kallsyms lists
// them); the truth records each as a run of one-byte instructions.
func (g *gen) writePrefixes(reg *image.Region, ps []*fplan) []image.Symbol {
	var syms []image.Symbol
	n := g.prefix()
	for _, p := range ps {
		if !p.pfx {
			continue
		}
		s := image.Symbol{Name: PfxName(p.name), Addr: p.addr - n, Size: n, Type: p.typ, Module: reg.Module}
		fill(reg.Bytes[s.Addr-reg.Start:p.addr-reg.Start], opNOP)
		syms = append(syms, s)
		ft := pfxTruth(s)
		ft.Zone, ft.Module = p.zone, reg.Module
		g.truth.Funcs = append(g.truth.Funcs, ft)
	}
	return syms
}

// minSize is the size of everything but filler.
func (g *gen) minSize(p *fplan) int {
	n := insnBytes(prologues[p.frame]) + insnBytes(epilogues[p.frame]) + len(g.retSeq())
	if g.cfg.IBT {
		n += 4
	}
	if p.traced {
		n += 5
	}
	for _, s := range p.sites {
		n += s.kind.size()
	}
	if p.uaccess {
		n += len(bSTAC) + len(bUACCESS) + len(bCLAC)
	}
	if p.loop {
		n += 6
	}
	if p.indirect {
		if g.cfg.Retpoline {
			n += 5
		} else {
			n += 2
		}
	}
	if p.vzero {
		n += 3
	}
	if g.needsCold(p) {
		n += len(bCOLD) + 5
	}
	return n
}

var regNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

// retpolineThunk returns __x86_indirect_thunk_<reg> as built with
// CONFIG_RETPOLINE (arch/x86/lib/retpoline.S RETPOLINE_JMP):
//
//	call 1f; 2: pause; lfence; jmp 2b; 1: mov %reg,(%rsp); ret
func retpolineThunk(r int) ([]byte, []uint32) {
	mov := []byte{0x48, 0x89, byte(0x04 | (r&7)<<3), 0x24}
	if r >= 8 {
		mov[0] = 0x4c
	}
	code := []byte{opCALL, 7, 0, 0, 0, 0xf3, 0x90, 0x0f, 0xae, 0xe8, opJMP8, 0xf9}
	offs := []uint32{0, 5, 7, 10}
	offs = append(offs, uint32(len(code)))
	code = append(code, mov...)
	offs = append(offs, uint32(len(code)))
	code = append(code, 0xc3)
	return code, offs
}

func alignUp(a, n uint64) uint64 { return (a + n - 1) &^ (n - 1) }

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

func putRel32(dst []byte, next, target uint64) {
	binary.LittleEndian.PutUint32(dst, uint32(int32(int64(target-next))))
}

func isDotted(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return true
		}
	}
	return false
}

func isCommonStatic(s string) bool {
	for _, c := range commonStatics {
		if c == s {
			return true
		}
	}
	return false
}

func staticCallName(n *namer, i int) string {
	if i < len(wellKnownStaticCalls) {
		return n.fixed(wellKnownStaticCalls[i])
	}
	return "tp_func_" + n.fresh()
}

var (
	entryNames = []string{"entry_SYSCALL_64", "entry_SYSCALL_64_safe_stack", "entry_SYSCALL_64_after_hwframe",
		"__switch_to_asm", "ret_from_fork", "asm_exc_page_fault", "asm_exc_int3", "asm_exc_debug",
		"asm_exc_nmi", "asm_exc_general_protection", "asm_exc_invalid_op", "asm_exc_double_fault",
		"error_entry", "error_return", "paranoid_entry", "paranoid_exit", "swapgs_restore_regs_and_return_to_usermode",
		"entry_SYSRETQ_unsafe_stack", "native_irq_return_iret", "asm_load_gs_index"}
	irqEntryNames = []string{"asm_sysvec_apic_timer_interrupt", "asm_sysvec_reschedule_ipi", "asm_sysvec_call_function",
		"asm_sysvec_call_function_single", "asm_sysvec_irq_work", "asm_common_interrupt", "asm_spurious_interrupt"}
	noinstrNames = []string{"exc_page_fault", "exc_int3", "exc_debug", "exc_nmi", "irqentry_enter", "irqentry_exit",
		"irqentry_nmi_enter", "irqentry_nmi_exit", "rcu_nmi_enter", "rcu_nmi_exit", "ct_idle_enter", "ct_idle_exit",
		"do_syscall_64", "syscall_enter_from_user_mode", "syscall_exit_to_user_mode", "__sev_es_nmi_complete"}
	kprobesNames = []string{"kprobe_int3_handler", "kprobe_fault_handler", "kprobe_debug_handler", "optimized_callback",
		"kprobe_ftrace_handler", "aggr_pre_handler", "aggr_post_handler", "opt_pre_handler",
		"kprobe_exceptions_notify", "arch_rethook_trampoline_callback"}
	wellKnownStaticCalls = []string{"preempt_schedule", "preempt_schedule_notrace", "cond_resched", "might_resched",
		"x86_pmu_handle_irq", "x86_pmu_enable", "x86_pmu_disable", "x86_pmu_add", "x86_pmu_del", "x86_pmu_read",
		"pv_sched_clock", "pv_steal_clock", "kvm_x86_vcpu_run", "kvm_x86_handle_exit", "perf_guest_state"}
)
