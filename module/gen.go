package module

import (
	"github.com/kpsim/kpsim/image"
)

// loaderGen is what one kernel generation's module loader does
// differently. NewLoader picks it once from the image's generation
// (k.Config.Gen.Effective()); the model functions read its fields and
// call its functions, never the generation itself.
type loaderGen struct {
	gen image.Generation
	// layoutAndAllocate lays the module out and allocates and fills its
	// memory: layoutAndAllocate61 (one core and one init block) or
	// layoutAndAllocateMem (mod->mem[], 6.4 and later).
	layoutAndAllocate func(l *Loader, o *object) (*layout, *Memory, error)
	// layoutName says which layout the generation uses, for the notes
	// and Loaded.LayoutBy.
	layoutName string
	// execmemROX: module text comes from execmem's ROX cache
	// (EXECMEM_ROX_CACHE on EXECMEM_MODULE_TEXT: CONFIG_ARCH_HAS_EXECMEM_ROX
	// with X86_FEATURE_PSE; 6.12 has no ROX cache), not from a vmalloc per block.
	execmemROX bool
	// roAfterInit: the sections layout_and_allocate marks
	// SHF_RO_AFTER_INIT.
	roAfterInit []string
	// versions: the version sections rewrite_section_headers takes
	// SHF_ALLOC from (besides .modinfo).
	versions []string
	// ksymtabs: the export tables find_module_sections reads; plain is
	// mod->syms, whose symbols /proc/kallsyms prints upper case.
	ksymtabs []string
	plain    string
	// bug is struct bug_entry without and with CONFIG_DEBUG_BUGVERBOSE.
	bug [2]bugEntryLayout
	// altInstrSize is sizeof(struct alt_instr).
	altInstrSize int
	// relocPercpu: apply_relocations also relocates the per-cpu
	// section's ELF template, which is not SHF_ALLOC.
	relocPercpu bool
	// finalizeTables are the sections module_finalize patches from
	// (arch/x86/kernel/module.c), besides .smp_locks (patched only on a
	// uniprocessor boot) and .cfi_sites (FineIBT: not in Debian's gcc
	// builds).
	finalizeTables []string
}

// bugEntryLayout is struct bug_entry with
// CONFIG_GENERIC_BUG_RELATIVE_POINTERS: offsets of its fields (-1 when
// absent) and its size.
type bugEntryLayout struct {
	size                     int
	format, file, line, flag int
}

// Bug entry layouts (include/asm-generic/bug.h:struct bug_entry).
var (
	// 6.1, 6.12: bug_addr_disp, [file_disp, line,] flags.
	bugEntry61      = bugEntryLayout{size: 8, format: -1, file: -1, line: -1, flag: 4}
	bugEntry61Verb  = bugEntryLayout{size: 12, format: -1, file: 4, line: 8, flag: 10}
	bugEntry73      = bugEntryLayout{size: 12, format: 4, file: -1, line: -1, flag: 8}
	bugEntry73Verb  = bugEntryLayout{size: 16, format: 4, file: 8, line: 12, flag: 14}
	ksymtabs61      = []string{"__ksymtab", "__ksymtab_gpl"}
	roAfterInit61   = []string{".data..ro_after_init", "__jump_table"}
	versions61      = []string{"__versions"}
	loaderGen61Name = "layout_sections (6.1): one core and one init block, page-aligned text, rodata, ro_after_init and data groups inside each"
	// 6.1: apply_paravirt, apply_retpolines, apply_returns, apply_alternatives.
	finalizeTables61 = []string{".parainstructions", ".retpoline_sites", ".return_sites", ".altinstructions"}
	// 6.12, 7.3: no .parainstructions; call thunks and ENDBR sealing.
	finalizeTables612 = []string{".retpoline_sites", ".return_sites", ".call_sites", ".ibt_endbr_seal", ".altinstructions"}
	loaderGenMemNm    = "__layout_sections (6.4+): one block per mod_mem_type (MOD_TEXT, MOD_DATA, MOD_RODATA, MOD_RO_AFTER_INIT, MOD_INIT_TEXT, MOD_INIT_DATA, MOD_INIT_RODATA)"
)

// loaderGens are the modelled generations' loaders.
var loaderGens = map[image.Generation]*loaderGen{
	// 6.1.192: kernel/module/main.c:layout_sections with core_layout and
	// init_layout, module_alloc (vmalloc) per layout.
	image.Gen61: {
		gen: image.Gen61, layoutAndAllocate: layoutAndAllocate61, layoutName: loaderGen61Name,
		roAfterInit: roAfterInit61, versions: versions61, ksymtabs: ksymtabs61, plain: "__ksymtab",
		bug: [2]bugEntryLayout{bugEntry61, bugEntry61Verb}, altInstrSize: 12, finalizeTables: finalizeTables61,
	},
	// 6.12.117: mod->mem[] (6.4, "module: introduce module_memory"),
	// module_memory_alloc → execmem_alloc (6.10): a vmalloc per type in
	// the EXECMEM_DEFAULT range. struct alt_instr has 16 flag bits beside
	// the cpuid (14 bytes); .parainstructions is gone (paravirt patching
	// goes through alternatives).
	image.Gen612: {
		gen: image.Gen612, layoutAndAllocate: layoutAndAllocateMem, layoutName: loaderGenMemNm,
		roAfterInit: roAfterInit61, versions: versions61, ksymtabs: ksymtabs61, plain: "__ksymtab",
		bug: [2]bugEntryLayout{bugEntry61, bugEntry61Verb}, altInstrSize: 14, finalizeTables: finalizeTables612,
	},
	// 7.3: module text from the execmem ROX cache (mm/execmem.c;
	// arch/x86/mm/init.c:execmem_arch_setup); .static_call_sites is ro_after_init too
	// (kernel/module/strict_rwx.c:module_mark_ro_after_init); the
	// extended modversion tables lose SHF_ALLOC; one __ksymtab with a
	// __kflagstab (__ksymtab_gpl is obsolete and ignored); struct
	// bug_entry carries a format string (HAVE_ARCH_BUG_FORMAT on x86-64);
	// the per-cpu template is relocated.
	image.Gen73: {
		gen: image.Gen73, layoutAndAllocate: layoutAndAllocateMem, layoutName: loaderGenMemNm + "; text from the execmem ROX cache",
		execmemROX:  true,
		roAfterInit: []string{".data..ro_after_init", "__jump_table", ".static_call_sites"},
		versions:    []string{"__versions", "__version_ext_crcs", "__version_ext_names"},
		ksymtabs:    []string{"__ksymtab"}, plain: "__ksymtab",
		bug:          [2]bugEntryLayout{bugEntry73, bugEntry73Verb},
		altInstrSize: 14, relocPercpu: true, finalizeTables: finalizeTables612,
	},
}

// loaderGenFor returns the loader of generation g (GenUnknown reads as 6.1).
func loaderGenFor(g image.Generation) *loaderGen {
	if lg, ok := loaderGens[g.Effective()]; ok {
		return lg
	}
	return loaderGens[image.Gen61]
}

// Generation is the generation whose loader l models.
func (l *Loader) Generation() image.Generation { return l.gen.gen }

// LayoutName says how l lays modules out (the generation's layout
// function and allocator).
func (l *Loader) LayoutName() string { return l.gen.layoutName }

// bugEntry returns the generation's struct bug_entry for the image's
// CONFIG_DEBUG_BUGVERBOSE.
func (g *loaderGen) bugEntry(verbose bool) bugEntryLayout {
	if verbose {
		return g.bug[1]
	}
	return g.bug[0]
}
