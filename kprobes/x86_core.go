package kprobes

import (
	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// recoverer answers the recovery lookups of one instruction walk: with an
// address iterator (P6, from a walker whose iter-* switch is on) or by
// point lookups / one range query per address.
type recoverer struct {
	kp   *Kprobes
	it   *AddrIter // nil: no iterator passed down; else &iter
	iter AddrIter
}

// newWalkRecoverer returns the recoverer for a walk that may use an
// address iterator when its switch is on. The caller gives it back with
// putRecoverer when the walk ends. (Simulator-side reuse: allocating a
// recoverer and its iterator for each of a registration's three walks was
// the largest allocation of a run.)
func (kp *Kprobes) newWalkRecoverer(useIter bool) *recoverer {
	var r *recoverer
	if n := len(kp.recoverers); n > 0 {
		r = kp.recoverers[n-1]
		kp.recoverers = kp.recoverers[:n-1]
	} else {
		r = new(recoverer)
	}
	*r = recoverer{kp: kp}
	if useIter && kp.Reg.HasTree() {
		r.iter = kp.Reg.AddrIter(Jmp32InsnSize-1, kp.C)
		r.it = &r.iter
	}
	return r
}

// putRecoverer takes back a recoverer whose walk has ended.
func (kp *Kprobes) putRecoverer(r *recoverer) {
	*r = recoverer{}
	kp.recoverers = append(kp.recoverers, r)
}

// recoverProbedInstruction models arch/x86/kernel/kprobes/core.c:
// recover_probed_instruction = __recover_optprobed_insn, then
// __recover_probed_insn. It reports whether the recovered bytes are the
// ideal NOP5 of an ftrace site (otherwise they are the original text: the
// model's text is never patched, so recovery always yields it).
func (r *recoverer) recoverProbedInstruction(addr uint64) (ftraceSite bool, err error) {
	kp := r.kp
	c := kp.C
	// __recover_optprobed_insn: addr, addr-1, ..., addr-4; a probe that is
	// OPTIMIZED and either jump-patched (op->list empty) or queued for
	// unoptimization counts; others do not stop the loop.
	var at *Kprobe
	found := false
	switch {
	case r.it != nil:
		p, qerr := r.it.Query(addr)
		if qerr != nil {
			return false, qerr
		}
		at = p
		win := r.it.Window()
		for i := len(win) - 1; i >= 0; i-- {
			if kp.jumpPatched(win[i]) {
				found = true
				break
			}
		}
	case kp.Sw.Has(sim.IterRecoverOptprobed):
		it := kp.Reg.RecoverWindow(addr, c)
		for it.Next() {
			q := it.Probe()
			if q.Addr == addr {
				at = q
			}
			if !found && kp.jumpPatched(q) {
				found = true
			}
		}
		if err := it.Err(); err != nil {
			return false, err
		}
	default:
		for i := uint64(0); i < Jmp32InsnSize && i <= addr; i++ {
			q := kp.Reg.GetKprobe(addr-i, c)
			if q != nil && kp.jumpPatched(q) {
				found = true
				break
			}
		}
	}
	if found {
		c.Inc(opCopyInsn)
		kp.ex().step(rec{ev: evRecoverOptprobed, addr: addr})
		return false, nil
	}
	// __recover_probed_insn: get_kprobe(addr) (served by the iterator or
	// the window when there is one) and ftrace_location(addr) == addr.
	if r.it == nil && !kp.Sw.Has(sim.IterRecoverOptprobed) {
		at = kp.Reg.GetKprobe(addr, c)
	}
	faddr := kp.Ftrace != nil && kp.Ftrace.Location(c, addr) == addr
	if at != nil || faddr {
		c.Inc(opCopyInsn)
		kp.ex().step(rec{ev: evRecoverProbed, addr: addr, flag: faddr})
	}
	return faddr, nil
}

// jumpPatched: kprobe_optimized(kp) && (list_empty(&op->list) ||
// optprobe_queued_unopt(op)).
//
// Models the per-candidate test of arch/x86/kernel/kprobes/opt.c:__recover_optprobed_insn.
func (kp *Kprobes) jumpPatched(q *Kprobe) bool {
	if !q.Optimized() {
		return false
	}
	if q.Queue == QueueNone {
		return true
	}
	return kp.optprobeQueuedUnopt(q)
}

// canProbe models arch/x86/kernel/kprobes/core.c:can_probe in 6.1: walk
// from the symbol start to paddr recovering and decoding each instruction;
// true when the walk lands exactly on paddr (6.1 does not decode the
// instruction at paddr itself). On false, kp.why says why.
//
// Models arch/x86/kernel/kprobes/core.c:can_probe (6.1.192).
func (kp *Kprobes) canProbe(paddr uint64) bool {
	c, x := kp.C, kp.ex()
	_, off, ok := kp.Syms.LookupSizeOffset(c, paddr)
	if !ok {
		x.refuse(nil, rec{ev: evCanProbeNoSymbol, addr: paddr})
		return false
	}
	defer x.hold()()
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCanProbe))
	defer kp.putRecoverer(r)
	fn := paddr - off
	n, ok := kp.canProbeWalk(r, fn, paddr)
	if !ok {
		return false
	}
	x.step(rec{ev: evCanProbe, addr: paddr, at: fn, n: n})
	return true
}

