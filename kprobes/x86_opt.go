package kprobes

import (
	"encoding/binary"
	"fmt"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// canOptimize models arch/x86/kernel/kprobes/opt.c:can_optimize in 6.1:
// decode the whole function (to the next symbol, padding included),
// refusing exception-table fixup targets, indirect jumps (with
// CONFIG_RETPOLINE also jumps into the thunk range) and branches into the
// 4 bytes after the int3. Every refusal returns at once; kp.why says why.
func (kp *Kprobes) canOptimize(paddr uint64) bool {
	c := kp.C
	const ck = "can_optimize"
	size, off, ok := kp.Syms.LookupSizeOffset(c, paddr)
	if !ok {
		kp.refuse(nil, ck, fmt.Sprintf("%#x is in no kallsyms symbol", paddr))
		return false
	}
	start := paddr - off
	tr := kp.tracing()
	c.Inc(opConst)
	if kp.entryText.End > 0 && kp.entryText.Contains(paddr) {
		kp.refuse(nil, ck, "in the entry text (__entry_text_start..__entry_text_end)")
		if tr {
			kp.note(ck, kp.symPlus(paddr), "false: in the entry text")
		}
		return false
	}
	if size-off < x86.JMP32InsnSize {
		kp.refuse(nil, ck, fmt.Sprintf("%d bytes from %s to the end of the symbol, a jmp needs 5", size-off, kp.rel(start, paddr)))
		if tr {
			kp.note(ck, kp.symPlus(paddr), fmt.Sprintf("false: only %d bytes to the next symbol", size-off))
		}
		return false
	}
	if tr {
		defer kp.hold()()
	}
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCanOptimize))
	defer kp.putRecoverer(r)
	n := 0
	fail := func(detail string) bool {
		kp.refuse(nil, ck, detail)
		if tr {
			kp.note(ck, kp.symPlus(paddr), fmt.Sprintf("false: walked %s of %s: %s", insns(n), kp.symPlus(start), detail))
		}
		return false
	}
	for addr := start; addr < start+size; {
		if kp.Extable != nil && kp.Extable.SearchExceptionTables(c, addr) {
			return fail(fmt.Sprintf("the instruction at %s has an exception-table entry (it may fault and be fixed up)", kp.rel(start, addr)))
		}
		ftraceSite, err := r.recoverProbedInstruction(addr)
		if err != nil {
			return fail("model error: " + err.Error())
		}
		insn, derr := kp.decodeAt(addr, ftraceSite)
		if derr != nil {
			return fail(fmt.Sprintf("the instruction at %s does not decode", kp.rel(start, addr)))
		}
		n++
		if x86.IsIndirectJump(insn) {
			return fail(fmt.Sprintf("indirect jump at %s", kp.rel(start, addr)))
		}
		if kp.insnIsIndirectJump(insn, addr) {
			return fail(fmt.Sprintf("jump into the indirect thunks at %s (CONFIG_RETPOLINE)", kp.rel(start, addr)))
		}
		if x86.InsnJumpIntoRange(insn, addr, paddr+x86.INT3InsnSize, x86.DISP32Size) {
			t := addr + uint64(insn.Len) + uint64(insn.Imm)
			return fail(fmt.Sprintf("jump into the probed bytes at %s (%s to %s)", kp.rel(start, addr), kp.insnName(insn, addr), kp.rel(start, t)))
		}
		addr += uint64(insn.Len)
	}
	if tr {
		kp.note(ck, kp.symPlus(paddr), fmt.Sprintf("true: walked %s of %s (to %s): no exception-table entry, no indirect jump, no jump into [%s, %s]",
			insns(n), kp.symPlus(start), fmt.Sprintf("+%d", size), kp.rel(start, paddr+1), kp.rel(start, paddr+1+x86.DISP32Size)))
	}
	return true
}

// insnIsIndirectJump models 6.1's opt.c:insn_is_indirect_jump: the
// __insn_is_indirect_jump opcode test, then with CONFIG_RETPOLINE a jump
// into [__indirect_thunk_start, __indirect_thunk_end].
func (kp *Kprobes) insnIsIndirectJump(i x86.Insn, addr uint64) bool {
	if x86.IsIndirectJump(i) {
		return true
	}
	if kp.Image.Config.Retpoline && kp.hasThunks {
		return x86.InsnJumpIntoRange(i, addr, kp.thunks.Start, int(kp.thunks.End-kp.thunks.Start))
	}
	return false
}

