package module

import (
	"debug/elf"
	"slices"
	"strings"
)

// Page size and the x86-64 module area (arch/x86/include/asm/pgtable_64_types.h).
const (
	PageSize     = 4096
	ModulesVaddr = 0xffffffffc0000000 // MODULES_VADDR
	ModulesEnd   = 0xffffffffff000000 // MODULES_END
	// DefaultLoadOffset is the modelled get_module_load_offset: the
	// smallest of the kernel's random 1..1024 pages (see the package doc).
	DefaultLoadOffset = PageSize
	// PercpuBase is the modelled per-cpu address of the first module's
	// per-cpu area (a __percpu pointer: an offset in the zero-based x86-64
	// per-cpu space, above vmlinux's static per-cpu data). Only per-cpu
	// symbol values and the relocations against them depend on it.
	PercpuBase = 0x40000
	// maxModuleBytes is the size of the module area.
	maxModuleBytes = ModulesEnd - ModulesVaddr
)

// Layout is a module's core or init layout (struct module_layout).
type Layout struct {
	Base            uint64
	Size            uint64 // whole block, page aligned
	TextSize        uint64 // [Base, Base+TextSize) is text, page aligned
	ROSize          uint64 // text + rodata
	ROAfterInitSize uint64 // + ro_after_init
}

// ModMemType is enum mod_mem_type (include/linux/module.h, 6.4 and
// later): the kinds of module memory, each its own allocation.
type ModMemType int

// The mod_mem_type values, in for_each_mod_mem_type order (move_module
// allocates them in this order).
const (
	ModText        ModMemType = iota // MOD_TEXT
	ModData                          // MOD_DATA
	ModRodata                        // MOD_RODATA
	ModROAfterInit                   // MOD_RO_AFTER_INIT
	ModInitText                      // MOD_INIT_TEXT
	ModInitData                      // MOD_INIT_DATA
	ModInitRodata                    // MOD_INIT_RODATA
	ModMemNumTypes                   // MOD_MEM_NUM_TYPES
	modInvalid     ModMemType = -1   // MOD_INVALID
)

var modMemNames = [ModMemNumTypes]string{"MOD_TEXT", "MOD_DATA", "MOD_RODATA", "MOD_RO_AFTER_INIT", "MOD_INIT_TEXT", "MOD_INIT_DATA", "MOD_INIT_RODATA"}

func (t ModMemType) String() string {
	if t >= 0 && t < ModMemNumTypes {
		return modMemNames[t]
	}
	return "MOD_INVALID"
}

// IsInit: mod_mem_type_is_init.
func (t ModMemType) IsInit() bool { return t == ModInitText || t == ModInitData || t == ModInitRodata }

// IsText: mod_mem_type_is_text (anything else is data: EXECMEM_MODULE_DATA).
func (t ModMemType) IsText() bool { return t == ModText || t == ModInitText }

// ModuleMemory is struct module_memory: one block's base and size (page
// aligned once allocated).
type ModuleMemory struct {
	Base, Size uint64
}

// layout is where layout_sections and layout_symtab put things: 6.1's
// core and init layouts, or the sizes of mod->mem[] since 6.4. Sections
// record their block (section.blk: 0 core and 1 init in 6.1, the
// mod_mem_type since 6.4) and their offset in it.
type layout struct {
	core, init Layout                 // 6.1
	mem        [ModMemNumTypes]uint64 // 6.4+: mod->mem[type].size
	// blocks is what move_module allocates, indexed by section.blk.
	blocks []blockSpec
	// textBlk and initTextBlk are the blocks holding the core and the
	// init text, textSize and initTextSize how much of them is text.
	textBlk, initTextBlk   int
	textSize, initTextSize uint64
	// core kallsyms (layout_symtab): offsets in the core (6.1) or the
	// MOD_DATA block
	symoffs, stroffs, coreTypeoffs uint64
	coreSyms                       []int // symtab indices kept (index 0 first)
}