// canProbe612 models can_probe of 6.12.117 and 7.3: the same boundary
// walk, then recover_probed_instruction and insn_decode_kernel of the
// instruction at paddr itself (a failure of either refuses), refusing
// is_exception_insn (INT3, INT n, INTO, INT1, UD0/1/2) and, with CFI
// (CONFIG_CFI_CLANG in 6.12.117, CONFIG_CFI in 7.3), a kCFI type check's
// movl (0xBA) or addl (0x03) whose trap is_cfi_trap finds 12 or 6 bytes on.
//
// Models arch/x86/kernel/kprobes/core.c:can_probe (6.12.117, 7.3).
func (kp *Kprobes) canProbe612(paddr uint64) bool {
	c, x := kp.C, kp.ex()
	_, off, ok := kp.Syms.LookupSizeOffset(c, paddr)
	if !ok {
		x.refuse(nil, rec{ev: evCanProbeNoSymbol, addr: paddr})
		return false
	}
	defer x.hold()()
	r := kp.newWalkRecoverer(kp.Sw.Has(sim.IterCanProbe))
	defer kp.putRecoverer(r)
	fn := paddr - off
	n, ok := kp.canProbeWalk(r, fn, paddr)
	if !ok {
		return false
	}
	ftraceSite, err := r.recoverProbedInstruction(paddr)
	if err != nil {
		x.refuse(nil, rec{ev: evCanProbeModelError, err: err})
		return false
	}
	insn, derr := kp.decodeAt(paddr, ftraceSite)
	if derr != nil {
		x.refuse(nil, rec{ev: evCanProbeNoDecodeTarget, addr: paddr, at: fn, end: paddr, n: n})
		return false
	}
	if x86.IsExceptionInsn(insn) {
		x.refuse(nil, rec{ev: evCanProbeExceptionInsn, addr: paddr, at: fn, n: n, insn: insn})
		return false
	}
	if kp.g.isCFITrap {
		var off uint64
		switch {
		case insn.OpcodeLen == 1 && insn.Opcode[0] == 0xba: // insn.opcode.value == 0xBA
			off = 12
		case insn.OpcodeLen == 1 && insn.Opcode[0] == 0x03:
			off = 6
		}
		if off != 0 && kp.isCFITrap(paddr+off) {
			x.refuse(nil, rec{ev: evCanProbeCFITrap, addr: paddr, at: fn, end: paddr + off, n: n, insn: insn})
			return false
		}
	}
	x.step(rec{ev: evCanProbe612, addr: paddr, at: fn, n: n, insn: insn})
	return true
}

