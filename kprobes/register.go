package kprobes

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// archInsn models struct arch_specific_insn as far as the model needs it.
type archInsn struct {
	slot      uint64 // ainsn.insn; 0 when none (ftrace probes, failures)
	size      int    // ainsn.size
	tpLen     int    // ainsn.tp_len
	boostable bool
}

// BugError is a kernel BUG() reached in the model (e.g. a jump-label site
// whose bytes are no jump or NOP): not an error code a caller gets back,
// the machine would be dead. Runs stop on it.
type BugError struct{ Err error }

func (e *BugError) Error() string { return "kernel BUG: " + e.Err.Error() }
func (e *BugError) Unwrap() error { return e.Err }

// gate area: the vsyscall page (in_gate_area_no_mm).
const vsyscallPage = 0xffffffffff600000

// RegisterKprobe models kernel/kprobes.c:register_kprobe as in Linux
// 6.1.192: _kprobe_addr, warn_kprobe_rereg, check_kprobe_address_safe,
// then under kprobe_mutex the existence check (aggregation), prepare_kprobe,
// insertion, arm_kprobe and try_to_optimize_kprobe. It returns nil, an
// Errno, or a *BugError.
func (kp *Kprobes) RegisterKprobe(p *Kprobe) error {
	c := kp.C
	prev := c.Enter(PhaseNameLookup)
	defer c.Enter(prev)

	addr, onEntry, err := kp.kprobeAddr(p)
	if err != nil {
		return err
	}
	if p.Registered() && addr != p.Addr {
		// The kernel would overwrite p->addr of a registered probe and
		// corrupt its lists; the model refuses instead.
		return EINVAL
	}
	p.Addr = addr

	c.Enter(PhaseRereg)
	if kp.Reg.GetValidKprobe(p, c) != nil {
		return EINVAL // WARN_ON_ONCE: the same struct is already registered
	}
	p.Flags &= KprobeFlagDisabled
	p.ainsn = archInsn{}

	mod, err := kp.checkKprobeAddressSafe(p)
	if err != nil {
		return err
	}
	_ = mod // module_put at the end: no cost modelled

	if onEntry {
		p.Flags |= KprobeFlagOnFuncEntry
	}
	c.Enter(PhaseInsert)
	if old := kp.Reg.GetKprobe(p.Addr, c); old != nil {
		return kp.registerAggrKprobe(old, p)
	}

	c.Enter(PhasePrepare)
	if err := kp.prepareKprobe(p); err != nil {
		return err
	}
	c.Enter(PhaseInsert)
	if err := kp.Reg.Insert(p, c); err != nil {
		if errors.Is(err, ErrNoMem) {
			// Only an alternative index allocates here (rhashtable slow
			// path, maple node split): the prepared slot is given back.
			kp.archRemoveKprobe(p)
			return ENOMEM
		}
		return fmt.Errorf("registry: %w", err)
	}
	if !kp.Reg.AllDisarmed && !p.Disabled() {
		c.Enter(PhaseArm)
		if err := kp.armKprobe(p); err != nil {
			c.Enter(PhaseInsert)
			if derr := kp.Reg.Delete(p, c); derr != nil {
				return fmt.Errorf("registry: %w", derr)
			}
			c.Inc(opSyncRCU)
			return err // 6.1 returns the arm error
		}
	}
	c.Enter(PhaseOptimize)
	kp.tryToOptimizeKprobe(p)
	return nil
}

// RegisterKprobes models kernel/kprobes.c:register_kprobes: all or
// nothing. It returns the index of the failing probe (or len) and its error.
func (kp *Kprobes) RegisterKprobes(ps []*Kprobe) (int, error) {
	if len(ps) == 0 {
		return 0, EINVAL
	}
	for i, p := range ps {
		if err := kp.RegisterKprobe(p); err != nil {
			if i > 0 {
				kp.UnregisterKprobes(ps[:i])
			}
			return i, err
		}
	}
	return len(ps), nil
}

