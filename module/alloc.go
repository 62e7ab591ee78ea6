package module

import "fmt"

// layoutAndAllocate61 lays a module out in one core and one init layout
// and allocates each with module_alloc.
//
// Models kernel/module/main.c:layout_and_allocate → layout_sections,
// layout_symtab, move_module (6.1).
func layoutAndAllocate61(l *Loader, o *object) (*layout, *Memory, error) {
	lay := &layout{textBlk: 0, initTextBlk: 1}
	o.layoutSections(lay)
	o.layoutSymtab(lay)
	lay.blocks = []blockSpec{{name: "core", typ: modInvalid, size: lay.core.Size}, {name: "init", typ: modInvalid, init: true, size: lay.init.Size}}
	lay.textSize, lay.initTextSize = lay.core.TextSize, lay.init.TextSize

	// move_module: allocate, zero (the caller copies and sets sh_addr).
	mem := &Memory{Blocks: make([]Block, 2)}
	mem.Blocks[0] = Block{Name: "core"}
	mem.Blocks[1] = Block{Name: "init", Init: true}
	// A failed allocation frees what was allocated: vfree is lazy, the
	// area is not reused (see the package doc).
	if l.opt.Faults.Fail(FaultCoreAlloc) {
		return nil, nil, o.enomem("move_module: module_alloc(core_layout)")
	}
	base, err := l.moduleAlloc(o, lay.core.Size)
	if err != nil {
		return nil, nil, err
	}
	mem.Blocks[0].Base, mem.Blocks[0].Bytes = base, make([]byte, lay.core.Size)
	if lay.init.Size > 0 {
		if l.opt.Faults.Fail(FaultInitAlloc) {
			return nil, nil, o.enomem("move_module: module_alloc(init_layout) (module_memfree(core))")
		}
		if base, err = l.moduleAlloc(o, lay.init.Size); err != nil {
			return nil, nil, err
		}
		mem.Blocks[1].Base, mem.Blocks[1].Bytes = base, make([]byte, lay.init.Size)
	}
	lay.core.Base, lay.init.Base = mem.Blocks[0].Base, mem.Blocks[1].Base
	return lay, mem, nil
}

// layoutAndAllocateMem lays a module out in the seven mod_mem_types and
// allocates every type with a size, in enum order.
//
// Models kernel/module/main.c:layout_and_allocate → layout_sections,
// layout_symtab, move_module → module_memory_alloc (6.4+). A failed
// allocation frees the types already allocated (out_enomem).
func layoutAndAllocateMem(l *Loader, o *object) (*layout, *Memory, error) {
	lay := &layout{textBlk: int(ModText), initTextBlk: int(ModInitText)}
	o.layoutSectionsMem(lay)
	o.layoutSymtabMem(lay)
	mem := &Memory{Blocks: make([]Block, ModMemNumTypes)}
	lay.blocks = make([]blockSpec, ModMemNumTypes)
	for t := range ModMemNumTypes {
		lay.blocks[t] = blockSpec{name: t.String(), typ: t, init: t.IsInit(), size: lay.mem[t]}
		mem.Blocks[t] = Block{Name: t.String(), Init: t.IsInit()}
	}
	for t := range ModMemNumTypes {
		if lay.mem[t] == 0 {
			continue // mod->mem[type].base = NULL
		}
		fault, what := FaultCoreAlloc, "core"
		if t.IsInit() {
			fault, what = FaultInitAlloc, "init"
		}
		if l.opt.Faults.Fail(fault) {
			l.freeMemory(mem)
			return nil, nil, o.enomem(fmt.Sprintf("move_module: module_memory_alloc(%s) of the %s memory (free the types allocated)", t, what))
		}
		base, size, err := l.moduleMemoryAlloc(o, t, lay.mem[t])
		if err != nil {
			l.freeMemory(mem)
			return nil, nil, err
		}
		lay.mem[t] = size
		mem.Blocks[t].Base, mem.Blocks[t].Bytes = base, make([]byte, size)
	}
	lay.textSize = lay.mem[ModText]
	lay.initTextSize = lay.mem[ModInitText]
	return lay, mem, nil
}

