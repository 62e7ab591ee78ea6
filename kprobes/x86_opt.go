package kprobes

import (
	"encoding/binary"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// canOptimize models arch/x86/kernel/kprobes/opt.c:can_optimize in 6.1:
// decode the whole function (to the next symbol, padding included),
// refusing exception-table fixup targets, indirect jumps (with
// CONFIG_RETPOLINE also jumps into the thunk range) and branches into the
// 4 bytes after the int3. Every refusal returns at once.
func (kp *Kprobes) canOptimize(paddr uint64) bool {
	c := kp.C
	size, off, ok := kp.Syms.LookupSizeOffset(c, paddr)
	if !ok {
		return false
	}
	c.Inc(opConst)
	if kp.entryText.End > 0 && kp.entryText.Contains(paddr) {
		return false
	}
	if size-off < x86.JMP32InsnSize {
		return false
	}
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCanOptimize))
	start := paddr - off
	for addr := start; addr < start+size; {
		if kp.Extable != nil && kp.Extable.SearchExceptionTables(c, addr) {
			return false
		}
		ftraceSite, err := r.recoverProbedInstruction(addr)
		if err != nil {
			return false
		}
		insn, derr := kp.decodeAt(addr, ftraceSite)
		if derr != nil {
			return false
		}
		if kp.insnIsIndirectJump(insn, addr) || x86.InsnJumpIntoRange(insn, addr, paddr+x86.INT3InsnSize, x86.DISP32Size) {
			return false
		}
		addr += uint64(insn.Len)
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
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCopyOptimized))
	n := 0
	for n < x86.JMP32InsnSize {
		insn, ret := kp.copyInstruction(r, src+uint64(n), real+uint64(n))
		if ret == 0 || !kp.canBoost(insn, src+uint64(n)) {
			return 0, EINVAL
		}
		n += ret
	}
	end := src + uint64(n) - 1
	if kp.Ftrace != nil && kp.Ftrace.TextReserved(c, src, end) {
		return 0, EBUSY
	}
	c.Inc(opConst) // alternatives_text_reserved
	if r, err := reserved(kp.JumpLabel, c, src, end); err != nil || r {
		return 0, orEBUSY(err)
	}
	if r, err := reserved(kp.StaticCall, c, src, end); err != nil || r {
		return 0, orEBUSY(err)
	}
	return n, nil
}

func orEBUSY(err error) error {
	if err != nil {
		return err
	}
	return EBUSY
}

// archCheckOptimizedKprobe models opt.c:arch_check_optimized_kprobe: an
// armed probe inside (addr, addr + size) forbids the jump. With
// iter-check-optimized one range iteration replaces size-1 get_kprobe.
func (kp *Kprobes) archCheckOptimizedKprobe(op *Kprobe) error {
	c := kp.C
	if kp.Sw.Has(sim.IterCheckOptimized) && kp.Reg.HasTree() {
		it := kp.Reg.CheckOptimizedRange(op.Addr, op.Opt.Size, c)
		for it.Next() {
			if !it.Probe().Disarmed() {
				return EEXIST
			}
		}
		return nil
	}
	for i := 1; i < op.Opt.Size; i++ {
		if q := kp.Reg.GetKprobe(op.Addr+uint64(i), c); q != nil && !q.Disarmed() {
			return EEXIST
		}
	}
	return nil
}

// archPrepareOptimizedKprobe models opt.c:arch_prepare_optimized_kprobe.
// On failure op.Opt.Size stays 0 (arch_prepared_optinsn false).
func (kp *Kprobes) archPrepareOptimizedKprobe(op *Kprobe) error {
	c := kp.C
	if !kp.canOptimize(op.Addr) {
		return EILSEQ
	}
	c.Inc(opKmalloc) // buf = kzalloc(MAX_OPTINSN_SIZE)
	defer c.Inc(opKmalloc)
	slot, ok := kp.optSlots.getInsnSlot(c, kp.Faults, FaultOptinsnSlot)
	if !ok {
		return ENOMEM
	}
	op.optSlot = slot
	rel := int64(slot) - int64(op.Addr) + x86.JMP32InsnSize
	if rel > 0x7fffffff || rel < -0x7fffffff {
		kp.archRemoveOptimizedKprobe(op, false)
		return ERANGE
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