// kprobeAddr models kernel/kprobes.c:_kprobe_addr with x86's
// arch_adjust_kprobe_addr (6.1: the no-fault 4-byte read is there).
func (kp *Kprobes) kprobeAddr(p *Kprobe) (uint64, bool, error) {
	c := kp.C
	hasSym := p.SymbolName != ""
	if hasSym == (p.Addr != 0) {
		return 0, false, EINVAL
	}
	addr := p.Addr
	if hasSym {
		// kprobe_lookup_name: the weak default, kallsyms_lookup_name.
		a, ok := kp.Syms.LookupName(c, p.SymbolName)
		if !ok {
			return 0, false, ENOENT
		}
		addr = a
	}
	addr += uint64(p.Offset)
	_, off, ok := kp.Syms.LookupSizeOffset(c, addr)
	if !ok {
		return 0, false, ENOENT
	}
	addr -= off
	// arch_adjust_kprobe_addr: copy_from_kernel_nofault of 4 bytes.
	c.Inc(opEndbrRead)
	b := kp.Image.Text(addr, 4)
	if len(b) < 4 {
		if kp.dataReadable(addr) {
			return addr + off, off == 0, nil
		}
		return 0, false, EINVAL
	}
	// is_endbr is constant false without CONFIG_X86_KERNEL_IBT.
	if kp.Image.Config.IBT && x86.IsEndbr(b) {
		entry := off == 0 || off == 4
		if entry {
			off = 4
		}
		return addr + off, entry, nil
	}
	return addr + off, off == 0, nil
}

// dataReadable: a kallsyms-known address outside text (KALLSYMS_ALL data
// symbols) reads fine in the kernel; only text bytes are in the model, so
// a symbol address outside text counts as readable data.
func (kp *Kprobes) dataReadable(addr uint64) bool {
	_, _, ok := kp.Syms.LookupSizeOffset(nil, addr)
	return ok
}

// coreKernelText models kernel/extable.c:core_kernel_text.
func (kp *Kprobes) coreKernelText(addr uint64) bool {
	kp.C.Inc(opConst)
	if kp.core != nil && kp.core.Contains(addr) {
		return true
	}
	return kp.init != nil && kp.State.InitTextIsCore() && kp.init.Contains(addr)
}

// checkKprobeAddressSafe models kernel/kprobes.c:check_kprobe_address_safe
// in 6.1: the module reference is taken only after every reserved-area
// check passed.
func (kp *Kprobes) checkKprobeAddressSafe(p *Kprobe) (*image.Module, error) {
	c := kp.C
	addr := p.Addr

	c.Enter(PhaseFtrace)
	// check_ftrace_location
	if kp.Ftrace != nil && kp.Ftrace.Location(c, addr) == addr {
		if !kp.Image.Config.KprobesOnFtrace {
			return nil, EINVAL
		}
		p.Flags |= KprobeFlagFtrace
	}

	c.Enter(PhaseText)
	var mod *image.Module
	if !kp.coreKernelText(addr) {
		c.Inc(opModText)
		mod = kp.Image.ModuleTextAddress(addr)
		if mod == nil {
			return nil, EINVAL
		}
	}
	c.Inc(opConst) // in_gate_area_no_mm
	if addr >= vsyscallPage && addr < vsyscallPage+4096 {
		return nil, EINVAL
	}
	c.Enter(PhaseBlacklist)
	if kp.Blacklist != nil && kp.Blacklist.WithinKprobeBlacklist(c, addr) {
		return nil, EINVAL
	}
	c.Enter(PhaseJumpLabel)
	if r, err := reserved(kp.JumpLabel, c, addr, addr); err != nil || r {
		return nil, orEINVAL(err)
	}
	c.Enter(PhaseStaticCall)
	if r, err := reserved(kp.StaticCall, c, addr, addr); err != nil || r {
		return nil, orEINVAL(err)
	}
	c.Enter(PhaseBug)
	if kp.Bugs != nil && kp.Bugs.FindBug(c, addr) {
		return nil, EINVAL
	}
	c.Enter(PhaseCFI)
	if kp.isCFIPreambleSymbol(addr) {
		return nil, EINVAL
	}
	c.Enter(PhaseText)
	if mod != nil {
		c.Inc(opConst) // try_module_get
		if mod.State == image.ModuleGoing {
			return nil, ENOENT
		}
		if mod.InitContains(addr) && mod.State != image.ModuleComing {
			return nil, ENOENT
		}
	}
	return mod, nil
}

func reserved(r TextReserver, c *sim.Counters, start, end uint64) (bool, error) {
	if r == nil {
		return false, nil
	}
	ok, err := r.TextReserved(c, start, end)
	if err != nil {
		return false, &BugError{err}
	}
	return ok, nil
}