// copyOptimizedInstructions models opt.c:copy_optimized_instructions:
// copy whole instructions until at least JMP32_INSN_SIZE bytes, each
// boostable, then refuse a range that ftrace, alternatives, jump labels or
// static calls reserve. It returns the length copied or an Errno.
func (kp *Kprobes) copyOptimizedInstructions(src, real uint64) (int, error) {
	c := kp.C
	const ck = "copy_optimized_instructions"
	fn := func() uint64 { return kp.fnOf(src) }
	if kp.tracing() {
		defer kp.hold()()
	}
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCopyOptimized))
	defer kp.putRecoverer(r)
	n, k := 0, 0
	for n < x86.JMP32InsnSize {
		at := src + uint64(n)
		insn, ret, why := kp.copyInstruction(r, at, real+uint64(n))
		if ret == 0 {
			d := fmt.Sprintf("the instruction at %s %s", kp.rel(fn(), at), why)
			if kp.tracing() {
				kp.note(ck, kp.symPlus(src), "-EINVAL: "+d)
			}
			return 0, kp.refuse(EINVAL, ck+": __copy_instruction", d)
		}
		if !kp.canBoost(insn, at) {
			d := fmt.Sprintf("%s at %s is not boostable", kp.insnName(insn, at), kp.rel(fn(), at))
			if kp.Extable != nil && kp.Extable.SearchExceptionTables(nil, at) {
				d = fmt.Sprintf("%s at %s is not boostable (exception-table entry)", kp.insnName(insn, at), kp.rel(fn(), at))
			}
			if kp.tracing() {
				kp.note(ck, kp.symPlus(src), "-EINVAL: "+d)
			}
			return 0, kp.refuse(EINVAL, ck, d)
		}
		n += ret
		k++
	}
	end := src + uint64(n) - 1
	rng := func() string { return fmt.Sprintf("[%s, %s]", kp.rel(fn(), src), kp.rel(fn(), end)) }
	busy := func(check, detail string) (int, error) {
		d := detail + " in the copied bytes " + rng()
		if kp.tracing() {
			kp.note(ck, kp.symPlus(src), fmt.Sprintf("-EBUSY: %s: %s", check, d))
		}
		return 0, kp.refuse(EBUSY, ck+": "+check, d)
	}
	if kp.Ftrace != nil && kp.Ftrace.TextReserved(c, src, end) {
		return busy("ftrace_text_reserved", "an ftrace site")
	}
	c.Inc(opConst) // alternatives_text_reserved
	if r, err := reserved(kp.JumpLabel, c, src, end); err != nil || r {
		if err != nil {
			kp.refuse(err, ck+": jump_label_text_reserved", "BUG: "+kp.jumpLabelDetail(fn(), src, end)+" is not a 2- or 5-byte JMP or NOP")
			return 0, err
		}
		return busy("jump_label_text_reserved", kp.jumpLabelDetail(fn(), src, end))
	}
	if r, err := reserved(kp.StaticCall, c, src, end); err != nil || r {
		if err != nil {
			kp.refuse(err, ck+": static_call_text_reserved", "model error: "+err.Error())
			return 0, err
		}
		return busy("static_call_text_reserved", kp.staticCallDetail(fn(), src, end))
	}
	if kp.tracing() {
		kp.note(ck, kp.symPlus(src), fmt.Sprintf("%d bytes: %d boostable instructions %s, no ftrace, jump-label or static-call site in them", n, k, rng()))
	}
	return n, nil
}

// archCheckOptimizedKprobe models opt.c:arch_check_optimized_kprobe: an
// armed probe inside (addr, addr + size) forbids the jump. With
// iter-check-optimized one range iteration replaces size-1 get_kprobe.
func (kp *Kprobes) archCheckOptimizedKprobe(op *Kprobe) error {
	c := kp.C
	var blocker *Kprobe
	if kp.Sw.Has(sim.IterCheckOptimized) && kp.Reg.HasTree() {
		it := kp.Reg.CheckOptimizedRange(op.Addr, op.Opt.Size, c)
		for it.Next() {
			if !it.Probe().Disarmed() {
				blocker = it.Probe()
				break
			}
		}
	} else {
		for i := 1; i < op.Opt.Size; i++ {
			if q := kp.Reg.GetKprobe(op.Addr+uint64(i), c); q != nil && !q.Disarmed() {
				blocker = q
				break
			}
		}
	}
	fn := func() uint64 { return kp.fnOf(op.Addr) }
	rng := func() string {
		return fmt.Sprintf("(%s, %s)", kp.rel(fn(), op.Addr), kp.rel(fn(), op.Addr+uint64(op.Opt.Size)))
	}
	if blocker != nil {
		d := fmt.Sprintf("armed probe at %s inside the jump's bytes %s", kp.rel(fn(), blocker.Addr), rng())
		if kp.tracing() {
			kp.note("arch_check_optimized_kprobe", kp.symPlus(op.Addr), "-EEXIST: "+d)
		}
		return kp.refuse(EEXIST, "optimize_kprobe: arch_check_optimized_kprobe", d)
	}
	if kp.tracing() {
		kp.note("arch_check_optimized_kprobe", kp.symPlus(op.Addr), "0: no armed probe in "+rng())
	}
	return nil
}

