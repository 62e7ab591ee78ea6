package kprobes

import "github.com/kpsim/kpsim/image"

// The kprobes behaviour of each kernel generation (6.1.192, 6.12.117,
// 7.3), chosen once in New from d.Image.Config.Gen.Effective(): a fact
// per kernel behaviour that differs, and the model function of the
// generation where the C differs materially. Every row was read in the
// three trees (kernel/kprobes.c, arch/x86/kernel/kprobes/{core,opt}.c,
// arch/x86/include/asm/ibt.h); docs/generations.md lists them.

// genModel is one generation's kprobes behaviour.
type genModel struct {
	gen image.Generation

	// canProbe is arch/x86/kernel/kprobes/core.c:can_probe: canProbe
	// (6.1.192: the boundary walk only) or canProbe612 (6.12.117, 7.3:
	// then recover and decode the instruction at paddr and refuse
	// is_exception_insn and, with CFI, a kCFI type check).
	canProbe func(kp *Kprobes, paddr uint64) bool
	// checkKprobeAddressSafe is kernel/kprobes.c:check_kprobe_address_safe:
	// checkKprobeAddressSafe (6.1.192, 6.12.117: try_module_get after the
	// reserved checks) or checkKprobeAddressSafe73 (7.3: right after
	// __module_text_address, module_put on a reserved refusal).
	checkKprobeAddressSafe func(kp *Kprobes, p *Kprobe) (*image.Module, error)
	// archAdjustKprobeAddr is arch/x86/kernel/kprobes/core.c:
	// arch_adjust_kprobe_addr: archAdjustKprobeAddr (6.1.192, 6.12.117:
	// copy_from_kernel_nofault of 4 bytes whatever the config, NULL on a
	// fault) or archAdjustKprobeAddr73 (7.3: is_endbr(u32 *), a stub
	// without CONFIG_X86_KERNEL_IBT, false on a fault).
	archAdjustKprobeAddr func(kp *Kprobes, addr, off uint64) (uint64, bool, error)
	// insnPages is where both insn caches take their pages: module_alloc
	// + set_memory_ro + set_memory_x (6.1.192), execmem_alloc +
	// set_memory_rox (6.12.117), the execmem ROX cache (7.3; one cache
	// shared by kprobe_insn_slots and kprobe_optinsn_slots).
	insnPages pageSource
	// rethookAlloc and rethookFree are register_kretprobe's instance pool
	// (CONFIG_KRETPROBE_ON_RETHOOK): rethook_alloc then maxactive kzalloc
	// (6.1.192: rethookAlloc, rethookFree), or rethook_alloc with an
	// objpool of one allocation per possible CPU (6.12.117, 7.3:
	// rethookAlloc612, rethookFree612).
	rethookAlloc func(kp *Kprobes, rp *Kretprobe) error
	rethookFree  func(kp *Kprobes, rp *Kretprobe)
	// textPokeRefsPerCPU: the text_poke_bp batch's in-flight refcount is
	// per CPU (7.3: smp_text_poke_batch_finish sets and drops
	// text_poke_array_refs on every possible CPU); 6.1.192 and 6.12.117
	// use one global bp_desc.refs (not counted).
	textPokeRefsPerCPU bool
	// condReschedInBatch: the text_poke_bp batch starts with cond_resched()
	// (6.12.117: text_poke_bp_batch, 7.3: smp_text_poke_batch_finish;
	// absent in 6.1.192).
	condReschedInBatch bool
	// freeCleanedReoptimize: do_free_cleaned_kprobes looks for an optprobe
	// covering each freed aggregator's address (get_optimized_kprobe) and
	// optimize_kprobe()s it before free_aggr_kprobe (7.3).
	freeCleanedReoptimize bool

	// alternativesTextReserved: arch_prepare_kprobe and
	// copy_optimized_instructions call alternatives_text_reserved
	// (6.1.192, 6.12.117). 7.3 removed the SMP alternatives
	// (smp_alt_modules) and both calls.
	alternativesTextReserved bool
	// canBoostGroups: can_boost boosts Grp2 (but /6), Grp3 (but /1), Grp4
	// inc/dec and Grp5 inc/dec/jmp (6.12.117, 7.3); 6.1.192 boosts none of
	// Grp2-4 and only Grp5's indirect jmp.
	canBoostGroups bool
	// isCFITrap: can_probe refuses a kCFI check's movl (0xBA) or addl
	// (0x03) whose trap is_cfi_trap knows: under IS_ENABLED(CONFIG_CFI_CLANG)
	// in 6.12.117, IS_ENABLED(CONFIG_CFI) in 7.3 (image.Config.CFI), absent
	// in 6.1.192.
	isCFITrap bool
	// cfiOption names the option gating it: CONFIG_CFI_CLANG (6.1.192,
	// 6.12.117), CONFIG_CFI (7.3; CFI_CLANG is transitional there).
	cfiOption string
	// insnIsIndirectJump: can_optimize refuses a function with an indirect
	// jump (ff /4, /5, ea): always in 6.1.192; in 6.12.117 and 7.3 only
	// without CONFIG_MITIGATION_RETPOLINE and CONFIG_X86_KERNEL_IBT
	// ("jump tables disabled so the check can be skipped altogether").
	insnIsIndirectJump bool
	// indirectThunkJump: can_optimize's insn_is_indirect_jump also refuses
	// a jump into [__indirect_thunk_start, __indirect_thunk_end] under
	// CONFIG_RETPOLINE (6.1.192 only; gone in 6.12.117 and 7.3).
	indirectThunkJump bool
	// armErrorSwallowed: __register_kprobe (7.3) unhashes a probe whose
	// arm_kprobe failed, synchronize_rcu, try_to_optimize_kprobe, then
	// returns 0; 6.1.192 and 6.12.117 register_kprobe return the error.
	armErrorSwallowed bool
	// onFuncEntryEarly: register_kprobe sets KPROBE_FLAG_ON_FUNC_ENTRY
	// before check_kprobe_address_safe (7.3), so a refused probe keeps it;
	// 6.1.192 and 6.12.117 set it after the check.
	onFuncEntryEarly bool
}

