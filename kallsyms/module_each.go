package kallsyms

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// ModuleOnEachSymbol models kernel/module/kallsyms.c:
// module_kallsyms_on_each_symbol as in 6.1 (no module-name argument):
// under module_mutex, every formed module on the modules list (newest
// first), every symtab entry that is not SHN_UNDEF, fn(name, module,
// value), one module.kallsyms.sym op each, until fn returns non-zero
// (returned). The 6.1 callers (number_of_same_symbols) never stop the walk,
// so a call costs every module symbol, hit or miss.
func (c *Compressed) ModuleOnEachSymbol(cn *sim.Counters, fn func(name string, m *image.Module, addr uint64) int) int {
	var tl tally
	defer tl.flush(cn)
	for _, m := range c.mods {
		if m.State == image.ModuleUnformed {
			continue
		}
		for _, s := range m.Symbols {
			tl.modSym++
			if s.Addr == 0 {
				continue // SHN_UNDEF: an image.Symbol with no address
			}
			if r := fn(s.Name, m, s.Addr); r != 0 {
				return r
			}
		}
	}
	return 0
}

// ModuleSymbols returns how many symtab entries module_kallsyms_on_each_symbol
// visits (M in the front-door formulas).
func (c *Compressed) ModuleSymbols() int {
	n := 0
	for _, m := range c.mods {
		if m.State != image.ModuleUnformed {
			n += len(m.Symbols)
		}
	}
	return n
}
