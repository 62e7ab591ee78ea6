package kprobes

import (
	"encoding/binary"

	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// canOptimize models arch/x86/kernel/kprobes/opt.c:can_optimize: decode
// the whole function (to the next symbol, padding included), refusing
// exception-table fixup targets, indirect jumps (6.1.192: always, and with
// CONFIG_RETPOLINE also jumps into the thunk range; 6.12.117 and 7.3: only
// without CONFIG_MITIGATION_RETPOLINE and CONFIG_X86_KERNEL_IBT, and no
// thunk range) and branches into the 4 bytes after the int3. Every
// refusal returns at once; kp.why says why.
//
// Models arch/x86/kernel/kprobes/opt.c:can_optimize (6.1.192, 6.12.117, 7.3).
func (kp *Kprobes) canOptimize(paddr uint64) bool {
	c, x := kp.C, kp.ex()
	size, off, ok := kp.Syms.LookupSizeOffset(c, paddr)
	if !ok {
		x.refuse(nil, rec{ev: evCanOptimizeNoSymbol, addr: paddr})
		return false
	}
	start := paddr - off
	c.Inc(opConst)
	if kp.entryText.End > 0 && kp.entryText.Contains(paddr) {
		x.refuse(nil, rec{ev: evCanOptimizeEntryText, addr: paddr})
		return false
	}
	if size-off < x86.JMP32InsnSize {
		x.refuse(nil, rec{ev: evCanOptimizeTooShort, addr: paddr, size: size, off: off})
		return false
	}
	defer x.hold()()
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCanOptimize))
	defer kp.putRecoverer(r)
	n := 0
	var insn x86.Insn
	fail := func(e ev, addr uint64, err error) bool {
		x.refuse(nil, rec{ev: e, addr: paddr, at: start, end: addr, n: n, insn: insn, err: err})
		return false
	}
	for addr := start; addr < start+size; {
		if kp.Extable != nil && kp.Extable.SearchExceptionTables(c, addr) {
			return fail(evCanOptimizeExtable, addr, nil)
		}
		ftraceSite, err := r.recoverProbedInstruction(addr)
		if err != nil {
			return fail(evCanOptimizeModelError, addr, err)
		}
		var derr error
		if insn, derr = kp.decodeAt(addr, ftraceSite); derr != nil {
			return fail(evCanOptimizeNoDecode, addr, nil)
		}
		n++
		if kp.g.insnIsIndirectJump && x86.IsIndirectJump(insn) {
			return fail(evCanOptimizeIndirectJump, addr, nil)
		}
		if kp.g.indirectThunkJump && kp.insnIsIndirectJump(insn, addr) {
			return fail(evCanOptimizeThunk, addr, nil)
		}
		if x86.InsnJumpIntoRange(insn, addr, paddr+x86.INT3InsnSize, x86.DISP32Size) {
			return fail(evCanOptimizeJumpInto, addr, nil)
		}
		addr += uint64(insn.Len)
	}
	x.step(rec{ev: evCanOptimize, addr: paddr, at: start, size: size, n: n})
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
// boostable (the generation's can_boost), then refuse a range that ftrace,
// alternatives (6.1.192, 6.12.117; not 7.3), jump labels or static calls
// reserve. It returns the length copied or an Errno.
//
// Models arch/x86/kernel/kprobes/opt.c:copy_optimized_instructions (6.1.192, 6.12.117, 7.3).
func (kp *Kprobes) copyOptimizedInstructions(src, real uint64) (int, error) {
	c, x := kp.C, kp.ex()
	defer x.hold()()
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCopyOptimized))
	defer kp.putRecoverer(r)
	n, k := 0, 0
	for n < x86.JMP32InsnSize {
		at := src + uint64(n)
		insn, ret, why := kp.copyInstruction(r, at, real+uint64(n))
		if ret == 0 {
			return 0, x.refuse(EINVAL, rec{ev: evCopyOptInstruction, addr: src, end: at, err: why})
		}
		if !kp.canBoost(insn, at) {
			return 0, x.refuse(EINVAL, rec{ev: evCopyOptNotBoostable, addr: src, end: at, insn: insn})
		}
		n += ret
		k++
	}
	end := src + uint64(n) - 1
	if kp.Ftrace != nil && kp.Ftrace.TextReserved(c, src, end) {
		return 0, x.refuse(EBUSY, rec{ev: evCopyOptFtraceReserved, addr: src, end: end})
	}
	if kp.g.alternativesTextReserved { // 6.1.192, 6.12.117; gone in 7.3
		c.Inc(opConst) // alternatives_text_reserved
	}
	if r, err := reserved(kp.JumpLabel, c, src, end); err != nil || r {
		return 0, x.refuse(orEBUSY(err), rec{ev: evCopyOptJumpLabelReserved, addr: src, end: end})
	}
	if r, err := reserved(kp.StaticCall, c, src, end); err != nil || r {
		return 0, x.refuse(orEBUSY(err), rec{ev: evCopyOptStaticCall, addr: src, end: end})
	}
	x.step(rec{ev: evCopyOptimized, addr: src, end: end, n: n, k: k})
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
	if blocker != nil {
		return kp.ex().refuse(EEXIST, rec{ev: evArchCheckOptimized, addr: op.Addr, n: op.Opt.Size, p: blocker})
	}
	kp.ex().step(rec{ev: evArchCheckOptimized, addr: op.Addr, n: op.Opt.Size})
	return nil
}

