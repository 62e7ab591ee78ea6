package kprobes

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
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
// Errno, or a *BugError; every failure leaves its Reason in p.Why().
func (kp *Kprobes) RegisterKprobe(p *Kprobe) error {
	p.refused, kp.why = Reason{}, Reason{}
	x := kp.ex()
	defer x.close(x.open(rec{ev: evRegisterKprobe, p: p}))
	err := kp.registerKprobe(p)
	if err != nil {
		p.refused = kp.why
		if p.refused.IsZero() {
			p.refused = x.reason(rec{ev: evRegisterKprobeFailed, err: err})
		}
	}
	x.step(rec{ev: evRegisterKprobeReturns, err: err})
	return err
}

func (kp *Kprobes) registerKprobe(p *Kprobe) error {
	c, x := kp.C, kp.ex()
	prev := c.Enter(PhaseNameLookup)
	defer c.Enter(prev)

	addr, onEntry, err := kp.kprobeAddr(p)
	if err != nil {
		return err
	}
	if p.Registered() && addr != p.Addr {
		// The kernel would overwrite p->addr of a registered probe and
		// corrupt its lists; the model refuses instead.
		return x.refuse(EINVAL, rec{ev: evRegisteredElsewhere, addr: addr, at: p.Addr})
	}
	p.Addr = addr

	c.Enter(PhaseRereg)
	if kp.Reg.GetValidKprobe(p, c) != nil {
		// WARN_ON_ONCE: the same struct is already registered
		return x.refuse(EINVAL, rec{ev: evWarnKprobeRereg, addr: addr})
	}
	x.step(rec{ev: evWarnKprobeRereg, addr: addr})
	p.Flags &= KprobeFlagDisabled
	p.ainsn = archInsn{}
	p.armErr = nil
	if kp.g.onFuncEntryEarly && onEntry {
		// 7.3: set before check_kprobe_address_safe, kept on a refusal.
		p.Flags |= KprobeFlagOnFuncEntry
	}

	mod, err := kp.g.checkKprobeAddressSafe(kp, p)
	if err != nil {
		return err
	}
	_ = mod // module_put at the end: no cost modelled

	if onEntry {
		p.Flags |= KprobeFlagOnFuncEntry
	}
	c.Enter(PhaseInsert)
	if old := kp.Reg.GetKprobe(p.Addr, c); old != nil {
		defer x.close(x.open(rec{ev: evGetKprobe, addr: p.Addr, p: old}))
		return kp.registerAggrKprobe(old, p)
	}
	x.step(rec{ev: evGetKprobe, addr: p.Addr})

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
	x.step(rec{ev: evHlistAddHeadRCU, addr: p.Addr})
	// Not armed: try_to_optimize_kprobe's optimize_kprobe then gives the
	// reason (disabled, or all disarmed).
	switch {
	case kp.Reg.AllDisarmed:
		x.step(rec{ev: evArmSkippedAllDisarmed})
	case p.Disabled():
		x.step(rec{ev: evArmSkippedDisabled})
	default:
		c.Enter(PhaseArm)
		if err := kp.armKprobe(p); err != nil {
			c.Enter(PhaseInsert)
			if derr := kp.Reg.Delete(p, c); derr != nil {
				return fmt.Errorf("registry: %w", derr)
			}
			c.Inc(opSyncRCU)
			x.step(rec{ev: evHlistDelRCU, addr: p.Addr})
			if !kp.g.armErrorSwallowed {
				return err // 6.1 and 6.12 return the arm error
			}
			// 7.3's __register_kprobe goes on to try_to_optimize_kprobe
			// and returns 0: registered by its answer, neither hashed nor
			// armed (p.ArmError says so, p.Registered() is false).
			p.armErr = err
			p.refused = x.reason(rec{ev: evArmErrorSwallowed, p: p, err: err})
		}
	}
	c.Enter(PhaseOptimize)
	kp.tryToOptimizeKprobe(p)
	return nil
}

