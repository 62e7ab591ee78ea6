package module

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"
)

// Section flags the loader uses beyond debug/elf's.
const (
	// shfROAfterInit is SHF_RO_AFTER_INIT (include/linux/moduleloader.h):
	// a kernel-internal flag layout_and_allocate sets.
	shfROAfterInit = 0x00200000
	symSize        = 24 // sizeof(Elf64_Sym)
	relaSize       = 24 // sizeof(Elf64_Rela)
)

// section is one section header as the loader rewrites it.
type section struct {
	idx   int
	name  string
	noff  uint32 // sh_name
	typ   elf.SectionType
	flags uint64 // sh_flags after the loader's edits
	size  uint64
	align uint64
	off   uint64
	link  uint32
	info  uint32
	data  []byte // file bytes; nil for SHT_NOBITS

	placed bool   // layout_sections gave it an offset (sh_entsize != ~0UL)
	init   bool   // in an init block (INIT_OFFSET_MASK; 6.4+: an init mod_mem_type)
	blk    int    // its block: 0 core, 1 init (6.1); the mod_mem_type (6.4+)
	offset uint64 // offset in its block
	addr   uint64 // final sh_addr (0 for sections not allocated)
}

func (s *section) has(f elf.SectionFlag) bool { return s.flags&uint64(f) == uint64(f) }

// sym is one Elf64_Sym; value becomes absolute in simplifySymbols.
type sym struct {
	name  string
	info  byte
	other byte
	shndx uint16
	value uint64
	size  uint64
}

func (s *sym) bind() elf.SymBind { return elf.ST_BIND(s.info) }
func (s *sym) typ() elf.SymType  { return elf.ST_TYPE(s.info) }

// object is a parsed .ko: the load_info of kernel/module/internal.h.
type object struct {
	path    string
	raw     []byte
	secs    []*section
	symIdx  int // the first SHT_SYMTAB
	strIdx  int // its string table
	syms    []sym
	modinfo []string // "key=value" strings of .modinfo
	pcpu    int      // .data..percpu, 0 if none (find_pcpusec)
	thisMod int      // .gnu.linkonce.this_module
	name    string
}

// errorf names the file, as every loader error does.
func (o *object) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: %s", o.path, fmt.Sprintf(format, a...))
}