// blockSpec is one block move_module allocates (when its size is not 0).
type blockSpec struct {
	name string
	typ  ModMemType // modInvalid in 6.1
	init bool
	size uint64
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pageAlign(n uint64) uint64 { return (n + PageSize - 1) &^ (PageSize - 1) }

func alignUp(n, a uint64) uint64 {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

// moduleGetOffset aligns *size to the section's alignment, returns that
// offset and adds the section's size (x86 has no arch_mod_section_prepend).
//
// Models kernel/module/main.c:module_get_offset.
func moduleGetOffset(size *uint64, s *section) uint64 {
	ret := alignUp(*size, s.align)
	*size = ret + s.size
	return ret
}

// moduleInitLayoutSection: init or core is decided by the name only.
//
// Models kernel/module/main.c:module_init_layout_section (with
// CONFIG_MODULE_UNLOAD=y, .exit.* stays in core) → module_init_section.
func moduleInitLayoutSection(name string) bool { return strings.HasPrefix(name, ".init") }

// layoutSections places every SHF_ALLOC section: five passes over the
// section headers in index order, core then init, page-aligning after the
// text, rodata, ro_after_init and whole groups (strict_align with
// STRICT_MODULE_RWX=y). On x86-64 data_layout is core_layout.
//
// Models kernel/module/main.c:layout_sections.
func (o *object) layoutSections(l *layout) {
	alloc := uint64(elf.SHF_ALLOC)
	masks := [5][2]uint64{
		{uint64(elf.SHF_EXECINSTR) | alloc, 0}, // ARCH_SHF_SMALL is 0 on x86
		{alloc, uint64(elf.SHF_WRITE)},
		{shfROAfterInit | alloc, 0},
		{uint64(elf.SHF_WRITE) | alloc, 0},
		{alloc, 0},
	}
	for _, init := range []bool{false, true} {
		lay := &l.core
		if init {
			lay = &l.init
		}
		for m := range masks {
			for i, s := range o.secs {
				if i == 0 || s.flags&masks[m][0] != masks[m][0] || s.flags&masks[m][1] != 0 || s.placed ||
					moduleInitLayoutSection(s.name) != init {
					continue
				}
				s.placed, s.init = true, init
				s.blk = boolInt(init)
				s.offset = moduleGetOffset(&lay.Size, s)
			}
			switch m {
			case 0:
				lay.Size = pageAlign(lay.Size)
				lay.TextSize = lay.Size
			case 1:
				lay.Size = pageAlign(lay.Size)
				lay.ROSize = lay.Size
			case 2:
				if init {
					lay.ROAfterInitSize = lay.ROSize
				} else {
					lay.Size = pageAlign(lay.Size)
					lay.ROAfterInitSize = lay.Size
				}
			case 4:
				lay.Size = pageAlign(lay.Size)
			}
		}
	}
}

// isCoreSymbol: named, defined in a real section, and either per-cpu or in
// an allocated non-init section (CONFIG_KALLSYMS_ALL=y: data symbols too).
//
// Models kernel/module/kallsyms.c:is_core_symbol.
func (o *object) isCoreSymbol(s *sym) bool {
	if s.shndx == uint16(elf.SHN_UNDEF) || int(s.shndx) >= len(o.secs) || s.name == "" {
		return false
	}
	if o.pcpu != 0 && int(s.shndx) == o.pcpu {
		return true
	}
	sec := o.secs[s.shndx]
	return sec.flags&uint64(elf.SHF_ALLOC) != 0 && !sec.init
}

// layoutSymtab appends the full symtab and strtab (and the temporary
// mod_kallsyms and type bytes) to init, and the core symbols, their
// strings and type bytes to core.
//
// Models kernel/module/kallsyms.c:layout_symtab.
func (o *object) layoutSymtab(l *layout) {
	symsect, strsect := o.secs[o.symIdx], o.secs[o.strIdx]
	symsect.flags |= uint64(elf.SHF_ALLOC)
	symsect.placed, symsect.init, symsect.blk = true, true, 1
	symsect.offset = moduleGetOffset(&l.init.Size, symsect)
	var strtabSize uint64
	for i := range o.syms {
		if i == 0 || o.isCoreSymbol(&o.syms[i]) {
			strtabSize += uint64(len(o.syms[i].name)) + 1
			l.coreSyms = append(l.coreSyms, i)
		}
	}
	ndst := uint64(len(l.coreSyms))
	l.symoffs = alignUp(l.core.Size, symsect.align)
	l.stroffs = l.symoffs + ndst*symSize
	l.core.Size = l.stroffs + strtabSize
	l.coreTypeoffs = l.core.Size
	l.core.Size = pageAlign(l.core.Size + ndst)

	strsect.flags |= uint64(elf.SHF_ALLOC)
	strsect.placed, strsect.init, strsect.blk = true, true, 1
	strsect.offset = moduleGetOffset(&l.init.Size, strsect)
	l.init.Size = alignUp(l.init.Size, 8) // __alignof__(struct mod_kallsyms)
	l.init.Size += 32                     // sizeof(struct mod_kallsyms)
	l.init.Size = pageAlign(l.init.Size + uint64(len(o.syms)))
}

// moduleGetOffsetAndType aligns mod->mem[type].size to the section's
// alignment, returns that offset and adds the section's size (x86 has no
// arch_mod_section_prepend).
//
// Models kernel/module/main.c:module_get_offset_and_type (6.4+).
func (l *layout) moduleGetOffsetAndType(t ModMemType, s *section) uint64 {
	ret := alignUp(l.mem[t], s.align)
	l.mem[t] = ret + s.size
	return ret
}

// layoutSectionsMem places every SHF_ALLOC section in a mod_mem_type:
// five passes over the section headers in index order, core then init,
// with the masks of 6.1 (text, rodata, ro_after_init, data, the rest);
// each pass fills its own type and nothing is page-aligned in between
// (each type is its own allocation). An init section that is
// ro_after_init has no type (MOD_INVALID: WARN_ON_ONCE and skipped) and,
// being writable, lands in MOD_INIT_DATA on the next pass.
//
// Models kernel/module/main.c:layout_sections → __layout_sections (6.4+).
func (o *object) layoutSectionsMem(l *layout) {
	alloc := uint64(elf.SHF_ALLOC)
	masks := [5][2]uint64{
		{uint64(elf.SHF_EXECINSTR) | alloc, 0}, // ARCH_SHF_SMALL is 0 on x86
		{alloc, uint64(elf.SHF_WRITE)},
		{shfROAfterInit | alloc, 0},
		{uint64(elf.SHF_WRITE) | alloc, 0},
		{alloc, 0},
	}
	coreType := [5]ModMemType{ModText, ModRodata, ModROAfterInit, ModData, ModData}
	initType := [5]ModMemType{ModInitText, ModInitRodata, modInvalid, ModInitData, ModInitData}
	for _, init := range []bool{false, true} {
		for m := range masks {
			t := coreType[m]
			if init {
				t = initType[m]
			}
			for i, s := range o.secs {
				if i == 0 || s.flags&masks[m][0] != masks[m][0] || s.flags&masks[m][1] != 0 || s.placed ||
					moduleInitLayoutSection(s.name) != init {
					continue
				}
				if t == modInvalid {
					continue // WARN_ON_ONCE(type == MOD_INVALID)
				}
				s.placed, s.init, s.blk = true, init, int(t)
				s.offset = l.moduleGetOffsetAndType(t, s)
			}
		}
	}
}

// layoutSymtabMem appends the full symtab and strtab (and the temporary
// mod_kallsyms and type bytes) to MOD_INIT_DATA, and the core symbols,
// their strings and type bytes to MOD_DATA. Nothing is page-aligned here:
// module_memory_alloc rounds each type up.
//
// Models kernel/module/kallsyms.c:layout_symtab (6.4+).
func (o *object) layoutSymtabMem(l *layout) {
	symsect, strsect := o.secs[o.symIdx], o.secs[o.strIdx]
	symsect.flags |= uint64(elf.SHF_ALLOC)
	symsect.placed, symsect.init, symsect.blk = true, true, int(ModInitData)
	symsect.offset = l.moduleGetOffsetAndType(ModInitData, symsect)
	var strtabSize uint64
	for i := range o.syms {
		if i == 0 || o.isCoreSymbol(&o.syms[i]) {
			strtabSize += uint64(len(o.syms[i].name)) + 1
			l.coreSyms = append(l.coreSyms, i)
		}
	}
	ndst := uint64(len(l.coreSyms))
	l.symoffs = alignUp(l.mem[ModData], symsect.align)
	l.stroffs = l.symoffs + ndst*symSize
	l.mem[ModData] = l.stroffs + strtabSize
	l.coreTypeoffs = l.mem[ModData]
	l.mem[ModData] += ndst

	strsect.flags |= uint64(elf.SHF_ALLOC)
	strsect.placed, strsect.init, strsect.blk = true, true, int(ModInitData)
	strsect.offset = l.moduleGetOffsetAndType(ModInitData, strsect)
	l.mem[ModInitData] = alignUp(l.mem[ModInitData], 8) // __alignof__(struct mod_kallsyms)
	l.mem[ModInitData] += 32                            // sizeof(struct mod_kallsyms)
	l.mem[ModInitData] += uint64(len(o.syms))
}

// rewriteSectionHeaders and the flag edits of layout_and_allocate: drop
// SHF_ALLOC from .modinfo, the version sections and the per-cpu section,
// add SHF_RO_AFTER_INIT to the generation's ro_after_init sections
// (.data..ro_after_init and __jump_table; 7.3 adds .static_call_sites).
// A section both writable and executable is refused.
//
// Models kernel/module/main.c:rewrite_section_headers, layout_and_allocate,
// module_enforce_rwx_sections (6.1, 6.12); 7.3 marks the sections in
// kernel/module/strict_rwx.c:module_mark_ro_after_init.
func (o *object) rewriteSectionHeaders(g *loaderGen) error {
	for _, name := range append(slices.Clone(g.versions), ".modinfo") {
		if i := o.find(name); i != 0 {
			o.secs[i].flags &^= uint64(elf.SHF_ALLOC)
		}
	}
	for _, s := range o.secs {
		if s.has(elf.SHF_WRITE|elf.SHF_EXECINSTR) && s.has(elf.SHF_ALLOC) {
			return o.errorf("section %s is both writable and executable (module_enforce_rwx_sections: -ENOEXEC)", s.name)
		}
	}
	for _, s := range o.secs {
		if s.flags&uint64(elf.SHF_ALLOC) == 0 {
			continue
		}
		// module_alloc could not satisfy these; refusing them here also keeps
		// the layout arithmetic from wrapping.
		if s.size > maxModuleBytes {
			return o.errorf("section %s: %d bytes, more than the %d-byte module area (module_alloc: -ENOMEM)", s.name, s.size, maxModuleBytes)
		}
		if s.align > PageSize*16 {
			return o.errorf("section %s: alignment %d, larger than any module section's", s.name, s.align)
		}
	}
	if o.pcpu != 0 {
		o.secs[o.pcpu].flags &^= uint64(elf.SHF_ALLOC)
	}
	for _, name := range g.roAfterInit {
		if i := o.find(name); i != 0 {
			o.secs[i].flags |= shfROAfterInit
		}
	}
	return nil
}