// ArmError is the arm_kprobe error 7.3's __register_kprobe swallowed: the
// last RegisterKprobe of p returned nil, but p was unhashed again and is
// not armed (Registered() is false, Why says why). Nil otherwise, and on
// 6.1 and 6.12, which return that error from register_kprobe.
func (p *Kprobe) ArmError() error { return p.armErr }

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
			// The rest of the batch says why it is not registered.
			for j, q := range ps {
				switch {
				case j < i:
					q.refused = kp.ex().reason(rec{ev: evRegisterKprobesRollback, n: i, p: p, err: err})
				case j > i:
					q.refused = kp.ex().reason(rec{ev: evRegisterKprobesSkipped, n: i, p: p, err: err})
				}
			}
			return i, err
		}
	}
	return len(ps), nil
}

// kprobeAddr models kernel/kprobes.c:_kprobe_addr with x86's
// arch_adjust_kprobe_addr (6.1: the no-fault 4-byte read is there).
func (kp *Kprobes) kprobeAddr(p *Kprobe) (uint64, bool, error) {
	c, x := kp.C, kp.ex()
	defer x.close(x.open(rec{ev: evKprobeAddr}))
	hasSym := p.SymbolName != ""
	if hasSym == (p.Addr != 0) {
		return 0, false, x.refuse(EINVAL, rec{ev: evKprobeAddrArgs, p: p})
	}
	addr := p.Addr
	if hasSym {
		// kprobe_lookup_name: the weak default, kallsyms_lookup_name.
		a, ok := kp.Syms.LookupName(c, p.SymbolName)
		if !ok {
			return 0, false, x.refuse(ENOENT, rec{ev: evKallsymsLookupName, name: p.SymbolName})
		}
		x.step(rec{ev: evKallsymsLookupName, name: p.SymbolName, at: a})
		addr = a
	}
	addr += uint64(p.Offset)
	size, off, ok := kp.Syms.LookupSizeOffset(c, addr)
	if !ok {
		return 0, false, x.refuse(ENOENT, rec{ev: evKallsymsLookupSizeOff, addr: addr, p: p})
	}
	x.step(rec{ev: evKallsymsLookupSizeOff, addr: addr, size: size, p: p})
	return kp.g.archAdjustKprobeAddr(kp, addr-off, off)
}

// archAdjustKprobeAddr models x86's arch_adjust_kprobe_addr of 6.1.192 and
// 6.12.117: copy_from_kernel_nofault of the 4 bytes at the symbol start
// whatever the config (NULL, so -EINVAL, on a fault), then is_endbr(u32),
// constant false without CONFIG_X86_KERNEL_IBT.
//
// Models arch/x86/kernel/kprobes/core.c:arch_adjust_kprobe_addr (6.1.192, 6.12.117).
func (kp *Kprobes) archAdjustKprobeAddr(addr, off uint64) (uint64, bool, error) {
	c, x := kp.C, kp.ex()
	// arch_adjust_kprobe_addr: copy_from_kernel_nofault of 4 bytes.
	c.Inc(opEndbrRead)
	b := kp.Image.Text(addr, 4)
	if len(b) < 4 {
		if kp.dataReadable(addr) {
			x.step(rec{ev: evArchAdjustData, addr: addr, off: off})
			return addr + off, off == 0, nil
		}
		return 0, false, x.refuse(EINVAL, rec{ev: evArchAdjustFault, addr: addr, off: off})
	}
	// is_endbr is constant false without CONFIG_X86_KERNEL_IBT.
	if kp.Image.Config.IBT && kp.insn.IsEndbr(b) {
		entry := off == 0 || off == 4
		if entry {
			off = 4
		}
		x.step(rec{ev: evArchAdjustEndbr, addr: addr + off, flag: entry})
		return addr + off, entry, nil
	}
	x.step(rec{ev: evArchAdjustNoEndbr, addr: addr + off})
	return addr + off, off == 0, nil
}