// archPrepareOptimizedKprobe models opt.c:arch_prepare_optimized_kprobe.
// On failure op.Opt.Size stays 0 (arch_prepared_optinsn false) and kp.why
// says why.
func (kp *Kprobes) archPrepareOptimizedKprobe(op *Kprobe) error {
	c, x := kp.C, kp.ex()
	defer x.close(x.open(rec{ev: evArchPrepareOptimized, addr: op.Addr}))
	if !kp.canOptimize(op.Addr) {
		return EILSEQ
	}
	c.Inc(opKmalloc) // buf = kzalloc(MAX_OPTINSN_SIZE)
	if kp.Faults.Fail(FaultOptinsnBuf) {
		return x.refuse(ENOMEM, rec{ev: evOptinsnBuf})
	}
	defer c.Inc(opKmalloc)
	slot, ok := kp.optSlots.getInsnSlot(c, kp.Faults, FaultOptinsnSlot)
	if !ok {
		return x.refuse(ENOMEM, rec{ev: evGetOptinsnSlot})
	}
	x.step(rec{ev: evGetOptinsnSlot, at: slot})
	op.optSlot = slot
	rel := int64(slot) - int64(op.Addr) + x86.JMP32InsnSize
	if rel > 0x7fffffff || rel < -0x7fffffff {
		kp.archRemoveOptimizedKprobe(op, false)
		return x.refuse(ERANGE, rec{ev: evOptinsnSlotRange, at: slot})
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
// (arch/x86/kernel/alternative.c, 6.1). 6.12.117 adds a cond_resched() to
// the batch; 7.3 (smp_text_poke_single, smp_text_poke_batch_finish) makes
// the in-flight refcount per CPU: an atomic set and a dec_and_test on
// every possible CPU (the model takes Cfg.CPUs).
//
// Models arch/x86/kernel/kprobes/opt.c:arch_optimize_kprobes (6.1.192, 6.12.117, 7.3).
func (kp *Kprobes) archOptimizeKprobe(op *Kprobe) {
	copy(op.Opt.CopiedInsn[:], kp.Image.Text(op.Addr+1, 4))
	var jmp [x86.JMP32InsnSize]byte
	jmp[0] = 0xe9 // JMP32_INSN_OPCODE
	binary.LittleEndian.PutUint32(jmp[1:], uint32(int32(int64(op.optSlot)-int64(op.Addr+x86.JMP32InsnSize))))
	if _, err := kp.insn.DecodeKernel(kp.C, jmp[:]); err != nil {
		panic("kprobes: text_poke_loc_init: the synthesized JMP32 does not decode") // BUG_ON; a kpsim bug
	}
	if kp.g.condReschedInBatch { // 6.12.117, 7.3
		kp.C.Inc(opCondResched)
	}
	if kp.g.textPokeRefsPerCPU { // 7.3: set and dropped on every possible CPU
		kp.C.Add(opTextPokeRef, 2*uint64(max(kp.Cfg.CPUs, 1)))
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