// moduleAreaStart is where module allocations start: MODULES_VADDR plus
// the modelled get_module_load_offset.
func (l *Loader) moduleAreaStart() uint64 { return ModulesVaddr + l.opt.LoadOffset }

// checkBlock refuses a block the module area cannot hold or kpsim will
// not allocate.
func (l *Loader) checkBlock(o *object, size uint64, fn string) error {
	if size > ModulesEnd-l.moduleAreaStart() {
		return o.errorf("module area full: %d bytes do not fit below MODULES_END (%s: -ENOMEM)", size, fn)
	}
	if size > l.maxBlock {
		return o.errorf("a %d-byte block is more than kpsim models (%d bytes)", size, l.maxBlock)
	}
	return nil
}

// moduleAlloc is the modelled vmalloc in the module area: first fit
// upwards, MODULE_ALIGN = PAGE_SIZE, one guard page after each block.
//
// Models arch/x86/kernel/module.c:module_alloc (6.1; see the package doc).
func (l *Loader) moduleAlloc(o *object, size uint64) (uint64, error) {
	if err := l.checkBlock(o, size, "module_alloc"); err != nil {
		return 0, err
	}
	base, ok := l.vmap.vmalloc(size, PageSize, l.moduleAreaStart(), ModulesEnd)
	if !ok {
		return 0, o.errorf("module area full: %d bytes do not fit below MODULES_END (module_alloc: -ENOMEM)", size)
	}
	return base, nil
}

// moduleMemoryAlloc allocates one mod_mem_type: its size rounded up to a
// page, from EXECMEM_MODULE_TEXT for text and EXECMEM_MODULE_DATA for the
// rest. Both ranges are [MODULES_VADDR + load offset, MODULES_END) on
// x86; text comes from the ROX cache when the generation has one
// (execmem_alloc: EXECMEM_ROX_CACHE), everything else from vmalloc. It
// returns the base and the page-aligned size.
//
// Models kernel/module/main.c:module_memory_alloc → mm/execmem.c:
// execmem_alloc (arch/x86/mm/init.c:execmem_arch_setup's ranges).
func (l *Loader) moduleMemoryAlloc(o *object, t ModMemType, size uint64) (uint64, uint64, error) {
	size = pageAlign(size)
	if err := l.checkBlock(o, size, "module_memory_alloc"); err != nil {
		return 0, 0, err
	}
	var base uint64
	ok := false
	if t.IsText() && l.gen.execmemROX {
		if base, ok = l.textCache.alloc(size, l.moduleAreaStart(), ModulesEnd); !ok {
			base, ok = l.textCache.populateAlloc(&l.vmap, size, l.moduleAreaStart(), ModulesEnd)
		}
	} else {
		base, ok = l.vmap.vmalloc(size, PageSize, l.moduleAreaStart(), ModulesEnd)
	}
	if !ok {
		return 0, 0, o.errorf("module area full: %d bytes of %s do not fit below MODULES_END (module_memory_alloc: -ENOMEM)", size, t)
	}
	return base, size, nil
}

// freeMemory frees a module's blocks: text from the ROX cache goes back
// to it at once; vmalloc'ed blocks are vfree'd lazily and stay unusable.
//
// Models kernel/module/main.c:free_mod_mem → module_memory_free →
// mm/execmem.c:execmem_free (6.4+); 6.1's module_memfree is vfree.
func (l *Loader) freeMemory(mem *Memory) {
	for _, b := range mem.Blocks {
		l.execmemFree(b)
	}
}

// execmemFree frees one block (a no-op for the vmap space: see vmapSpace).
func (l *Loader) execmemFree(b Block) {
	if len(b.Bytes) > 0 {
		l.textCache.freeArea(b.Base)
	}
}

// freeInit frees the init blocks of a module that went LIVE.
//
// Models kernel/module/main.c:do_init_module → do_free_init (run by the
// init_free_wq worker after a grace period; kpsim runs it before the
// next load, as a modprobe after the previous one returned sees it).
func (l *Loader) freeInit(mem *Memory) {
	for _, b := range mem.Blocks {
		if b.Init {
			l.execmemFree(b)
		}
	}
}