// genModelFor returns the kprobes behaviour of image k's generation.
func genModelFor(k *image.Kernel) genModel {
	cfg := k.Config
	g := genModel{
		gen:                      cfg.Gen.Effective(),
		canProbe:                 (*Kprobes).canProbe,
		checkKprobeAddressSafe:   (*Kprobes).checkKprobeAddressSafe,
		archAdjustKprobeAddr:     (*Kprobes).archAdjustKprobeAddr,
		insnPages:                moduleAllocPages{},
		rethookAlloc:             (*Kprobes).rethookAlloc,
		rethookFree:              (*Kprobes).rethookFree,
		alternativesTextReserved: true,
		insnIsIndirectJump:       true,
		indirectThunkJump:        true,
		cfiOption:                "CONFIG_CFI_CLANG",
	}
	switch g.gen {
	case image.Gen612, image.Gen73:
		g.canProbe = (*Kprobes).canProbe612
		g.insnPages = execmemPages{}
		g.rethookAlloc = (*Kprobes).rethookAlloc612
		g.rethookFree = (*Kprobes).rethookFree612
		g.condReschedInBatch = true
		g.canBoostGroups = true
		g.isCFITrap = cfg.CFI
		g.insnIsIndirectJump = !cfg.Retpoline && !cfg.IBT
		g.indirectThunkJump = false
	}
	if g.gen == image.Gen73 {
		g.checkKprobeAddressSafe = (*Kprobes).checkKprobeAddressSafe73
		g.archAdjustKprobeAddr = (*Kprobes).archAdjustKprobeAddr73
		g.alternativesTextReserved = false
		g.insnPages = &execmemROXCache{}
		g.textPokeRefsPerCPU = true
		g.freeCleanedReoptimize = true
		g.armErrorSwallowed = true
		g.onFuncEntryEarly = true
		g.cfiOption = "CONFIG_CFI"
	}
	return g
}
