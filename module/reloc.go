package module

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// Memory is a module's allocated blocks as bytes: 6.1's core and init
// layouts, or, since 6.4, one block per mod_mem_type with a size.
type Memory struct {
	Blocks []Block
}

// Block is one allocated block of module memory.
type Block struct {
	Name  string // "core", "init" (6.1) or the mod_mem_type ("MOD_TEXT", ...)
	Init  bool   // freed once the module is LIVE
	Base  uint64
	Bytes []byte
}

// block returns the block holding addr, or nil.
func (m *Memory) block(addr uint64) *Block {
	for i := range m.Blocks {
		b := &m.Blocks[i]
		if len(b.Bytes) > 0 && addr >= b.Base && addr-b.Base < uint64(len(b.Bytes)) {
			return b
		}
	}
	return nil
}

// at returns the bytes at [addr, addr+n) in one block, or nil.
func (m *Memory) at(addr uint64, n int) []byte {
	for _, b := range m.Blocks {
		if len(b.Bytes) > 0 && addr >= b.Base && addr-b.Base <= uint64(len(b.Bytes)) && n >= 0 && uint64(n) <= uint64(len(b.Bytes))-(addr-b.Base) {
			return b.Bytes[addr-b.Base : addr-b.Base+uint64(n)]
		}
	}
	return nil
}

// Text returns up to n bytes at addr in one block, aliasing it (the
// alternative.Memory the module_finalize patcher writes through); nil when
// addr is in no block.
func (m *Memory) Text(addr uint64, n int) []byte {
	b := m.block(addr)
	if b == nil {
		return nil
	}
	off := addr - b.Base
	end := min(off+uint64(max(n, 0)), uint64(len(b.Bytes)))
	return b.Bytes[off:end]
}

// RelocError is a relocation apply_relocate_add refuses.
type RelocError struct {
	Section string // the RELA section
	Index   int    // entry in it
	Type    elf.R_X86_64
	Problem string
}

func (e *RelocError) Error() string {
	return fmt.Sprintf("%s entry %d: %v: %s", e.Section, e.Index, e.Type, e.Problem)
}

// ApplyRelocateAdd applies the Elf64_Rela entries in rela to the section
// whose final address is secAddr and whose bytes are loc (already in their
// block), with symbol values vals (absolute, after simplify_symbols).
// It handles exactly what 6.1 handles on x86-64: NONE, 64, 32, 32S, PC32,
// PLT32, PC64; any other type is -ENOEXEC ("Unknown rela relocation"). A
// target whose bytes are not zero is refused ("Skipping invalid relocation
// target, existing value is nonzero"), 32 and 32S check overflow, PC32 does
// not (the kernel's check is under #if 0).
//
// Models arch/x86/kernel/module.c:__apply_relocate_add.
func ApplyRelocateAdd(relname string, rela []byte, loc []byte, secAddr uint64, vals []uint64) error {
	le := binary.LittleEndian
	if len(rela)%relaSize != 0 {
		return &RelocError{Section: relname, Index: len(rela) / relaSize, Problem: fmt.Sprintf("section size %d is not a multiple of %d", len(rela), relaSize)}
	}
	for i := 0; i < len(rela)/relaSize; i++ {
		r := rela[i*relaSize:]
		off, info, addend := le.Uint64(r), le.Uint64(r[8:]), int64(le.Uint64(r[16:]))
		typ := elf.R_X86_64(elf.R_TYPE64(info))
		si := elf.R_SYM64(info)
		fail := func(p string) error { return &RelocError{Section: relname, Index: i, Type: typ, Problem: p} }
		if uint64(si) >= uint64(len(vals)) {
			return fail(fmt.Sprintf("symbol index %d outside the symbol table (%d symbols)", si, len(vals)))
		}
		width := 0
		switch typ {
		case elf.R_X86_64_NONE:
			continue
		case elf.R_X86_64_64, elf.R_X86_64_PC64:
			width = 8
		case elf.R_X86_64_32, elf.R_X86_64_32S, elf.R_X86_64_PC32, elf.R_X86_64_PLT32:
			width = 4
		default:
			return fail(fmt.Sprintf("unhandled relocation type %d (apply_relocate_add: -ENOEXEC)", uint32(typ)))
		}
		if off > uint64(len(loc)) || uint64(width) > uint64(len(loc))-off {
			return fail(fmt.Sprintf("offset %#x outside the %d-byte target section", off, len(loc)))
		}
		p := loc[off : off+uint64(width)]
		for _, b := range p {
			if b != 0 {
				return fail("invalid relocation target, existing value is nonzero")
			}
		}
		val := vals[si] + uint64(addend)
		where := secAddr + off
		switch typ {
		case elf.R_X86_64_64:
			le.PutUint64(p, val)
		case elf.R_X86_64_32:
			le.PutUint32(p, uint32(val))
			if val != uint64(uint32(val)) {
				return fail(fmt.Sprintf("value %#x overflows 32 bits", val))
			}
		case elf.R_X86_64_32S:
			le.PutUint32(p, uint32(val))
			if int64(val) != int64(int32(uint32(val))) {
				return fail(fmt.Sprintf("value %#x overflows a sign-extended 32-bit field", val))
			}
		case elf.R_X86_64_PC32, elf.R_X86_64_PLT32:
			le.PutUint32(p, uint32(val-where))
		case elf.R_X86_64_PC64:
			le.PutUint64(p, val-where)
		}
	}
	return nil
}

