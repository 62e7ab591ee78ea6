// Package module models kernel/module/: loading a relocatable x86-64 .ko
// into the kernel-image model as Linux 6.1.192's loader lays it out.
//
// What Linux does (kernel/module/main.c:load_module, 6.1): it checks the
// ELF (elf_validity_check: ET_REL, EM_X86_64, 64-bit LSB), finds .modinfo,
// the symbol table, .gnu.linkonce.this_module and the per-cpu section
// (setup_load_info), clears SHF_ALLOC on .modinfo and __versions
// (rewrite_section_headers) and on .data..percpu (layout_and_allocate), marks
// .data..ro_after_init and __jump_table SHF_RO_AFTER_INIT, and groups the
// remaining SHF_ALLOC sections in five passes (layout_sections: text,
// rodata, ro_after_init, data, rest; core sections first, then the
// ".init*" ones), page-aligning after each group (STRICT_MODULE_RWX).
// layout_symtab appends the full symbol and string tables to init and a
// filtered copy of the "core" symbols to core. move_module allocates the
// core block and the init block with module_alloc (vmalloc in
// [MODULES_VADDR + load offset, MODULES_END)) and copies the sections.
// find_module_sections records the tables, simplify_symbols resolves every
// undefined symbol against the exports of vmlinux and of loaded modules,
// apply_relocations applies the RELA sections of allocated sections
// (arch/x86/kernel/module.c:apply_relocate_add: NONE, 64, 32, 32S, PC32,
// PLT32, PC64), post_relocation sorts the exception table and builds the
// module kallsyms (add_kallsyms), module_finalize patches the text
// (paravirt, retpolines, returns, alternatives), ftrace_module_init NOPs
// the __fentry__ calls, the COMING notifiers set up jump labels, static
// calls and the kprobe blacklist, do_init_module runs init, sets the state
// LIVE, trims the init entries of the exception table, switches kallsyms
// to the core symbols and frees the init block.
//
// This package does the same on an image.Kernel: Loader.Load reads a .ko
// (and, first, the modules its .modinfo "depends=" names), lays it out,
// resolves and relocates it, and appends a LIVE image.Module whose tables
// (__jump_table, .static_call_sites, __bug_table, __mcount_loc,
// __ex_table, _kprobe_blacklist) and ranges (.kprobes.text,
// .noinstr.text) are decoded from the relocated bytes. The image's module
// list stays oldest first (the kernel's "modules" list is newest first:
// consumers walk it backwards).
//
// Modelled module area: the kernel picks the first module address as
// MODULES_VADDR (0xffffffffc0000000) plus a random 1..1024 pages chosen
// once per boot (arch/x86/kernel/module.c:get_module_load_offset). kpsim
// is deterministic: it uses the smallest offset, one page, and allocates
// every block first-fit upwards as vmalloc does in an empty area, each
// block followed by its guard page (mm/vmalloc.c: VM_NO_GUARD is not set).
// Freed init blocks are not reused: vmalloc frees them lazily
// (purge_vmap_area_lazy runs only past lazy_max_pages), so the next module
// normally lands above them.
package module