// parseObject checks and indexes a .ko.
//
// Models kernel/module/main.c:elf_validity_check and setup_load_info
// (the checks, not their error codes: every failure here is the kernel's
// -ENOEXEC).
func parseObject(path string, raw []byte) (*object, error) {
	o := &object{path: path, raw: raw}
	if len(raw) < 64 {
		return nil, o.errorf("truncated: %d bytes, shorter than an ELF64 header", len(raw))
	}
	if !bytes.HasPrefix(raw, []byte(elf.ELFMAG)) {
		return nil, o.errorf("not an ELF file (bad magic)")
	}
	if elf.Class(raw[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(raw[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil, o.errorf("ELF class %v, %v: want a 64-bit little-endian x86-64 module", elf.Class(raw[elf.EI_CLASS]), elf.Data(raw[elf.EI_DATA]))
	}
	le := binary.LittleEndian
	if m := elf.Machine(le.Uint16(raw[18:])); m != elf.EM_X86_64 {
		return nil, o.errorf("ELF machine %v: not an x86-64 module (elf_check_arch: -ENOEXEC)", m)
	}
	if t := elf.Type(le.Uint16(raw[16:])); t != elf.ET_REL {
		return nil, o.errorf("ELF type %v: a module is a relocatable object (ET_REL)", t)
	}
	shoff, shentsize, shnum, shstrndx := le.Uint64(raw[40:]), le.Uint16(raw[58:]), le.Uint16(raw[60:]), le.Uint16(raw[62:])
	if shentsize != 64 {
		return nil, o.errorf("section header size %d, want 64", shentsize)
	}
	if shnum == 0 || shoff > uint64(len(raw)) || uint64(shnum)*64 > uint64(len(raw))-shoff {
		return nil, o.errorf("truncated: %d section headers at offset %#x run past the end of the %d-byte file", shnum, shoff, len(raw))
	}
	if shstrndx >= shnum {
		return nil, o.errorf("section-name table index %d out of range (%d sections)", shstrndx, shnum)
	}
	o.secs = make([]*section, shnum)
	for i := range o.secs {
		h := raw[shoff+uint64(i)*64:]
		s := &section{idx: i, noff: le.Uint32(h[0:]), typ: elf.SectionType(le.Uint32(h[4:])), flags: le.Uint64(h[8:]),
			off: le.Uint64(h[24:]), size: le.Uint64(h[32:]), link: le.Uint32(h[40:]), info: le.Uint32(h[44:]),
			align: le.Uint64(h[48:])}
		if s.typ != elf.SHT_NOBITS && s.typ != elf.SHT_NULL {
			if s.off > uint64(len(raw)) || s.size > uint64(len(raw))-s.off {
				return nil, o.errorf("truncated: section %d [%#x, +%#x) runs past the end of the %d-byte file", i, s.off, s.size, len(raw))
			}
			s.data = raw[s.off : s.off+s.size]
		}
		o.secs[i] = s
	}
	shstr := o.secs[shstrndx]
	if shstr.typ != elf.SHT_STRTAB || len(shstr.data) == 0 || shstr.data[len(shstr.data)-1] != 0 {
		return nil, o.errorf("section-name table is not a NUL-terminated string table")
	}
	for i, s := range o.secs {
		name, ok := cstr(shstr.data, uint64(s.noff))
		if !ok {
			return nil, o.errorf("section %d: name offset %d outside the section-name table", i, s.noff)
		}
		s.name = name
	}
	for _, s := range o.secs {
		if s.typ == elf.SHT_SYMTAB {
			if o.symIdx != 0 {
				return nil, o.errorf("more than one symbol table (elf_validity_check: -ENOEXEC)")
			}
			o.symIdx = s.idx
		}
	}
	if o.symIdx == 0 {
		return nil, o.errorf("module has no symbols (stripped?)")
	}
	st := o.secs[o.symIdx]
	if int(st.link) >= len(o.secs) || o.secs[st.link].typ != elf.SHT_STRTAB {
		return nil, o.errorf("symbol table's string table (section %d) is not a string table", st.link)
	}
	o.strIdx = int(st.link)
	if st.size%symSize != 0 {
		return nil, o.errorf("symbol table size %d is not a multiple of %d", st.size, symSize)
	}
	strs := o.secs[o.strIdx].data
	for off := uint64(0); off < st.size; off += symSize {
		e := st.data[off:]
		n, ok := cstr(strs, uint64(le.Uint32(e)))
		if !ok {
			return nil, o.errorf("symbol %d: name offset outside the string table", off/symSize)
		}
		o.syms = append(o.syms, sym{name: n, info: e[4], other: e[5], shndx: le.Uint16(e[6:]), value: le.Uint64(e[8:]), size: le.Uint64(e[16:])})
	}
	if i := o.find(".modinfo"); i != 0 && o.secs[i].data != nil {
		for _, kv := range strings.Split(string(o.secs[i].data), "\x00") {
			if kv != "" {
				o.modinfo = append(o.modinfo, kv)
			}
		}
	}
	o.thisMod = o.find(".gnu.linkonce.this_module")
	if o.thisMod == 0 {
		return nil, o.errorf("no .gnu.linkonce.this_module section: not a kernel module")
	}
	o.name = o.modinfoValue("name")
	if o.name == "" {
		// setup_load_info falls back to the name in struct module
		// (offsetof(struct module, name) = 24 on x86-64, 56 bytes).
		if d := o.secs[o.thisMod].data; len(d) >= 24+56 {
			o.name, _ = cstr(d[24:24+56], 0)
		}
	}
	if o.name == "" {
		return nil, o.errorf("module has no name (no .modinfo name= and an empty struct module name)")
	}
	o.pcpu = o.find(".data..percpu")
	return o, nil
}

// find returns the index of the section called name, 0 if none.
//
// Models kernel/module/internal.h:find_sec (an SHF_ALLOC section).
func (o *object) find(name string) int {
	for i, s := range o.secs {
		if i > 0 && s.name == name && s.flags&uint64(elf.SHF_ALLOC) != 0 {
			return i
		}
	}
	return 0
}

// modinfoValue returns the first value of key in .modinfo.
//
// Models kernel/module/main.c:get_modinfo.
func (o *object) modinfoValue(key string) string {
	for _, kv := range o.modinfo {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// depends returns the module names of .modinfo's depends= (modpost writes
// file basenames: '-' is normalised to '_' as module names use).
func (o *object) depends() []string {
	var out []string
	for _, d := range strings.Split(o.modinfoValue("depends"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, NormalizeName(d))
		}
	}
	return out
}

// NormalizeName maps a module file basename or user-given name to the
// module's name: without a ".ko" suffix (or ".ko.xz", ".ko.zst",
// ".ko.gz") and with '-' as '_' (modprobe and kmod treat them alike;
// name= uses '_').
func NormalizeName(s string) string {
	for _, c := range moduleCodecs {
		if t, ok := strings.CutSuffix(s, ".ko"+c.suffix); ok {
			s = t + ".ko"
			break
		}
	}
	s = strings.TrimSuffix(s, ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

// cstr reads the NUL-terminated string at off in b.
func cstr(b []byte, off uint64) (string, bool) {
	if off >= uint64(len(b)) {
		return "", off == 0 && len(b) == 0
	}
	i := bytes.IndexByte(b[off:], 0)
	if i < 0 {
		return "", false
	}
	return string(b[off : off+uint64(i)]), true
}