// canProbeWalk is can_probe's boundary walk (the same in 6.1.192,
// 6.12.117 and 7.3): from the symbol start fn to paddr, recovering and
// decoding each instruction. It returns the number of instructions
// walked; on a refusal, false with kp.why set.
func (kp *Kprobes) canProbeWalk(r *recoverer, fn, paddr uint64) (n int, ok bool) {
	x := kp.ex()
	addr := fn
	var last x86.Insn
	for addr < paddr {
		ftraceSite, err := r.recoverProbedInstruction(addr)
		if err != nil {
			x.refuse(nil, rec{ev: evCanProbeModelError, err: err})
			return n, false
		}
		insn, derr := kp.decodeAt(addr, ftraceSite)
		if derr != nil {
			x.refuse(nil, rec{ev: evCanProbeNoDecode, addr: paddr, at: fn, end: addr, n: n})
			return n, false
		}
		last = insn
		addr += uint64(insn.Len)
		n++
	}
	if addr != paddr {
		x.refuse(nil, rec{ev: evCanProbeBoundary, addr: paddr, at: fn, end: addr, n: n, insn: last})
		return n, false
	}
	return n, true
}

// isCFITrap models kernel/cfi.c:is_cfi_trap (CONFIG_ARCH_USES_CFI_TRAPS,
// which x86-64 selects with CFI_CLANG in 6.12.117 and CFI in 7.3): a linear
// walk of __cfi_traps, then the module's __kcfi_traps. The image carries
// no __cfi_traps table, so the model takes the trap the compiler records
// for each check: the ud2 the movl/addl's je skips (the bytes at addr are
// UD2), and counts the lookup as one opCFITrap.
func (kp *Kprobes) isCFITrap(addr uint64) bool {
	kp.C.Inc(opCFITrap)
	b := kp.Image.Text(addr, 2)
	return len(b) == 2 && b[0] == x86.UD2[0] && b[1] == x86.UD2[1]
}

// archPrepareKprobe models arch/x86/kernel/kprobes/core.c:arch_prepare_kprobe
// (6.1.192, 6.12.117: alternatives_text_reserved first; 7.3: no such check).
func (kp *Kprobes) archPrepareKprobe(p *Kprobe) error {
	c, x := kp.C, kp.ex()
	defer x.close(x.open(rec{ev: evArchPrepareKprobe, addr: p.Addr}))
	if kp.g.alternativesTextReserved { // 6.1.192, 6.12.117; gone in 7.3
		c.Inc(opConst) // alternatives_text_reserved: smp_alt_modules empty on SMP
		x.step(rec{ev: evAlternativesReserved, addr: p.Addr})
	}
	if !kp.g.canProbe(kp, p.Addr) {
		return EILSEQ
	}
	p.ainsn = archInsn{}
	slot, ok := kp.insnSlots.getInsnSlot(c, kp.Faults, FaultInsnSlot)
	if !ok {
		return x.refuse(ENOMEM, rec{ev: evGetInsnSlot})
	}
	x.step(rec{ev: evGetInsnSlot, at: slot})
	p.ainsn.slot = slot
	if err := kp.archCopyKprobe(p); err != nil {
		kp.insnSlots.freeInsnSlot(c, slot, false)
		p.ainsn.slot = 0
		return err
	}
	return nil
}

// copyInstruction models arch/x86/kernel/kprobes/core.c:__copy_instruction:
// recover, copy MAX_INSN_SIZE bytes, decode, refuse emulate-prefixed,
// int3 and exception-masking instructions, rebase a RIP-relative
// displacement to real. It returns the length, or 0 and what refused it (a
// copyRefusal, or the recovery's model error).
func (kp *Kprobes) copyInstruction(r *recoverer, src, real uint64) (x86.Insn, int, error) {
	ftraceSite, err := r.recoverProbedInstruction(src)
	if err != nil {
		return x86.Insn{}, 0, err
	}
	kp.C.Inc(opCopyInsn)
	insn, derr := kp.decodeAt(src, ftraceSite)
	if derr != nil {
		return insn, 0, copyNoDecode
	}
	if insn.EmulatePrefixLen > 0 {
		return insn, 0, copyEmulatePrefix
	}
	if insn.Opcode[0] == x86.INT3InsnOpcode {
		return insn, 0, copyInt3
	}
	if insnMaskingException(insn) {
		return insn, 0, copyMaskingException
	}
	if insn.RIPRelative() {
		newdisp := int64(src) + int64(insn.Disp) - int64(real)
		if int64(int32(newdisp)) != newdisp {
			return insn, 0, copyRIPOutOfReach
		}
	}
	return insn, insn.Len, nil
}

