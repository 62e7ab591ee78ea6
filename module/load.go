package module

import (
	"debug/elf"
	"fmt"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// Loaded is one module as the loader left it: the image.Module the models
// read, plus what load_module computed on the way.
type Loaded struct {
	Module *image.Module
	Path   string
	// Core and Init are 6.1's core and init layouts (zero since 6.4);
	// Mem is mod->mem[] since 6.4 (zero in 6.1). Init and the init types
	// stay as laid out; those blocks are freed once the module is LIVE.
	Core, Init Layout
	Mem        [ModMemNumTypes]ModuleMemory
	// LayoutBy names the generation's layout (loaderGen.layoutName).
	LayoutBy string
	Percpu   uint64 // per-cpu base, 0 if the module has no per-cpu section
	Sections []Placed
	Depends  []string  // .modinfo depends=
	Uses     []*Loaded // modules it links against (ref_module)
	Counts   Counts
	// Finalize says what module_finalize did to the text; Patch counts it
	// per table (zero when the image was not boot-patched for a CPU);
	// Sites counts the sites by table and result; PatchedSites holds each
	// site's bytes before and after (Options.RecordSites).
	Finalize     []string
	Patch        alternative.Stats
	Sites        []SiteCount
	PatchedSites []alternative.Site

	exports map[string]uint64
	mem     *Memory
}

// Placed is one allocated section and its final address.
type Placed struct {
	Name  string
	Addr  uint64
	Size  uint64
	Init  bool
	Block string // "core", "init" (6.1) or the mod_mem_type ("MOD_TEXT", ...)
}

// Size is the module's size as /proc/modules prints it once LIVE: the
// core layout's (6.1, m_show's core_layout.size) or the sum of the core
// types' page-aligned sizes (6.4+, module_total_size once do_init_module
// zeroed the init types).
func (m *Loaded) Size() uint64 {
	if m.Core.Size != 0 {
		return m.Core.Size
	}
	var n uint64
	for t, mm := range m.Mem {
		if !ModMemType(t).IsInit() {
			n += mm.Size
		}
	}
	return n
}

// Section returns the placed section called name.
func (m *Loaded) Section(name string) (Placed, bool) {
	for _, s := range m.Sections {
		if s.Name == name {
			return s, true
		}
	}
	return Placed{}, false
}

// Options configure a Loader.
type Options struct {
	// Dir is the module tree (a /lib/modules/KVER directory or any tree of
	// .ko files); names resolve through its modules.dep when present, else
	// by walking it.
	Dir string
	// LoadOffset is the modelled get_module_load_offset (0: DefaultLoadOffset).
	LoadOffset uint64
	// Tree, when set, is Dir already indexed (OpenTree).
	Tree *Tree
	// Faults injects the load's allocation failures (faults.go); nil
	// injects nothing.
	Faults *sim.Faults
	// RecordSites keeps every site module_finalize visited in
	// Loaded.PatchedSites.
	RecordSites bool
}

// Loader loads modules into one image, in order. Not safe for concurrent use.
type Loader struct {
	k         *image.Kernel
	opt       Options
	vmlinux   map[string]uint64
	tramps    map[uint64]uint64
	tree      *Tree
	treeErr   error
	loaded    []*Loaded // oldest first
	byName    map[string]*Loaded
	loading   map[string]bool
	gen       *loaderGen   // the generation's loader, chosen once (NewLoader)
	vmap      vmapSpace    // the module area's vmap space
	textCache execmemCache // the execmem ROX cache (gen.execmemROX)
	percpu    uint64
	env       *alternative.Env // module_finalize's view of vmlinux
	cpu       *alternative.CPU
	// maxBlock bounds one block: the simulator's own limit on the memory it
	// allocates for a module (the fuzzers lower it).
	maxBlock uint64
	// The COMING notifiers' state across loads (faults.go).
	jlLinked    map[uint64]bool // static_key_linked keys of vmlinux or other modules
	scConverted map[uint64]bool // vmlinux static_call keys turned into a mods list
	scCore      map[uint64]bool // keys with vmlinux sites
}

// defaultMaxBlock: 256 MiB, far above the largest Debian 6.1 module.
const defaultMaxBlock = 256 << 20

// NewLoader returns a loader adding modules to k (whose vmlinux symbols
// resolve the modules' undefined ones). Modules already in k are kept;
// their exports are unknown to the loader.
func NewLoader(k *image.Kernel, opt Options) *Loader {
	if opt.LoadOffset == 0 {
		opt.LoadOffset = DefaultLoadOffset
	}
	l := &Loader{k: k, opt: opt, vmlinux: vmlinuxSymbols(k), byName: map[string]*Loaded{}, loading: map[string]bool{},
		gen: loaderGenFor(k.Config.Gen), percpu: PercpuBase, maxBlock: defaultMaxBlock,
		jlLinked: map[uint64]bool{}, scConverted: map[uint64]bool{}}
	// The modules already in the image hold the area up to the end of
	// their highest block and its guard page.
	end := uint64(0)
	for _, m := range k.Modules {
		for _, r := range []*image.Region{m.Text, m.Init} {
			if r != nil && r.End() > end && r.Start >= ModulesVaddr {
				end = pageAlign(r.End()) + PageSize
			}
		}
	}
	if end > l.moduleAreaStart() {
		l.vmap.reserve(l.moduleAreaStart(), end)
	}
	return l
}

// Loaded returns the modules this loader loaded, oldest first.
func (l *Loader) Loaded() []*Loaded { return append([]*Loaded(nil), l.loaded...) }

// Lookup returns the loaded module called name.
func (l *Loader) Lookup(name string) (*Loaded, bool) {
	m, ok := l.byName[NormalizeName(name)]
	return m, ok
}

// Path resolves a module name to its .ko file in the tree.
func (l *Loader) Path(name string) (string, error) {
	if l.tree == nil && l.treeErr == nil {
		if l.tree = l.opt.Tree; l.tree == nil {
			l.tree, l.treeErr = OpenTree(l.opt.Dir)
		}
	}
	if l.treeErr != nil {
		return "", l.treeErr
	}
	return l.tree.Path(name)
}

// Load loads the named module from the tree, its .modinfo dependencies
// first (as modprobe does: the kernel itself never reads depends=), and
// returns it. A module already loaded is returned as is.
func (l *Loader) Load(name string) (*Loaded, error) {
	n := NormalizeName(name)
	if m, ok := l.byName[n]; ok {
		return m, nil
	}
	path, err := l.Path(n)
	if err != nil {
		return nil, err
	}
	if l.loading[n] {
		return nil, fmt.Errorf("%s: dependency cycle through module %s", path, n)
	}
	raw, err := l.tree.take(path)
	if err != nil {
		return nil, err
	}
	o, err := parseObject(path, raw)
	if err != nil {
		return nil, err
	}
	l.loading[n] = true
	defer delete(l.loading, n)
	for _, d := range o.depends() {
		if _, err := l.Path(d); err != nil {
			return nil, fmt.Errorf("%s: depends on %s, which is not in %s", path, d, l.tree.dir)
		}
		if _, err := l.Load(d); err != nil {
			return nil, err
		}
	}
	return l.load(o)
}

// LoadFile loads the module in raw (read from path: a .ko, or one
// compressed as Decompress reads it) without looking at its
// dependencies: every undefined symbol must already resolve.
func (l *Loader) LoadFile(path string, raw []byte) (*Loaded, error) {
	raw, err := Decompress(path, raw)
	if err != nil {
		return nil, err
	}
	o, err := parseObject(path, raw)
	if err != nil {
		return nil, err
	}
	return l.load(o)
}

// load runs load_module's steps on a parsed object and appends the LIVE
// module to the image.
//
// Models kernel/module/main.c:load_module through do_init_module.
func (l *Loader) load(o *object) (*Loaded, error) {
	if l.opt.Faults.Fail(FaultELFCopy) {
		return nil, o.enomem("copy_module_from_user: __vmalloc of the image")
	}
	if _, dup := l.byName[o.name]; dup {
		return nil, o.errorf("module %s is already loaded (add_unformed_module: -EEXIST)", o.name)
	}
	for _, m := range l.k.Modules {
		if m.Name == o.name {
			return nil, o.errorf("module %s is already loaded (add_unformed_module: -EEXIST)", o.name)
		}
	}
	if err := o.rewriteSectionHeaders(l.gen); err != nil {
		return nil, err
	}
	lay, mem, err := l.gen.layoutAndAllocate(l, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			l.freeMemory(mem) // free_module / the error paths' free_mod_mem
		}
	}()
	lm := &Loaded{Path: o.path, Core: lay.core, Init: lay.init, LayoutBy: l.gen.layoutName, Depends: o.depends(), mem: mem}
	if lay.blocks[0].typ != modInvalid {
		for t := range ModMemNumTypes {
			lm.Mem[t] = ModuleMemory{Base: mem.Blocks[t].Base, Size: uint64(len(mem.Blocks[t].Bytes))}
		}
	}
	// move_module: copy the sections and set sh_addr.
	for i, s := range o.secs {
		if i == 0 || s.flags&uint64(elf.SHF_ALLOC) == 0 {
			continue
		}
		if !s.placed {
			// 6.4+: an init ro_after_init section that no later pass took
			// (MOD_INVALID); move_module would index mod->mem[-1].
			return nil, o.errorf("section %s has no module memory type (__layout_sections: MOD_INVALID)", s.name)
		}
		blk := &mem.Blocks[s.blk]
		if s.typ != elf.SHT_NOBITS {
			copy(blk.Bytes[s.offset:], s.data)
		}
		s.addr = blk.Base + s.offset
		lm.Sections = append(lm.Sections, Placed{Name: s.name, Addr: s.addr, Size: s.size, Init: s.init, Block: blk.Name})
	}
	if o.pcpu != 0 {
		ps := o.secs[o.pcpu]
		if ps.size != 0 && l.opt.Faults.Fail(FaultPercpuAlloc) {
			return nil, o.enomem("percpu_modalloc: __alloc_reserved_percpu (unlink_mod, free_module)")
		}
		lm.Percpu = alignUp(l.percpu, max(ps.align, 1))
		l.percpu = lm.Percpu + ps.size
	}

	if lm.Uses, err = l.simplifySymbols(o, lm.Percpu); err != nil {
		return nil, err
	}
	if err := o.applyRelocations(mem, l.gen); err != nil {
		return nil, err
	}
	all, plain, err := o.readExports(mem, l.gen)
	if err != nil {
		return nil, err
	}
	lm.exports = all

	m := &image.Module{Name: o.name, State: image.ModuleComing}
	tb := &mem.Blocks[lay.textBlk]
	m.Text = &image.Region{Name: o.name + " .text", Kind: image.ModuleText, Module: o.name, Start: tb.Base, Bytes: tb.Bytes[:lay.textSize]}
	if lay.initTextSize > 0 {
		ib := &mem.Blocks[lay.initTextBlk]
		m.Init = &image.Region{Name: o.name + " .init.text", Kind: image.ModuleInit, Module: o.name, Start: ib.Base, Bytes: ib.Bytes[:lay.initTextSize]}
	}
	lm.Module = m
	// The module's text is visible to kernel_text_address from here on
	// (mod_tree_insert in add_unformed_module); the static-call key fix-up
	// below asks it.
	l.k.Modules = append(l.k.Modules, m)
	defer func() {
		if !ok {
			l.k.Modules = l.k.Modules[:len(l.k.Modules)-1]
		}
	}()
	if err := l.readTables(o, mem, m, &lm.Counts); err != nil {
		return nil, err
	}
	m.Symbols = o.coreKallsyms(lay, o.name, plain)
	if lm.Finalize, err = l.moduleFinalize(o, lm); err != nil {
		return nil, err
	}
	l.ftraceModuleInit(lm)
	// prepare_coming_module: the COMING notifiers that allocate. A
	// failure is -ENOMEM (blocking_notifier_call_chain_robust has the
	// notifiers that ran undo themselves) and the load fails:
	// coming_cleanup / bug_cleanup unlink the module and free its blocks.
	if err := l.jumpLabelAddModule(o, lm); err != nil {
		return nil, err
	}
	if err := l.staticCallAddModule(o, lm); err != nil {
		return nil, err
	}

	// do_init_module: LIVE, then the init blocks are freed and kallsyms
	// already points at the core symbols (m.Symbols).
	m.State = image.ModuleLive
	m.Init = nil
	ok = true
	l.freeInit(mem)
	l.loaded = append(l.loaded, lm)
	l.byName[o.name] = lm
	return lm, nil
}