// archPrepareOptimizedKprobe models opt.c:arch_prepare_optimized_kprobe.
// On failure op.Opt.Size stays 0 (arch_prepared_optinsn false) and kp.why
// says why.
func (kp *Kprobes) archPrepareOptimizedKprobe(op *Kprobe) error {
	c := kp.C
	if kp.tracing() {
		kp.open("arch_prepare_optimized_kprobe", kp.symPlus(op.Addr), "")
		defer kp.close()
	}
	if !kp.canOptimize(op.Addr) {
		return EILSEQ
	}
	c.Inc(opKmalloc) // buf = kzalloc(MAX_OPTINSN_SIZE)
	if kp.Faults.Fail(FaultOptinsnBuf) {
		return kp.refuse(ENOMEM, "arch_prepare_optimized_kprobe: kzalloc", "the MAX_OPTINSN_SIZE staging buffer could not be allocated")
	}
	defer c.Inc(opKmalloc)
	slot, ok := kp.optSlots.getInsnSlot(c, kp.Faults, FaultOptinsnSlot)
	if !ok {
		if kp.tracing() {
			kp.note("get_optinsn_slot", "", "NULL: -ENOMEM")
		}
		return kp.refuse(ENOMEM, "arch_prepare_optimized_kprobe: get_optinsn_slot", "no optinsn slot: allocating a new kprobe_insn_page failed")
	}
	if kp.tracing() {
		kp.note("get_optinsn_slot", "", fmt.Sprintf("%#x", slot))
	}
	op.optSlot = slot
	rel := int64(slot) - int64(op.Addr) + x86.JMP32InsnSize
	if rel > 0x7fffffff || rel < -0x7fffffff {
		kp.archRemoveOptimizedKprobe(op, false)
		return kp.refuse(ERANGE, "arch_prepare_optimized_kprobe", fmt.Sprintf("the detour buffer at %#x is out of rel32 reach", slot))
	}
	n, err := kp.copyOptimizedInstructions(op.Addr, slot+tmplEndIdx)
	if err != nil {
		kp.archRemoveOptimizedKprobe(op, false)
		return err
	}
	op.Opt.Size = n
	c.Inc(opPerfPoke)
	c.Inc(opTextPoke) // text_poke of the detour buffer into the slot
	return nil
}

// tmplEndIdx: where the copied instructions start in the detour buffer
// (TMPL_END_IDX). Only used to compute RIP-relative rebasing distances,
// which a few bytes do not change.
const tmplEndIdx = 96

// archRemoveOptimizedKprobe models opt.c:__arch_remove_optimized_kprobe.
func (kp *Kprobes) archRemoveOptimizedKprobe(op *Kprobe, dirty bool) {
	if op.optSlot != 0 {
		kp.optSlots.freeInsnSlot(kp.C, op.optSlot, dirty)
		op.optSlot = 0
		op.Opt.Size = 0
	}
}

// archOptimizeKprobe models one iteration of opt.c:arch_optimize_kprobes:
// save the 4 bytes after the int3, synthesize_reljump the JMP32 to the
// detour, write it with text_poke_bp (int3, sync, tail, sync, head, sync),
// leave the list. text_poke_bp's text_poke_loc_init decodes the new
// instruction (insn_decode_kernel, BUG_ON on failure) to classify it for
// poke_int3_handler: one counted decode per optimized probe
// (arch/x86/kernel/alternative.c, 6.1).
func (kp *Kprobes) archOptimizeKprobe(op *Kprobe) {
	copy(op.Opt.CopiedInsn[:], kp.Image.Text(op.Addr+1, 4))
	var jmp [x86.JMP32InsnSize]byte
	jmp[0] = 0xe9 // JMP32_INSN_OPCODE
	binary.LittleEndian.PutUint32(jmp[1:], uint32(int32(int64(op.optSlot)-int64(op.Addr+x86.JMP32InsnSize))))
	if _, err := x86.DecodeKernel(kp.C, jmp[:]); err != nil {
		panic("kprobes: text_poke_loc_init: the synthesized JMP32 does not decode") // BUG_ON; a kpsim bug
	}
	kp.textPoke(3)
	kp.C.Inc(opPerfPoke)
}

// archUnoptimizeKprobe models opt.c:arch_unoptimize_kprobe: int3 back,
// sync, restore the 4 bytes, sync.
func (kp *Kprobes) archUnoptimizeKprobe(op *Kprobe) {
	kp.textPoke(2)
	kp.C.Inc(opPerfPoke)
}
