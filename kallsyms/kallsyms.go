// Package kallsyms models the kernel's symbol lookups (kernel/kallsyms.c,
// kernel/module/kallsyms.c) as the registration paths use them: name to
// address (kallsyms_lookup_name), address to symbol size and offset
// (kallsyms_lookup_size_offset) and address to name (lookup_symbol_name).
//
// This file holds the search structure the kernel walks — the binary
// search over the address-sorted table, the name-ordered sequence index,
// the alias walks, the linear module symtab scans — with every step counted.
// The compressed name table itself (kallsyms_names, token tables, markers)
// and the variants of name expansion are the subject of the kallsyms
// compressed-table model; here one "name probe" stands for expanding one
// compressed name and comparing it.
package kallsyms

import (
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// Resolver answers the kallsyms questions the kprobes paths ask.
type Resolver interface {
	// LookupName models kernel/kallsyms.c:kallsyms_lookup_name: vmlinux
	// first, then every module (newest first). ok is false for an unknown
	// or empty name.
	LookupName(c *sim.Counters, name string) (addr uint64, ok bool)
	// LookupSizeOffset models kernel/kallsyms.c:kallsyms_lookup_size_offset.
	// size is the kernel's: the distance to the next symbol with a higher
	// address (padding included), not the function's st_size.
	LookupSizeOffset(c *sim.Counters, addr uint64) (size, offset uint64, ok bool)
	// LookupSymbolName models kernel/kallsyms.c:lookup_symbol_name.
	LookupSymbolName(c *sim.Counters, addr uint64) (name string, ok bool)
}

// Counted operations. Weights: see weights.go.
var (
	OpNameProbe = sim.NewOp("kallsyms.name.probe", wNameProbe, rNameProbe,
		"one name comparison in kallsyms_lookup_names: expand one compressed name (kallsyms_expand_symbol) and compare")
	OpAddrProbe = sim.NewOp("kallsyms.addr.probe", wAddrProbe, rAddrProbe,
		"one step of get_symbol_pos's binary search over the address table (kallsyms_sym_address)")
	OpAliasStep = sim.NewOp("kallsyms.alias.step", wAliasStep, rAliasStep,
		"one kallsyms_sym_address read in get_symbol_pos's alias / next-symbol walks")
	OpExpand = sim.NewOp("kallsyms.expand", wNameProbe, rNameProbe,
		"expanding the found symbol's name (lookup_symbol_name, kallsyms_lookup)")
	OpModSym = sim.NewOp("module.kallsyms.sym", wModSym, rModSym,
		"one module symtab entry visited by find_kallsyms_symbol(_value)")
	OpModLookup = sim.NewOp("module.address.lookup", wModLookup, rModLookup,
		"__module_address: one latched-rbtree (mod_tree) lookup of the module holding an address")
)

// Sorted is a Resolver over an image's symbols. It keeps the two orders
// the kernel keeps: the address-sorted table (kallsyms_offsets) and the
// name-sorted sequence index (kallsyms_seqs_of_names, 6.1+).
type Sorted struct {
	syms    []image.Symbol  // vmlinux, address order (kallsyms table order)
	byName  []int32         // indices into syms, sorted by (name, index)
	start   uint64          // _stext
	end     uint64          // _end: is_ksym_addr with CONFIG_KALLSYMS_ALL
	sinit   uint64          // _sinittext
	einit   uint64          // _einittext
	modules []*image.Module // newest first, as the kernel's modules list
}

// NewSorted builds the resolver for k. Symbols with an empty name are
// dropped, as scripts/kallsyms does.
func NewSorted(k *image.Kernel) *Sorted {
	s := &Sorted{}
	for _, sym := range k.Symbols {
		if sym.Name != "" {
			s.syms = append(s.syms, sym)
		}
	}
	s.byName = make([]int32, len(s.syms))
	for i := range s.byName {
		s.byName[i] = int32(i)
	}
	// scripts/kallsyms.c sort_symbols_by_name: by name, ties by address order.
	sort.SliceStable(s.byName, func(i, j int) bool { return s.syms[s.byName[i]].Name < s.syms[s.byName[j]].Name })
	if len(s.syms) > 0 {
		s.start = s.syms[0].Addr
		last := s.syms[len(s.syms)-1]
		s.end = last.Addr + max(last.Size, 1)
	}
	for _, sym := range s.syms {
		switch sym.Name {
		case "_stext":
			s.start = sym.Addr
		case "_sinittext":
			s.sinit = sym.Addr
		case "_einittext":
			s.einit = sym.Addr
		}
	}
	if r := k.InitText(); r != nil && s.sinit == 0 {
		s.sinit, s.einit = r.Start, r.End()
	}
	for i := len(k.Modules) - 1; i >= 0; i-- {
		s.modules = append(s.modules, k.Modules[i])
	}
	return s
}

// isKsymAddr models include/linux/kallsyms.h:is_ksym_addr with
// CONFIG_KALLSYMS_ALL (Debian's setting): any address in [_stext, _end).
func (s *Sorted) isKsymAddr(addr uint64) bool { return addr >= s.start && addr < s.end }

// isInitText models include/asm-generic/sections.h:is_kernel_inittext.
func (s *Sorted) isInitText(addr uint64) bool { return addr >= s.sinit && addr < s.einit }

// lookupNames models kernel/kallsyms.c:kallsyms_lookup_names without the
// end walk: binary search over the name order, then back over duplicates
// to the first. Returns the index into byName.
func (s *Sorted) lookupNames(c *sim.Counters, name string) (int, bool) {
	low, high := 0, len(s.byName)-1
	mid := 0
	found := false
	for low <= high {
		mid = low + (high-low)/2
		c.Inc(OpNameProbe)
		n := s.syms[s.byName[mid]].Name
		switch {
		case name > n:
			low = mid + 1
		case name < n:
			high = mid - 1
		default:
			found = true
		}
		if found {
			break
		}
	}
	if !found {
		return 0, false
	}
	low = mid
	for low > 0 {
		c.Inc(OpNameProbe)
		if s.syms[s.byName[low-1]].Name != name {
			break
		}
		low--
	}
	return low, true
}

// LookupName models kernel/kallsyms.c:kallsyms_lookup_name.
func (s *Sorted) LookupName(c *sim.Counters, name string) (uint64, bool) {
	if name == "" {
		return 0, false
	}
	if i, ok := s.lookupNames(c, name); ok {
		return s.syms[s.byName[i]].Addr, true
	}
	return s.moduleLookupName(c, name)
}

// moduleLookupName models kernel/module/kallsyms.c:module_kallsyms_lookup_name
// for a plain name: every module, newest first, linearly.
func (s *Sorted) moduleLookupName(c *sim.Counters, name string) (uint64, bool) {
	for _, m := range s.modules {
		if m.State == image.ModuleUnformed {
			continue
		}
		for _, sym := range m.Symbols {
			c.Inc(OpModSym)
			if sym.Name == name {
				return sym.Addr, true
			}
		}
	}
	return 0, false
}

// getSymbolPos models kernel/kallsyms.c:get_symbol_pos.
func (s *Sorted) getSymbolPos(c *sim.Counters, addr uint64) (pos int, size, offset uint64) {
	low, high := 0, len(s.syms)
	for high-low > 1 {
		mid := low + (high-low)/2
		c.Inc(OpAddrProbe)
		if s.syms[mid].Addr <= addr {
			low = mid
		} else {
			high = mid
		}
	}
	for low > 0 {
		c.Inc(OpAliasStep)
		if s.syms[low-1].Addr != s.syms[low].Addr {
			break
		}
		low--
	}
	start := s.syms[low].Addr
	var end uint64
	for i := low + 1; i < len(s.syms); i++ {
		c.Inc(OpAliasStep)
		if s.syms[i].Addr > start {
			end = s.syms[i].Addr
			break
		}
	}
	if end == 0 {
		if s.isInitText(addr) {
			end = s.einit
		} else {
			end = s.end
		}
	}
	return low, end - start, addr - start
}

// LookupSizeOffset models kernel/kallsyms.c:kallsyms_lookup_size_offset.
func (s *Sorted) LookupSizeOffset(c *sim.Counters, addr uint64) (uint64, uint64, bool) {
	if s.isKsymAddr(addr) {
		_, size, off := s.getSymbolPos(c, addr)
		return size, off, true
	}
	if m, sym, next := s.moduleAddressLookup(c, addr); m != nil {
		return next - sym.Addr, addr - sym.Addr, true
	}
	return 0, 0, false
}

// LookupSymbolName models kernel/kallsyms.c:lookup_symbol_name.
func (s *Sorted) LookupSymbolName(c *sim.Counters, addr uint64) (string, bool) {
	if s.isKsymAddr(addr) {
		pos, _, _ := s.getSymbolPos(c, addr)
		c.Inc(OpExpand)
		return s.syms[pos].Name, true
	}
	if m, sym, _ := s.moduleAddressLookup(c, addr); m != nil {
		return sym.Name, true
	}
	return "", false
}

// IsMappingSymbol reports whether find_kallsyms_symbol skips a module
// symbol by name: assembler-local ".L" labels (gas keeps those that
// relocations against mergeable sections need) and ARM-style "$a", "$x",
// "$t", "$d" mapping symbols.
//
// Models kernel/module/kallsyms.c:is_arm_mapping_symbol.
func IsMappingSymbol(name string) bool {
	if len(name) >= 2 && name[0] == '.' && name[1] == 'L' {
		return true
	}
	return len(name) >= 2 && name[0] == '$' && strings.IndexByte("axtd", name[1]) >= 0 && (len(name) == 2 || name[2] == '.')
}

// moduleAddressLookup models kernel/module/kallsyms.c:module_address_lookup
// → __module_address, then find_kallsyms_symbol's linear scan for the
// closest preceding symbol (the first in symtab order at that address)
// and the next one (default: end of the text the address is in). Both
// resolvers use it; visited is the number of symtab entries the scan
// read, for the caller's counters.
func moduleAddressLookup(mods []*image.Module, addr uint64) (m *image.Module, best *image.Symbol, next uint64, visited int) {
	for _, mm := range mods {
		if mm.State != image.ModuleUnformed && mm.Contains(addr) {
			m = mm
			break
		}
	}
	if m == nil {
		return nil, nil, 0, 0
	}
	next = m.Text.End()
	if m.InitContains(addr) {
		next = m.Init.End()
	}
	for i := range m.Symbols {
		sym := &m.Symbols[i]
		if sym.Name == "" || IsMappingSymbol(sym.Name) {
			continue
		}
		if sym.Addr <= addr && (best == nil || sym.Addr > best.Addr) {
			best = sym
		}
		if sym.Addr > addr && sym.Addr < next {
			next = sym.Addr
		}
	}
	if best == nil {
		return nil, nil, 0, len(m.Symbols)
	}
	return m, best, next, len(m.Symbols)
}

// moduleAddressLookup models kernel/module/kallsyms.c:module_address_lookup
// → __module_address + find_kallsyms_symbol for the Sorted resolver: the
// shared scan above, counted.
func (s *Sorted) moduleAddressLookup(c *sim.Counters, addr uint64) (*image.Module, *image.Symbol, uint64) {
	c.Inc(OpModLookup)
	m, best, next, visited := moduleAddressLookup(s.modules, addr)
	c.Add(OpModSym, uint64(visited))
	return m, best, next
}
