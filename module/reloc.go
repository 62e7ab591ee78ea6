package module

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// Memory is a module's two allocated blocks (core and init) as bytes.
type Memory struct {
	Core, Init         []byte
	CoreBase, InitBase uint64
}

// at returns the bytes at [addr, addr+n) in one block, or nil.
func (m *Memory) at(addr uint64, n int) []byte {
	for _, b := range []struct {
		base uint64
		mem  []byte
	}{{m.CoreBase, m.Core}, {m.InitBase, m.Init}} {
		if len(b.mem) > 0 && addr >= b.base && addr-b.base <= uint64(len(b.mem)) && uint64(n) <= uint64(len(b.mem))-(addr-b.base) {
			return b.mem[addr-b.base : addr-b.base+uint64(n)]
		}
	}
	return nil
}

// Text returns up to n bytes at addr in one block, aliasing it (the
// alternative.Memory the module_finalize patcher writes through); nil when
// addr is in neither block.
func (m *Memory) Text(addr uint64, n int) []byte {
	for _, b := range []struct {
		base uint64
		mem  []byte
	}{{m.CoreBase, m.Core}, {m.InitBase, m.Init}} {
		if len(b.mem) > 0 && addr >= b.base && addr-b.base < uint64(len(b.mem)) {
			off := addr - b.base
			end := min(off+uint64(max(n, 0)), uint64(len(b.mem)))
			return b.mem[off:end]
		}
	}
	return nil
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
// .modinfo, the per-cpu section) are skipped. SHT_REL is not used on
// x86-64 (apply_relocate: -ENOEXEC).
//
// Models kernel/module/main.c:apply_relocations.
func (o *object) applyRelocations(mem *Memory) error {
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
		if t.flags&uint64(elf.SHF_ALLOC) == 0 {
			continue
		}
		if s.typ == elf.SHT_REL {
			return o.errorf("%s: SHT_REL relocations are not supported on x86-64 (apply_relocate: -ENOEXEC)", s.name)
		}
		if int(s.link) != o.symIdx {
			return o.errorf("%s: relocations against section %d, not the symbol table", s.name, s.link)
		}
		loc := mem.at(t.addr, int(t.size))
		if loc == nil {
			return o.errorf("%s: relocations for %s, which has no bytes in the module", s.name, t.name)
		}
		if err := ApplyRelocateAdd(s.name, s.data, loc, t.addr, vals); err != nil {
			return o.errorf("%v", err)
		}
	}
	return nil
}
