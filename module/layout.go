package module

import (
	"debug/elf"
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

// layout is where layout_sections and layout_symtab put things.
type layout struct {
	core, init Layout
	// core kallsyms (layout_symtab): offsets in the core block
	symoffs, stroffs, coreTypeoffs uint64
	coreSyms                       []int // symtab indices kept (index 0 first)
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
	symsect.placed, symsect.init = true, true
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
	strsect.placed, strsect.init = true, true
	strsect.offset = moduleGetOffset(&l.init.Size, strsect)
	l.init.Size = alignUp(l.init.Size, 8) // __alignof__(struct mod_kallsyms)
	l.init.Size += 32                     // sizeof(struct mod_kallsyms)
	l.init.Size = pageAlign(l.init.Size + uint64(len(o.syms)))
}

// rewriteSectionHeaders and the flag edits of layout_and_allocate: drop
// SHF_ALLOC from .modinfo, __versions and the per-cpu section, add
// SHF_RO_AFTER_INIT to .data..ro_after_init and __jump_table. A section
// both writable and executable is refused.
//
// Models kernel/module/main.c:rewrite_section_headers, layout_and_allocate,
// module_enforce_rwx_sections.
func (o *object) rewriteSectionHeaders() error {
	for _, name := range []string{"__versions", ".modinfo"} {
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
	for _, name := range []string{".data..ro_after_init", "__jump_table"} {
		if i := o.find(name); i != 0 {
			o.secs[i].flags |= shfROAfterInit
		}
	}
	return nil
}
