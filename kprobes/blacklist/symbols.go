package blacklist

import "github.com/kpsim/kpsim/sim"

// Symbols is the kallsyms service within_kprobe_blacklist and
// populate_kprobe_blacklist need; kallsyms.Resolver implements it, and
// kallsyms.NewSorted is the default, so all kallsyms work is counted under
// the kallsyms.* ops wherever it happens.
type Symbols interface {
	// LookupSymbolName returns the name of the symbol containing addr
	// (kernel/kallsyms.c:lookup_symbol_name; false where it fails).
	LookupSymbolName(c *sim.Counters, addr uint64) (string, bool)
	// LookupName returns the address of the named symbol, vmlinux first,
	// then modules (kernel/kprobes.c:kprobe_lookup_name, the weak default
	// kallsyms_lookup_name); false for "not found" (address 0).
	LookupName(c *sim.Counters, name string) (uint64, bool)
	// LookupSizeOffset returns the size of the symbol containing addr and
	// addr's offset in it (kernel/kallsyms.c:kallsyms_lookup_size_offset).
	LookupSizeOffset(c *sim.Counters, addr uint64) (size, offset uint64, ok bool)
}
