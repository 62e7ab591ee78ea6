package ftrace

import "github.com/kpsim/kpsim/image"

// genFacts are the kernel/trace/ftrace.c behaviours that differ between
// the modelled generations, chosen once from the image's generation in
// New (image.Kernel.Config.Gen.Effective(): a synthetic image without a
// generation is 6.1).
type genFacts struct {
	gen image.Generation
	// lookupModules: ftrace_lookup_symbols walks the module symbols
	// (module_kallsyms_on_each_symbol(NULL, kallsyms_callback, &args))
	// when the vmlinux walk left a name unfound. 6.1.192's
	// ftrace_lookup_symbols returns after kallsyms_on_each_symbol
	// (kernel/trace/ftrace.c, 6.1.192); 6.12.117 and 7.3 walk the modules.
	lookupModules bool
	// lookupSingle: ftrace_lookup_symbols has the cnt == 1 fast path
	// upstream (7.3: addrs[0] = kallsyms_lookup_name(sorted_syms[0]); if
	// addrs[0] && ftrace_location(addrs[0]) return 0; else the walk) —
	// the form the ftrace-single-lookup switch patches into 6.1 and 6.12.
	lookupSingle bool
	// skipNonText: ftrace_process_locs skips a vmlinux __mcount_loc
	// entry that is not in kernel text or init text (!mod &&
	// !(is_kernel_text(addr) || is_kernel_inittext(addr)): skipped++),
	// 6.12.117 and 7.3; 6.1.192 makes a record of every non-NULL entry.
	skipNonText bool
}

var genTable = map[image.Generation]*genFacts{
	image.Gen61:  {gen: image.Gen61},
	image.Gen612: {gen: image.Gen612, lookupModules: true, skipNonText: true},
	image.Gen73:  {gen: image.Gen73, lookupModules: true, lookupSingle: true, skipNonText: true},
}

// factsFor returns generation g's facts (GenUnknown reads as 6.1).
func factsFor(g image.Generation) *genFacts { return genTable[g.Effective()] }

// Generation is the kernel generation whose ftrace.c this ftrace follows
// (the image's).
func (ft *Ftrace) Generation() image.Generation { return ft.g.gen }

// LookupModules reports whether ftrace_lookup_symbols walks module
// symbols after vmlinux (6.12+).
func (ft *Ftrace) LookupModules() bool { return ft.g.lookupModules }