// copyRefusal is why __copy_instruction refused an instruction (returned
// 0); trail_text.go words it.
type copyRefusal uint8

const (
	copyNoDecode         copyRefusal = iota + 1 // insn_decode_kernel failed
	copyEmulatePrefix                           // insn_has_emulate_prefix
	copyInt3                                    // an INT3_INSN_OPCODE
	copyMaskingException                        // insn_masking_exception
	copyRIPOutOfReach                           // the rebased disp32 overflows
)

// insnMaskingException models arch/x86/include/asm/insn.h:
// insn_masking_exception: "pop %ss" or "mov ..., %ss".
func insnMaskingException(i x86.Insn) bool {
	return i.Opcode[0] == 0x17 || (i.Opcode[0] == 0x8e && i.ModRMReg() == 2)
}

// prepareEmulation models arch/x86/kernel/kprobes/core.c:prepare_emulation:
// the instructions kprobes refuses to single-step or emulate. On refusal it
// also says which they are (notEmulated, worded in trail_text.go).
func prepareEmulation(i x86.Insn) (notEmulated, error) {
	switch op := i.Opcode[0]; {
	case op == 0x9a:
		return notEmulatedFarCall, EOPNOTSUPP
	case op == 0xea:
		return notEmulatedFarJmp, EOPNOTSUPP
	case op == 0xcc:
		return notEmulatedInt3, EOPNOTSUPP
	case op == 0xcf:
		return notEmulatedIret, EOPNOTSUPP
	case op == 0x0f:
		if i.Opcode[1] == 0x01 && i.ModRMReg() == 0 && i.ModRMMod() == 3 {
			return notEmulatedVMX, EOPNOTSUPP
		}
	case op == 0xff:
		m := i.ModRM
		if m&0x30 != 0x10 && m&0x30 != 0x20 {
			return 0, nil
		}
		what := notEmulatedIndirectCall
		if m&0x30 == 0x20 {
			what = notEmulatedIndirectJmp
		}
		if m&0x8 == 0x8 {
			return what | notEmulatedFar, EOPNOTSUPP // far call / far jmp
		}
		if i.AddrBytes != 8 {
			return what | notEmulatedAddr32, EOPNOTSUPP
		}
		if m>>6 != 3 {
			return what | notEmulatedMemory, EOPNOTSUPP
		}
	}
	return 0, nil
}

// notEmulated is what prepare_emulation refused; trail_text.go words it.
// An indirect call or jmp (ff /2, /3, /4, /5) carries how it is refused.
type notEmulated uint8

const (
	notEmulatedFarCall      notEmulated = iota + 1 // 9a: lcall
	notEmulatedFarJmp                              // ea: ljmp
	notEmulatedInt3                                // cc
	notEmulatedIret                                // cf
	notEmulatedVMX                                 // 0f 01 /0, mod 3
	notEmulatedIndirectCall                        // ff /2, /3
	notEmulatedIndirectJmp                         // ff /4, /5

	notEmulatedFar    notEmulated = 1 << 4 // ff /3, /5
	notEmulatedAddr32 notEmulated = 2 << 4 // a 32-bit address size
	notEmulatedMemory notEmulated = 3 << 4 // through memory
)