// archAdjustKprobeAddr73 models 7.3's arch_adjust_kprobe_addr: is_endbr(u32 *)
// reads the symbol start with __get_kernel_nofault only under
// CONFIG_X86_KERNEL_IBT (without it is_endbr is a stub: no read) and is
// false on a fault, so the function never fails; __is_endbr knows 7.3's
// poison (x86.Decoder.IsEndbr).
//
// Models arch/x86/kernel/kprobes/core.c:arch_adjust_kprobe_addr (7.3) with
// arch/x86/kernel/alternative.c:is_endbr (7.3).
func (kp *Kprobes) archAdjustKprobeAddr73(addr, off uint64) (uint64, bool, error) {
	x := kp.ex()
	if kp.Image.Config.IBT {
		kp.C.Inc(opEndbrRead) // __get_kernel_nofault of 4 bytes
		if kp.insn.IsEndbr(kp.Image.Text(addr, 4)) {
			entry := off == 0 || off == 4
			if entry {
				off = 4
			}
			x.step(rec{ev: evArchAdjustEndbr, addr: addr + off, flag: entry})
			return addr + off, entry, nil
		}
	}
	x.step(rec{ev: evArchAdjustNoEndbr, addr: addr + off})
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
//
// Models kernel/kprobes.c:check_kprobe_address_safe (6.1.192, 6.12.117).
func (kp *Kprobes) checkKprobeAddressSafe(p *Kprobe) (*image.Module, error) {
	c, x := kp.C, kp.ex()
	addr := p.Addr
	defer x.close(x.open(rec{ev: evCheckKprobeAddressSafe, addr: addr}))

	c.Enter(PhaseFtrace)
	if err := kp.checkFtraceLocation(p); err != nil {
		return nil, err
	}
	c.Enter(PhaseText)
	var mod *image.Module
	if !kp.coreKernelText(addr) {
		c.Inc(opModText)
		mod = kp.Image.ModuleTextAddress(addr)
		if mod == nil {
			return nil, x.refuse(EINVAL, rec{ev: evKernelText, addr: addr})
		}
	}
	x.step(rec{ev: evKernelText, addr: addr, mod: mod})
	if r, err := kp.addressReserved(addr); err != nil {
		return nil, x.refuse(err, r)
	}
	c.Enter(PhaseText)
	if mod != nil {
		c.Inc(opConst) // try_module_get
		if mod.State == image.ModuleGoing {
			return nil, x.refuse(ENOENT, rec{ev: evTryModuleGet, mod: mod})
		}
		if mod.InitContains(addr) && mod.State != image.ModuleComing {
			return nil, x.refuse(ENOENT, rec{ev: evWithinModuleInit, addr: addr, mod: mod})
		}
		x.step(rec{ev: evTryModuleGet, mod: mod})
	}
	return mod, nil
}

// addressReserved is check_kprobe_address_safe's one condition, the same
// in 6.1.192, 6.12.117 and 7.3: in_gate_area_no_mm ||
// within_kprobe_blacklist || jump_label_text_reserved ||
// static_call_text_reserved || find_bug || is_cfi_preamble_symbol, each
// counted in its phase. The refusal's record and a non-nil error
// (-EINVAL, or a model error) say which refused; the caller refuses with them.
//
// Models the reserved-area condition of kernel/kprobes.c:check_kprobe_address_safe.
func (kp *Kprobes) addressReserved(addr uint64) (rec, error) {
	c, x := kp.C, kp.ex()
	c.Inc(opConst) // in_gate_area_no_mm
	if addr >= vsyscallPage && addr < vsyscallPage+4096 {
		return rec{ev: evInGateArea, addr: addr}, EINVAL
	}
	x.step(rec{ev: evInGateArea, addr: addr})
	c.Enter(PhaseBlacklist)
	if kp.Blacklist != nil && kp.Blacklist.WithinKprobeBlacklist(c, addr) {
		return rec{ev: evWithinKprobeBlacklist, addr: addr}, EINVAL
	}
	x.step(rec{ev: evWithinKprobeBlacklist, addr: addr})
	c.Enter(PhaseJumpLabel)
	if r, err := reserved(kp.JumpLabel, c, addr, addr); err != nil || r {
		return rec{ev: evJumpLabelReserved, addr: addr}, orEINVAL(err)
	}
	x.step(rec{ev: evJumpLabelReserved, addr: addr})
	c.Enter(PhaseStaticCall)
	if r, err := reserved(kp.StaticCall, c, addr, addr); err != nil || r {
		return rec{ev: evStaticCallReserved, addr: addr}, orEINVAL(err)
	}
	x.step(rec{ev: evStaticCallReserved, addr: addr})
	c.Enter(PhaseBug)
	if kp.Bugs != nil && kp.Bugs.FindBug(c, addr) {
		return rec{ev: evFindBug, addr: addr}, EINVAL
	}
	x.step(rec{ev: evFindBug, addr: addr})
	c.Enter(PhaseCFI)
	name, cfi := kp.isCFIPreambleSymbol(addr)
	if cfi {
		return rec{ev: evCFIPreamble, addr: addr, name: name}, EINVAL
	}
	x.step(rec{ev: evCFIPreamble, addr: addr, name: name})
	return rec{}, nil
}

// checkKprobeAddressSafe73 models check_kprobe_address_safe in 7.3:
// try_module_get right after __module_text_address (-ENOENT for a going
// module, before any reserved check), then the reserved checks, each
// refusal dropping the reference again (module_put, -EINVAL), then the
// init-text check. A module address both reserved and in a going module
// gets -ENOENT here, -EINVAL in 6.1 and 6.12; a reserved module address
// costs one more module get/put pair.
//
// Models kernel/kprobes.c:check_kprobe_address_safe (7.3).
func (kp *Kprobes) checkKprobeAddressSafe73(p *Kprobe) (*image.Module, error) {
	c, x := kp.C, kp.ex()
	addr := p.Addr
	defer x.close(x.open(rec{ev: evCheckKprobeAddressSafe, addr: addr}))

	c.Enter(PhaseFtrace)
	if err := kp.checkFtraceLocation(p); err != nil {
		return nil, err
	}
	c.Enter(PhaseText)
	var mod *image.Module
	if !kp.coreKernelText(addr) {
		c.Inc(opModText)
		mod = kp.Image.ModuleTextAddress(addr)
		if mod == nil {
			return nil, x.refuse(EINVAL, rec{ev: evKernelText, addr: addr})
		}
		c.Inc(opConst) // try_module_get
		if mod.State == image.ModuleGoing {
			return nil, x.refuse(ENOENT, rec{ev: evTryModuleGet73, mod: mod})
		}
	}
	x.step(rec{ev: evKernelText, addr: addr, mod: mod})
	if mod != nil {
		x.step(rec{ev: evTryModuleGet73, mod: mod})
	}
	refuse := func(err error, r rec) (*image.Module, error) {
		if mod != nil {
			c.Inc(opConst) // module_put
		}
		return nil, x.refuse(err, r)
	}
	if r, err := kp.addressReserved(addr); err != nil {
		return refuse(err, r)
	}
	c.Enter(PhaseText)
	if mod != nil && mod.InitContains(addr) && mod.State != image.ModuleComing {
		return nil, x.refuse(ENOENT, rec{ev: evWithinModuleInit, addr: addr, mod: mod})
	}
	return mod, nil
}

// checkFtraceLocation models kernel/kprobes.c:check_ftrace_location: a
// probe on the __fentry__ call goes through ftrace (KPROBE_FLAG_FTRACE).
func (kp *Kprobes) checkFtraceLocation(p *Kprobe) error {
	var loc uint64
	if kp.Ftrace != nil {
		loc = kp.Ftrace.Location(kp.C, p.Addr)
	}
	onFtrace := kp.Ftrace != nil && loc == p.Addr
	if onFtrace {
		if !kp.Image.Config.KprobesOnFtrace {
			return kp.ex().refuse(EINVAL, rec{ev: evFtraceLocation, addr: p.Addr, at: loc})
		}
		p.Flags |= KprobeFlagFtrace
	}
	kp.ex().step(rec{ev: evFtraceLocation, addr: p.Addr, at: loc, flag: onFtrace})
	return nil
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

// isCFIPreambleSymbol models kernel/kprobes.c:is_cfi_preamble_symbol. It
// also returns the name lookup_symbol_name found.
func (kp *Kprobes) isCFIPreambleSymbol(addr uint64) (string, bool) {
	name, ok := kp.Syms.LookupSymbolName(kp.C, addr)
	if !ok {
		return "no symbol", false
	}
	return name, hasPrefix(name, "__cfi_") || hasPrefix(name, "__pfx_")
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// prepareKprobe models kernel/kprobes.c:prepare_kprobe.
func (kp *Kprobes) prepareKprobe(p *Kprobe) error {
	if p.Ftrace() {
		// arch_prepare_kprobe_ftrace: ainsn.insn = NULL, boostable = 0.
		kp.C.Inc(opConst)
		kp.ex().step(rec{ev: evPrepareKprobeFtrace, addr: p.Addr})
		return nil
	}
	return kp.archPrepareKprobe(p)
}

// armKprobe models kernel/kprobes.c:arm_kprobe.
func (kp *Kprobes) armKprobe(p *Kprobe) error {
	x := kp.ex()
	defer x.close(x.open(rec{ev: evArmKprobe, addr: p.Addr}))
	if p.Ftrace() {
		return kp.armKprobeFtrace(p)
	}
	kp.armKprobeInt3(p)
	return nil
}

// armKprobeFtrace models kernel/kprobes.c:arm_kprobe_ftrace: the ipmodify
// ops when the probe has a post handler.
func (kp *Kprobes) armKprobeFtrace(p *Kprobe) error {
	x := kp.ex()
	if kp.Ftrace == nil {
		return x.refuse(EINVAL, rec{ev: evArmKprobeFtraceNone})
	}
	if err := kp.Ftrace.ArmKprobeFtrace(kp.C, p.Addr, p.HasPostHandler); err != nil {
		var e Errno
		if !errors.As(err, &e) {
			e = EINVAL
		}
		return x.refuse(e, rec{ev: evArmKprobeFtrace, p: p, err: err})
	}
	x.step(rec{ev: evArmKprobeFtrace, p: p})
	return nil
}

// armKprobeInt3 models kernel/kprobes.c:__arm_kprobe.
func (kp *Kprobes) armKprobeInt3(p *Kprobe) {
	x := kp.ex()
	if op := kp.getOptimizedKprobe(p.Addr); op != nil {
		kp.unoptimizeKprobe(op, true, x.reason(rec{ev: evGetOptimizedKprobe, addr: p.Addr, p: op}))
	} else {
		x.step(rec{ev: evGetOptimizedKprobe, addr: p.Addr})
	}
	kp.archArmKprobe(p)
	x.step(rec{ev: evArchArmKprobe, addr: p.Addr})
	kp.optimizeKprobe(p)
}

// registerAggrKprobe models kernel/kprobes.c:register_aggr_kprobe.
func (kp *Kprobes) registerAggrKprobe(orig, p *Kprobe) error {
	c, x := kp.C, kp.ex()
	ap := orig
	var err error
	if !orig.IsAggr() {
		c.Enter(PhaseOptimize)
		ap = kp.allocAggrKprobe(orig)
		c.Enter(PhaseInsert)
		if ap == nil {
			return x.refuse(ENOMEM, rec{ev: evAllocAggrKprobeRefused})
		}
		ap.ainsn = orig.ainsn
		if e := kp.Reg.InitAggrKprobe(ap, orig, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
		x.step(rec{ev: evInitAggrKprobe, addr: ap.Addr})
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
			kp.unoptimizeKprobe(ap, true, x.reason(rec{ev: evAddNewKprobePostHandler}))
		}
		p.ainsn = ap.ainsn
		if e := kp.Reg.AddNewKprobe(ap, p, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
		x.step(rec{ev: evAddNewKprobe, addr: ap.Addr, n: ap.NumChildren()})
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
	if err == nil && !ap.Optimized() && ap.why.IsZero() {
		// Only try_to_optimize_kprobe, arm_kprobe and reuse_unused_kprobe
		// call optimize_kprobe; an aggregator made here stays int3.
		ap.why = x.reason(rec{ev: evAggrNotQueued})
		if ap.HasPostHandler {
			ap.why = x.reason(rec{ev: evPostHandler})
		}
	}
	return err
}

// reuseUnusedKprobe models kernel/kprobes.c:reuse_unused_kprobe.
func (kp *Kprobes) reuseUnusedKprobe(ap *Kprobe) error {
	ap.Flags &^= KprobeFlagDisabled
	if !ap.OptReady() {
		return kp.ex().refuse(EINVAL, rec{ev: evReuseUnusedKprobe})
	}
	kp.ex().step(rec{ev: evReuseUnusedKprobe, addr: ap.Addr})
	kp.optimizeKprobe(ap)
	return nil
}

// Parent returns the aggregator whose list holds p, or nil.
func (p *Kprobe) Parent() *Kprobe { return p.parent }
