package module

import (
	"debug/elf"
	"encoding/binary"
	"unicode"

	"github.com/kpsim/kpsim/image"
)

// export is a symbol another module can link against.
type export struct {
	addr  uint64
	owner *Loaded // nil: vmlinux
}

// simplifySymbols makes every symbol value absolute: undefined symbols are
// resolved (vmlinux first, then loaded modules' exports; an unresolved weak
// symbol stays 0), section symbols get their section's final address, per-cpu
// ones the module's per-cpu base; SHN_ABS is left alone and SHN_COMMON
// refused. It returns the modules this one now uses (ref_module).
//
// Models kernel/module/main.c:simplify_symbols, resolve_symbol.
func (l *Loader) simplifySymbols(o *object, percpu uint64) ([]*Loaded, error) {
	var uses []*Loaded
	seen := map[*Loaded]bool{}
	for i := 1; i < len(o.syms); i++ {
		s := &o.syms[i]
		switch elf.SectionIndex(s.shndx) {
		case elf.SHN_COMMON:
			return nil, o.errorf("symbol %s is a common symbol: please compile with -fno-common (simplify_symbols: -ENOEXEC)", s.name)
		case elf.SHN_ABS:
		case 0xff20: // SHN_LIVEPATCH: resolved by livepatch later
		case elf.SHN_UNDEF:
			e, ok := l.resolve(s.name)
			if !ok {
				if s.bind() == elf.STB_WEAK {
					continue // ok if weak: the value stays 0
				}
				return nil, o.errorf("unknown symbol %s (simplify_symbols: -ENOENT)", s.name)
			}
			s.value = e.addr
			if e.owner != nil && !seen[e.owner] {
				seen[e.owner] = true
				uses = append(uses, e.owner)
			}
		default:
			if int(s.shndx) >= len(o.secs) {
				return nil, o.errorf("symbol %s: section index %#x out of range (%d sections)", s.name, s.shndx, len(o.secs))
			}
			if o.pcpu != 0 && int(s.shndx) == o.pcpu {
				s.value += percpu
			} else {
				s.value += o.secs[s.shndx].addr
			}
		}
	}
	return uses, nil
}

// resolve finds an exported symbol: vmlinux, then the loaded modules,
// newest first.
//
// Models kernel/module/main.c:find_symbol (each_symbol_section's order).
// vmlinux's exports are modelled by its symbol table (the image carries
// kallsyms, not __ksymtab): a global definition wins over a local one of
// the same name.
func (l *Loader) resolve(name string) (export, bool) {
	if a, ok := l.vmlinux[name]; ok {
		return export{addr: a}, true
	}
	for i := len(l.loaded) - 1; i >= 0; i-- {
		if a, ok := l.loaded[i].exports[name]; ok {
			return export{addr: a, owner: l.loaded[i]}, true
		}
	}
	return export{}, false
}

// vmlinuxSymbols indexes the image's symbols by name: the first global
// definition, else the first local one.
func vmlinuxSymbols(k *image.Kernel) map[string]uint64 {
	m := make(map[string]uint64, len(k.Symbols))
	global := make(map[string]bool, len(k.Symbols))
	for _, s := range k.Symbols {
		if s.Name == "" {
			continue
		}
		g := unicode.IsUpper(rune(s.Type))
		if _, ok := m[s.Name]; !ok || (g && !global[s.Name]) {
			m[s.Name] = s.Addr
			global[s.Name] = g
		}
	}
	return m
}

