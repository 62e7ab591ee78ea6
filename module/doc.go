// Package module models kernel/module/: loading a relocatable x86-64 .ko
// (or a .ko.xz, .ko.zst, .ko.gz: Decompress) into the kernel-image model
// as the image's generation lays it out: 6.1.192, 6.12.117 or 7.3. The
// generation's loader (gen.go: loaderGen) is chosen once, from
// k.Config.Gen, when the Loader is made; what differs is listed at the end.
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
// module kallsyms (add_kallsyms), module_finalize patches the text for the
// boot CPU (paravirt, retpolines, returns, alternatives; see finalize.go
// for 6.12's and 7.3's), ftrace_module_init NOPs
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
//
// Since 6.4 (6.12, 7.3) module memory is mod->mem[MOD_TEXT, MOD_DATA,
// MOD_RODATA, MOD_RO_AFTER_INIT, MOD_INIT_TEXT, MOD_INIT_DATA,
// MOD_INIT_RODATA] (include/linux/module.h:enum mod_mem_type):
// __layout_sections puts each of the five mask passes' sections in its
// type (layoutSectionsMem), layout_symtab puts the core symbols in
// MOD_DATA and the full tables in MOD_INIT_DATA (layoutSymtabMem), and
// move_module allocates each type with a size separately, in enum order,
// with module_memory_alloc → execmem_alloc (6.10+): EXECMEM_MODULE_TEXT
// for the two text types, EXECMEM_MODULE_DATA for the rest, both
// [MODULES_VADDR + load offset, MODULES_END) on x86. In 6.12 every type
// is a vmalloc of its own (with its guard page). In 7.3
// (arch/x86/mm/init.c:execmem_arch_setup: CONFIG_ARCH_HAS_EXECMEM_ROX
// with PSE) text comes from the execmem ROX cache: 2 MiB PMD-aligned huge vmallocs carved first fit without guard
// pages, freed init text returning to the cache at once
// (execmemCache), while data blocks keep filling the vmap space below
// and between the cache's pieces (vmapSpace). The tables that changed:
// struct bug_entry gained a format offset in 7.3 (16 bytes with
// CONFIG_DEBUG_BUGVERBOSE: arch/x86/include/asm/bug.h:__BUG_ENTRY), and a
// WARN with arguments (BUGFLAG_ARGS) records the address after its lea,
// not a ud2; struct alt_instr is 14 bytes in 6.12 and 7.3 (12 in 6.1);
// 7.3 marks .static_call_sites ro_after_init
// (kernel/module/strict_rwx.c:module_mark_ro_after_init), reads exports
// from __ksymtab alone (__kflagstab flags the GPL-only ones;
// find_module_sections ignores __ksymtab_gpl), takes SHF_ALLOC from the
// extended modversion sections, and relocates the per-cpu template
// (apply_relocations). jump_entry (16 bytes), static_call_site (8),
// exception_table_entry (12), __mcount_loc and _kprobe_blacklist
// (8-byte addresses) are the same in all three.
//
// module_finalize (moduleFinalize) differs with alternative.Model, chosen
// from k.Config.Gen: 6.12 and 7.3 have no .parainstructions (pv calls are
// ALT_FLAG_DIRECT_CALL alternatives that read vmlinux's pv_ops), parse
// the 14-byte alt_instr, poison every .ibt_endbr_seal ENDBR
// (CONFIG_X86_KERNEL_IBT, whatever the CPU) and, with call depth
// tracking, re-aim the direct calls of MOD_TEXT at accounting thunks,
// writing into vmlinux's and other modules' function padding
// (callthunks_patch_module_calls; 6.12 after the alternatives and over
// them too, 7.3 before them).
package module
