package synth

import (
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

var moduleNames = []string{"nf_tables", "kvm_intel", "xfs", "i915", "btrfs", "snd_hda_codec", "nvme", "e1000e"}

// buildModule generates loaded module number m: its own core and init
// text in the module area, symbols, jump entries (module-local keys), static
// call sites (calling vmlinux trampolines), bug and exception tables, a
// couple of NOKPROBE entries and its mcount locations.
func (g *gen) buildModule(m int) error {
	cfg := &g.cfg
	name := moduleNames[m%len(moduleNames)]
	if m >= len(moduleNames) {
		name = fmt.Sprintf("%s_%d", name, m/len(moduleNames))
	}
	var text, init []*fplan
	for i := 0; i < cfg.ModuleFunctions; i++ {
		typ := 't'
		if i%3 == 0 {
			typ = 'T'
		}
		text = append(text, &fplan{name: name + "_" + g.nm.fresh(), typ: image.SymType(typ), zone: ZoneModule, size: g.drawSize()})
	}
	for i := 0; i < cfg.ModuleInitFunctions; i++ {
		n := name + "_init"
		if i > 0 {
			n = fmt.Sprintf("%s_init_%d", name, i)
		}
		init = append(init, &fplan{name: n, typ: 't', zone: ZoneModuleInit, size: g.drawSize()})
	}
	hosts := append(append([]*fplan{}, text...), init...)
	for _, p := range hosts {
		g.drawAttrs(p)
	}
	nJK := 0
	if cfg.ModuleJumpEntries > 0 {
		nJK = max(1, cfg.ModuleJumpEntries/4)
	}
	jkeys, jtrue := g.newKeys(nJK)
	if err := g.assignSites(hosts, cfg.ModuleJumpEntries, cfg.ModuleStaticCallSites, cfg.ModuleBugEntries, nJK, cfg.StaticCallKeys, "module-"); err != nil {
		return err
	}

	base := uint64(ModuleBase) + uint64(m)*moduleSpan
	// The module's objects (ld -r joins them with ld's NOP fill); init
	// functions are __cold and unaligned.
	ends := g.objectEnds(len(text), sim.NewRNG(cfg.Seed, fmt.Sprintf("image.synth.objects.module.%d", m)))
	layout := func(ps []*fplan, start uint64, align uint64) uint64 {
		a := start
		for i, p := range ps {
			p.size = max(p.size, g.minSize(p))
			a += g.padBefore(p)
			p.addr = a
			a = alignUp(a+uint64(p.size), align)
			if align > 1 {
				p.pad, p.fill = int(a-p.addr)-p.size, padFill(cfg.Padding, ends[i] || i == len(ps)-1, FillLinkerNOP)
			}
		}
		return a
	}
	textEnd := layout(text, base, funcAlign)
	dataBase := alignUp(textEnd, 4096)
	for i := range jkeys {
		jkeys[i] = dataBase + uint64(i)*16
	}
	initBase := alignUp(dataBase+uint64(nJK)*16, 4096)
	initAlign := uint64(1)
	if cfg.CallPadding {
		initAlign = funcAlign // padded __init functions are aligned (Config.CallPadding)
	}
	initEnd := layout(init, initBase, initAlign)
	if initEnd > base+moduleSpan {
		return cfgErr("module-functions", "module %s needs %d bytes, more than the %d-byte module slot", name, initEnd-base, moduleSpan)
	}

	mod := &image.Module{Name: name, State: image.ModuleLive}
	mod.Text = &image.Region{Name: name + " .text", Kind: image.ModuleText, Module: name, Start: base, Bytes: make([]byte, textEnd-base)}
	fill(mod.Text.Bytes, opINT3)
	if len(init) > 0 {
		mod.Init = &image.Region{Name: name + " .init.text", Kind: image.ModuleInit, Module: name, Start: initBase, Bytes: make([]byte, initEnd-initBase)}
		fill(mod.Init.Bytes, opINT3)
	}
	tb := &tables{}
	salt := uint64(m+1) * 0xD1B54A32D192ED03
	for i, p := range text {
		g.emitWith(p, mod.Text, &emitCtx{jkeys: jkeys, jtrue: jtrue, module: name, salt: salt, tb: tb}, i)
	}
	for i, p := range init {
		g.emitWith(p, mod.Init, &emitCtx{jkeys: jkeys, jtrue: jtrue, init: true, module: name, salt: salt, tb: tb}, len(text)+i)
	}
	for _, p := range hosts {
		mod.Symbols = append(mod.Symbols, image.Symbol{Name: p.name, Addr: p.addr, Size: uint64(p.size), Type: p.typ, Module: name})
	}
	mod.Symbols = append(mod.Symbols, g.writePrefixes(mod.Text, text)...)
	if mod.Init != nil {
		mod.Symbols = append(mod.Symbols, g.writePrefixes(mod.Init, init)...)
	}
	for i, a := range jkeys {
		mod.Symbols = append(mod.Symbols, image.Symbol{Name: fmt.Sprintf("%s_key_%d", name, i), Addr: a, Size: 16, Type: 'd', Module: name})
	}
	sort.SliceStable(mod.Symbols, func(i, j int) bool { return mod.Symbols[i].Addr < mod.Symbols[j].Addr })
	lib.SortJumpEntries(tb.jump) // jump_label_add_module sorts at COMING
	lib.SortStaticCallSites(tb.static)
	sort.Slice(tb.ex, func(i, j int) bool { return tb.ex[i].Insn < tb.ex[j].Insn })
	sort.Slice(tb.mcount, func(i, j int) bool { return tb.mcount[i] < tb.mcount[j] })
	mod.JumpEntries, mod.StaticCallSites, mod.BugEntries, mod.ExTable, mod.McountLocs = tb.jump, tb.static, tb.bugs, tb.ex, tb.mcount
	for i := 0; i < len(text) && i < 2; i++ {
		mod.Blacklist = append(mod.Blacklist, text[len(text)/2+i].addr)
	}
	g.k.Modules = append(g.k.Modules, mod)
	return nil
}