// archCopyKprobe models arch/x86/kernel/kprobes/core.c:arch_copy_kprobe
// with prepare_singlestep.
func (kp *Kprobes) archCopyKprobe(p *Kprobe) error {
	c, x := kp.C, kp.ex()
	r := &recoverer{kp: kp}
	flush := x.hold()
	insn, n, why := kp.copyInstruction(r, p.Addr, p.ainsn.slot)
	if n == 0 {
		err := x.refuse(EINVAL, rec{ev: evCopyInstruction, addr: p.Addr, err: why})
		flush()
		return err
	}
	x.step(rec{ev: evCopyInstruction, addr: p.Addr, n: n, insn: insn})
	flush()
	if what, err := prepareEmulation(insn); err != nil {
		return x.refuse(err, rec{ev: evPrepareEmulation, addr: p.Addr, insn: insn, err: what})
	}
	x.step(rec{ev: evPrepareEmulation, addr: p.Addr, insn: insn})
	p.ainsn.size = insn.Len
	// prepare_singlestep: boost only without CONFIG_PREEMPTION (and no
	// post handler, can_boost, room for a JMP32); else append an int3.
	n = insn.Len
	if !kp.Cfg.Preemption && !p.HasPostHandler && kp.canBoost(insn, p.Addr) && x86.MaxInsnSize-n >= x86.JMP32InsnSize {
		n += x86.JMP32InsnSize
		p.ainsn.boostable = true
		x.step(rec{ev: evPrepareSinglestepBoost})
	} else {
		if x86.MaxInsnSize-n < x86.INT3InsnSize {
			return x.refuse(ENOSPC, rec{ev: evPrepareSinglestepRoom, addr: p.Addr, insn: insn})
		}
		n += x86.INT3InsnSize
		x.step(rec{ev: evPrepareSinglestepInt3, p: p})
	}
	p.Opcode = kp.Image.Text(p.Addr, 1)[0]
	p.ainsn.tpLen = n
	c.Inc(opPerfPoke)
	c.Inc(opTextPoke)
	return nil
}

// canBoost models arch/x86/kernel/kprobes/core.c:can_boost:
// search_exception_tables(addr) first (all three generations), then the
// opcode rules of the generation (6.1.192; 6.12.117 and 7.3 widened Grp2-5).
//
// Models arch/x86/kernel/kprobes/core.c:can_boost (6.1.192, 6.12.117, 7.3).
func (kp *Kprobes) canBoost(i x86.Insn, addr uint64) bool {
	if kp.Extable != nil && kp.Extable.SearchExceptionTables(kp.C, addr) {
		return false
	}
	return x86.CanBoost(i, kp.g.canBoostGroups)
}

// archArmKprobe models arch/x86/kernel/kprobes/core.c:arch_arm_kprobe:
// write the int3, sync every CPU, report the poke to perf.
func (kp *Kprobes) archArmKprobe(p *Kprobe) {
	kp.textPoke(1)
	kp.C.Inc(opPerfPoke)
}

// archDisarmKprobe models arch/x86/kernel/kprobes/core.c:arch_disarm_kprobe.
func (kp *Kprobes) archDisarmKprobe(p *Kprobe) {
	kp.C.Inc(opPerfPoke)
	kp.textPoke(1)
}

// archRemoveKprobe models arch/x86/kernel/kprobes/core.c:arch_remove_kprobe.
func (kp *Kprobes) archRemoveKprobe(p *Kprobe) {
	if p.ainsn.slot != 0 {
		kp.C.Inc(opPerfPoke)
		kp.insnSlots.freeInsnSlot(kp.C, p.ainsn.slot, p.ainsn.boostable)
		p.ainsn.slot = 0
	}
}

// textPoke counts n text_poke() writes, each followed by text_poke_sync().
//
// Models arch/x86/kernel/alternative.c:text_poke (its cost, not its bytes).
func (kp *Kprobes) textPoke(n int) {
	for ; n > 0; n-- {
		kp.C.Inc(opTextPoke)
		kp.textPokeSync()
	}
}

// textPokeSync counts text_poke_sync(): an IPI to every online CPU.
//
// Models arch/x86/kernel/alternative.c:text_poke_sync (6.1; later text_poke_sync_each_cpu).
func (kp *Kprobes) textPokeSync() {
	alternative.TextPokeSync(kp.C, kp.Cfg.CPUs)
}