// readExports reads the generation's export tables (__ksymtab and
// __ksymtab_gpl; since 7.0 only __ksymtab, GPL-only exports being flagged
// in __kflagstab, and __ksymtab_gpl ignored): struct kernel_symbol with
// CONFIG_HAVE_ARCH_PREL32_RELOCATIONS is three s32 self-relative offsets
// (value, name, namespace), 12 bytes.
//
// Models include/linux/export.h:kernel_symbol and
// kernel/module/main.c:kernel_symbol_value / kernel_symbol_name.
//
// all holds both tables (what resolve_symbol links against); plain only
// __ksymtab, mod->syms, the one is_exported consults for /proc/kallsyms'
// upper-case letters.
func (o *object) readExports(mem *Memory, g *loaderGen) (all, plain map[string]uint64, err error) {
	out := map[string]uint64{}
	plain = map[string]uint64{}
	for _, name := range g.ksymtabs {
		i := o.find(name)
		if i == 0 {
			continue
		}
		s := o.secs[i]
		b := mem.at(s.addr, int(s.size))
		for off := uint64(0); off+12 <= uint64(len(b)); off += 12 {
			at := s.addr + off
			val := at + uint64(int64(int32(binary.LittleEndian.Uint32(b[off:]))))
			np := at + 4 + uint64(int64(int32(binary.LittleEndian.Uint32(b[off+4:]))))
			n, ok := mem.cstring(np)
			if !ok {
				return nil, nil, o.errorf("%s entry %d: name at %#x is not a string in the module", name, off/12, np)
			}
			if _, dup := out[n]; dup {
				return nil, nil, o.errorf("exports duplicate symbol %s (verify_exported_symbols: -ENOEXEC)", n)
			}
			out[n] = val
			if name == g.plain {
				plain[n] = val
			}
		}
	}
	return out, plain, nil
}

// cstring reads a NUL-terminated string from the module's memory.
func (m *Memory) cstring(addr uint64) (string, bool) {
	if b := m.block(addr); b != nil {
		return cstr(b.Bytes, addr-b.Base)
	}
	return "", false
}

// elfType is the kallsyms type letter of a module symbol.
//
// Models kernel/module/kallsyms.c:elf_type.
func (o *object) elfType(s *sym) byte {
	if s.bind() == elf.STB_WEAK {
		if s.typ() == elf.STT_OBJECT {
			return 'v'
		}
		return 'w'
	}
	switch {
	case s.shndx == uint16(elf.SHN_UNDEF):
		return 'U'
	case s.shndx == uint16(elf.SHN_ABS) || (o.pcpu != 0 && int(s.shndx) == o.pcpu):
		return 'a'
	case s.shndx >= uint16(elf.SHN_LORESERVE) || int(s.shndx) >= len(o.secs):
		return '?'
	}
	sec := o.secs[s.shndx]
	switch {
	case sec.flags&uint64(elf.SHF_EXECINSTR) != 0:
		return 't'
	case sec.flags&uint64(elf.SHF_ALLOC) != 0 && sec.typ != elf.SHT_NOBITS:
		if sec.flags&uint64(elf.SHF_WRITE) == 0 {
			return 'r'
		}
		return 'd'
	case sec.typ == elf.SHT_NOBITS:
		return 'b'
	}
	return '?'
}

// coreKallsyms is the symbol table a LIVE module's kallsyms holds: the
// core symbols in symtab order (index 0 dropped: lookups start at 1),
// values absolute. The type is the letter /proc/kallsyms prints: elf_type's,
// upper case when this module exports the symbol. Size is st_size (the
// model's address lookups use next-symbol distances, as the kernel does).
//
// Models kernel/module/kallsyms.c:add_kallsyms (the core copy that
// do_init_module switches to) and kernel/kallsyms.c:s_show's case rule.
func (o *object) coreKallsyms(l *layout, name string, exports map[string]uint64) []image.Symbol {
	out := make([]image.Symbol, 0, len(l.coreSyms))
	for j, i := range l.coreSyms {
		if j == 0 {
			continue // the null symbol (find_kallsyms_symbol starts at 1)
		}
		s := &o.syms[i]
		t := o.elfType(s)
		if a, ok := exports[s.name]; ok && a == s.value {
			t = byte(unicode.ToUpper(rune(t)))
		}
		out = append(out, image.Symbol{Name: s.name, Addr: s.value, Size: s.size, Type: image.SymType(t), Module: name})
	}
	return out
}