// applyRelocations applies every SHT_RELA section whose target section is
// allocated; relocations of unallocated sections (.rela.BTF, debug info,
// .modinfo) are skipped, and so are the per-cpu section's unless the
// generation relocates its ELF template (7.3: percpu_modcopy copies the
// relocated template; kpsim relocates a private copy at address 0, since
// the template's address is that of the kernel's copy of the file, and
// only its errors matter). SHT_REL is not used on x86-64 (apply_relocate:
// -ENOEXEC).
//
// Models kernel/module/main.c:apply_relocations.
func (o *object) applyRelocations(mem *Memory, g *loaderGen) error {
	vals := make([]uint64, len(o.syms))
	for i := range o.syms {
		vals[i] = o.syms[i].value
	}
	for _, s := range o.secs {
		if s.typ != elf.SHT_RELA && s.typ != elf.SHT_REL {
			continue
		}
		if int(s.info) >= len(o.secs) {
			continue // "Not a valid relocation section?"
		}
		t := o.secs[s.info]
		percpu := g.relocPercpu && s.info != 0 && int(s.info) == o.pcpu
		if t.flags&uint64(elf.SHF_ALLOC) == 0 && !percpu {
			continue
		}
		if s.typ == elf.SHT_REL {
			return o.errorf("%s: SHT_REL relocations are not supported on x86-64 (apply_relocate: -ENOEXEC)", s.name)
		}
		if int(s.link) != o.symIdx {
			return o.errorf("%s: relocations against section %d, not the symbol table", s.name, s.link)
		}
		loc, addr := mem.at(t.addr, int(t.size)), t.addr
		if percpu {
			if t.size > 1<<20 {
				return o.errorf("%s: a %d-byte per-cpu section, more than kpsim relocates (1 MiB)", s.name, t.size)
			}
			if t.typ == elf.SHT_NOBITS {
				loc = make([]byte, t.size)
			} else {
				loc = bytes.Clone(t.data)
			}
			addr = 0
		}
		if loc == nil {
			return o.errorf("%s: relocations for %s, which has no bytes in the module", s.name, t.name)
		}
		if err := ApplyRelocateAdd(s.name, s.data, loc, addr, vals); err != nil {
			return o.errorf("%v", err)
		}
	}
	return nil
}