func orEINVAL(err error) error {
	if err != nil {
		return err
	}
	return EINVAL
}

// isCFIPreambleSymbol models kernel/kprobes.c:is_cfi_preamble_symbol.
func (kp *Kprobes) isCFIPreambleSymbol(addr uint64) bool {
	name, ok := kp.Syms.LookupSymbolName(kp.C, addr)
	if !ok {
		return false
	}
	return hasPrefix(name, "__cfi_") || hasPrefix(name, "__pfx_")
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// prepareKprobe models kernel/kprobes.c:prepare_kprobe.
func (kp *Kprobes) prepareKprobe(p *Kprobe) error {
	if p.Ftrace() {
		// arch_prepare_kprobe_ftrace: ainsn.insn = NULL, boostable = 0.
		kp.C.Inc(opConst)
		return nil
	}
	return kp.archPrepareKprobe(p)
}

// armKprobe models kernel/kprobes.c:arm_kprobe.
func (kp *Kprobes) armKprobe(p *Kprobe) error {
	if p.Ftrace() {
		return kp.armKprobeFtrace(p)
	}
	kp.armKprobeInt3(p)
	return nil
}

// armKprobeFtrace models kernel/kprobes.c:arm_kprobe_ftrace: the ipmodify
// ops when the probe has a post handler.
func (kp *Kprobes) armKprobeFtrace(p *Kprobe) error {
	if kp.Ftrace == nil {
		return EINVAL
	}
	if err := kp.Ftrace.ArmKprobeFtrace(kp.C, p.Addr, p.HasPostHandler); err != nil {
		var e Errno
		if errors.As(err, &e) {
			return e
		}
		return EINVAL
	}
	return nil
}

// armKprobeInt3 models kernel/kprobes.c:__arm_kprobe.
func (kp *Kprobes) armKprobeInt3(p *Kprobe) {
	if op := kp.getOptimizedKprobe(p.Addr); op != nil {
		kp.unoptimizeKprobe(op, true)
	}
	kp.archArmKprobe(p)
	kp.optimizeKprobe(p)
}

// registerAggrKprobe models kernel/kprobes.c:register_aggr_kprobe.
func (kp *Kprobes) registerAggrKprobe(orig, p *Kprobe) error {
	c := kp.C
	ap := orig
	var err error
	if !orig.IsAggr() {
		c.Enter(PhaseOptimize)
		ap = kp.allocAggrKprobe(orig)
		c.Enter(PhaseInsert)
		if ap == nil {
			return ENOMEM
		}
		ap.ainsn = orig.ainsn
		if e := kp.Reg.InitAggrKprobe(ap, orig, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
	} else if ap.Unused() {
		err = kp.reuseUnusedKprobe(ap)
	}
	if err == nil && ap.Gone() {
		c.Enter(PhasePrepare)
		if err = kp.archPrepareKprobe(ap); err == nil {
			c.Enter(PhaseOptimize)
			kp.prepareOptimizedKprobe(ap, ap)
			ap.Flags = ap.Flags&^KprobeFlagGone | KprobeFlagDisabled
		}
		c.Enter(PhaseInsert)
	}
	if err == nil {
		// copy_kprobe + add_new_kprobe
		if p.HasPostHandler {
			kp.unoptimizeKprobe(ap, true)
		}
		p.ainsn = ap.ainsn
		if e := kp.Reg.AddNewKprobe(ap, p, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
	}
	if err == nil && ap.Disabled() && !p.Disabled() {
		ap.Flags &^= KprobeFlagDisabled
		if !kp.Reg.AllDisarmed {
			c.Enter(PhaseArm)
			if aerr := kp.armKprobe(ap); aerr != nil {
				ap.Flags |= KprobeFlagDisabled
				kp.Reg.removeChild(ap, p)
				c.Inc(opSyncRCU)
				return aerr
			}
		}
	}
	return err
}

// reuseUnusedKprobe models kernel/kprobes.c:reuse_unused_kprobe.
func (kp *Kprobes) reuseUnusedKprobe(ap *Kprobe) error {
	ap.Flags &^= KprobeFlagDisabled
	if !ap.OptReady() {
		return EINVAL
	}
	kp.optimizeKprobe(ap)
	return nil
}

// Parent returns the aggregator whose list holds p, or nil.
func (p *Kprobe) Parent() *Kprobe { return p.parent }
