package kprobes

import (
	"errors"
	"fmt"
	"strings"

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
// Errno, or a *BugError; every failure leaves its Reason in p.Why().
func (kp *Kprobes) RegisterKprobe(p *Kprobe) error {
	p.refused, kp.why = Reason{}, Reason{}
	if kp.tracing() {
		depth := kp.depth
		kp.open("register_kprobe", kp.probeArgs(p), "")
		defer func() { kp.depth = depth }()
	}
	err := kp.registerKprobe(p)
	if err != nil {
		p.refused = kp.why
		if p.refused.IsZero() {
			// Every failing check names itself; this is a model fault.
			p.refused = Reason{Check: "register_kprobe", Detail: "failed with " + errName(err)}
		}
	}
	if kp.tracing() {
		kp.note("register_kprobe", "", "returns "+errName(err))
	}
	return err
}

// probeArgs formats the caller's struct kprobe for the trail.
func (kp *Kprobes) probeArgs(p *Kprobe) string {
	var a []string
	if p.SymbolName != "" {
		a = append(a, fmt.Sprintf("symbol_name=%q", p.SymbolName))
	}
	if p.Offset != 0 {
		a = append(a, fmt.Sprintf("offset=%d", p.Offset))
	}
	if p.Addr != 0 {
		a = append(a, fmt.Sprintf("addr=%#x", p.Addr))
	}
	if p.HasPostHandler {
		a = append(a, "post_handler")
	}
	if p.Flags&KprobeFlagDisabled != 0 {
		a = append(a, "flags=KPROBE_FLAG_DISABLED")
	}
	return strings.Join(a, ", ")
}

func (kp *Kprobes) registerKprobe(p *Kprobe) error {
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
		return kp.refuse(EINVAL, "register_kprobe", fmt.Sprintf("this struct kprobe is registered at %s, not %s", kp.symPlus(p.Addr), kp.symPlus(addr)))
	}
	p.Addr = addr

	c.Enter(PhaseRereg)
	if kp.Reg.GetValidKprobe(p, c) != nil {
		// WARN_ON_ONCE: the same struct is already registered
		if kp.tracing() {
			kp.note("warn_kprobe_rereg: __get_valid_kprobe", kp.symPlus(addr), "this struct kprobe: -EINVAL")
		}
		return kp.refuse(EINVAL, "warn_kprobe_rereg: __get_valid_kprobe", "this struct kprobe is already registered at "+kp.rel(kp.fnOf(addr), addr))
	}
	if kp.tracing() {
		kp.note("warn_kprobe_rereg: __get_valid_kprobe", kp.symPlus(addr), "NULL (not registered yet)")
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
		if kp.tracing() {
			what := "a kprobe"
			if old.IsAggr() {
				what = fmt.Sprintf("an aggregator of %d kprobes", old.NumChildren())
			}
			kp.open("get_kprobe", kp.symPlus(p.Addr), what+": register_aggr_kprobe")
			defer kp.close()
		}
		return kp.registerAggrKprobe(old, p)
	}
	if kp.tracing() {
		kp.note("get_kprobe", kp.symPlus(p.Addr), "NULL: a new probe address")
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
	if kp.tracing() {
		kp.note("hlist_add_head_rcu", fmt.Sprintf("kprobe_table[%d]", HashPtr(p.Addr, KprobeHashBits)), "inserted")
	}
	// Not armed: try_to_optimize_kprobe's optimize_kprobe then gives the
	// reason (disabled, or all disarmed).
	switch {
	case kp.Reg.AllDisarmed:
		if kp.tracing() {
			kp.note("arm_kprobe", "", "skipped: kprobes_all_disarmed")
		}
	case p.Disabled():
		if kp.tracing() {
			kp.note("arm_kprobe", "", "skipped: KPROBE_FLAG_DISABLED")
		}
	default:
		c.Enter(PhaseArm)
		if err := kp.armKprobe(p); err != nil {
			c.Enter(PhaseInsert)
			if derr := kp.Reg.Delete(p, c); derr != nil {
				return fmt.Errorf("registry: %w", derr)
			}
			c.Inc(opSyncRCU)
			if kp.tracing() {
				kp.note("hlist_del_rcu", kp.symPlus(p.Addr), "unhashed after the arm failure")
			}
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
			// The rest of the batch says why it is not registered.
			why := fmt.Sprintf("kps[%d] failed with %s (%s)", i, errName(err), p.Why())
			for j, q := range ps {
				switch {
				case j < i:
					q.refused = Reason{Check: "register_kprobes", Detail: "rolled back: " + why}
				case j > i:
					q.refused = Reason{Check: "register_kprobes", Detail: "not attempted: " + why}
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
	c := kp.C
	if kp.tracing() {
		kp.open("_kprobe_addr", "", "")
		defer kp.close()
	}
	hasSym := p.SymbolName != ""
	if hasSym == (p.Addr != 0) {
		d := "neither symbol_name nor addr is set"
		if hasSym {
			d = "both symbol_name and addr are set"
		}
		if kp.tracing() {
			kp.note("_kprobe_addr", "", d+": -EINVAL")
		}
		return 0, false, kp.refuse(EINVAL, "_kprobe_addr", d)
	}
	addr := p.Addr
	if hasSym {
		// kprobe_lookup_name: the weak default, kallsyms_lookup_name.
		a, ok := kp.Syms.LookupName(c, p.SymbolName)
		if !ok {
			if kp.tracing() {
				kp.note("kallsyms_lookup_name", fmt.Sprintf("%q", p.SymbolName), "0: -ENOENT")
			}
			return 0, false, kp.refuse(ENOENT, "_kprobe_addr: kallsyms_lookup_name", fmt.Sprintf("no symbol %q in vmlinux or any module", p.SymbolName))
		}
		if kp.tracing() {
			kp.note("kallsyms_lookup_name", fmt.Sprintf("%q", p.SymbolName), fmt.Sprintf("%#x", a))
		}
		addr = a
	}
	addr += uint64(p.Offset)
	size, off, ok := kp.Syms.LookupSizeOffset(c, addr)
	if !ok {
		if kp.tracing() {
			kp.note("kallsyms_lookup_size_offset", fmt.Sprintf("%#x", addr), "0: in no symbol: -ENOENT")
		}
		d := fmt.Sprintf("%#x is in no kallsyms symbol", addr)
		if hasSym {
			d = fmt.Sprintf("%s+%d is in no kallsyms symbol", p.SymbolName, p.Offset)
		}
		return 0, false, kp.refuse(ENOENT, "_kprobe_addr: kallsyms_lookup_size_offset", d)
	}
	if kp.tracing() {
		r := fmt.Sprintf("%s/%#x", kp.symPlus(addr), size)
		if name, start, ok := kp.symbolOf(addr); hasSym && ok && name != p.SymbolName && addr-uint64(p.Offset) != start {
			r += fmt.Sprintf(" (offset %d is past the end of %s)", p.Offset, p.SymbolName)
		}
		kp.note("kallsyms_lookup_size_offset", fmt.Sprintf("%#x", addr), r)
	}
	addr -= off
	// arch_adjust_kprobe_addr: copy_from_kernel_nofault of 4 bytes.
	c.Inc(opEndbrRead)
	b := kp.Image.Text(addr, 4)
	if len(b) < 4 {
		if kp.dataReadable(addr) {
			if kp.tracing() {
				kp.note("arch_adjust_kprobe_addr", fmt.Sprintf("%s, %d", kp.symPlus(addr), off), fmt.Sprintf("%#x (not text: no ENDBR)", addr+off))
			}
			return addr + off, off == 0, nil
		}
		if kp.tracing() {
			kp.note("arch_adjust_kprobe_addr", fmt.Sprintf("%#x, %d", addr, off), "NULL (the 4-byte read faults): -EINVAL")
		}
		return 0, false, kp.refuse(EINVAL, "_kprobe_addr: arch_adjust_kprobe_addr", fmt.Sprintf("copy_from_kernel_nofault of the 4 bytes at %#x faults", addr))
	}
	// is_endbr is constant false without CONFIG_X86_KERNEL_IBT.
	if kp.Image.Config.IBT && x86.IsEndbr(b) {
		entry := off == 0 || off == 4
		if entry {
			off = 4
		}
		if kp.tracing() {
			r := fmt.Sprintf("%#x", addr+off)
			if entry {
				r += " (ENDBR at the entry: the probe goes after it, on_func_entry)"
			}
			kp.note("arch_adjust_kprobe_addr", kp.symPlus(addr+off), r)
		}
		return addr + off, entry, nil
	}
	if kp.tracing() {
		why := "no ENDBR"
		if !kp.Image.Config.IBT {
			why = "is_endbr is false without CONFIG_X86_KERNEL_IBT"
		}
		kp.note("arch_adjust_kprobe_addr", kp.symPlus(addr+off), fmt.Sprintf("%#x (%s)", addr+off, why))
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
	const cks = "check_kprobe_address_safe: "
	tr := kp.tracing()
	if tr {
		kp.open("check_kprobe_address_safe", kp.symPlus(addr), "")
		defer kp.close()
	}
	fn := func() uint64 { return kp.fnOf(addr) }

	c.Enter(PhaseFtrace)
	// check_ftrace_location
	var loc uint64
	if kp.Ftrace != nil {
		loc = kp.Ftrace.Location(c, addr)
	}
	if kp.Ftrace != nil && loc == addr {
		if !kp.Image.Config.KprobesOnFtrace {
			if tr {
				kp.note("check_ftrace_location: ftrace_location", kp.symPlus(addr), fmt.Sprintf("%#x: an ftrace site, no CONFIG_KPROBES_ON_FTRACE: -EINVAL", loc))
			}
			return nil, kp.refuse(EINVAL, cks+"check_ftrace_location", fmt.Sprintf("__fentry__ call at %s and no CONFIG_KPROBES_ON_FTRACE", kp.rel(fn(), addr)))
		}
		p.Flags |= KprobeFlagFtrace
		if tr {
			kp.note("check_ftrace_location: ftrace_location", kp.symPlus(addr), fmt.Sprintf("%#x: the __fentry__ call, KPROBE_FLAG_FTRACE", addr))
		}
	} else if tr {
		r := "0: no ftrace site"
		if loc != 0 {
			r = fmt.Sprintf("%#x (%s, the function's site, not this address)", loc, kp.symPlus(loc))
		}
		kp.note("check_ftrace_location: ftrace_location", kp.symPlus(addr), r)
	}

	c.Enter(PhaseText)
	var mod *image.Module
	if !kp.coreKernelText(addr) {
		c.Inc(opModText)
		mod = kp.Image.ModuleTextAddress(addr)
		if mod == nil {
			d := "not kernel or module text"
			if kp.init != nil && kp.init.Contains(addr) {
				d = "in .init.text, which is freed once the system runs (system_state >= SYSTEM_FREEING_INITMEM)"
			}
			if tr {
				kp.note("core_kernel_text", kp.symPlus(addr), "false")
				kp.note("__module_text_address", kp.symPlus(addr), "NULL: -EINVAL")
			}
			return nil, kp.refuse(EINVAL, cks+"__module_text_address", d)
		}
		if tr {
			kp.note("core_kernel_text", kp.symPlus(addr), "false")
			kp.note("__module_text_address", kp.symPlus(addr), "module "+mod.Name)
		}
	} else if tr {
		kp.note("core_kernel_text", kp.symPlus(addr), "true")
	}
	c.Inc(opConst) // in_gate_area_no_mm
	if addr >= vsyscallPage && addr < vsyscallPage+4096 {
		if tr {
			kp.note("in_gate_area_no_mm", fmt.Sprintf("%#x", addr), "true: -EINVAL")
		}
		return nil, kp.refuse(EINVAL, cks+"in_gate_area_no_mm", "in the vsyscall page")
	}
	if tr {
		kp.note("in_gate_area_no_mm", fmt.Sprintf("%#x", addr), "false")
	}
	c.Enter(PhaseBlacklist)
	if kp.Blacklist != nil && kp.Blacklist.WithinKprobeBlacklist(c, addr) {
		d := kp.blacklistDetail(addr)
		if tr {
			kp.note("within_kprobe_blacklist", kp.symPlus(addr), "true, "+d+": -EINVAL")
		}
		return nil, kp.refuse(EINVAL, cks+"within_kprobe_blacklist", d)
	}
	if tr {
		kp.note("within_kprobe_blacklist", kp.symPlus(addr), "false")
	}
	c.Enter(PhaseJumpLabel)
	if r, err := reserved(kp.JumpLabel, c, addr, addr); err != nil || r {
		d := kp.jumpLabelDetail(fn(), addr, addr)
		if err != nil {
			d = "BUG: " + d + " is not a 2- or 5-byte JMP or NOP"
		}
		if tr {
			kp.note("jump_label_text_reserved", fmt.Sprintf("[%#x, %#x]", addr, addr), "true, "+d)
		}
		return nil, kp.refuse(orEINVAL(err), cks+"jump_label_text_reserved", d)
	}
	if tr {
		kp.note("jump_label_text_reserved", fmt.Sprintf("[%#x, %#x]", addr, addr), "false")
	}
	c.Enter(PhaseStaticCall)
	if r, err := reserved(kp.StaticCall, c, addr, addr); err != nil || r {
		d := kp.staticCallDetail(fn(), addr, addr)
		if tr {
			kp.note("static_call_text_reserved", fmt.Sprintf("[%#x, %#x]", addr, addr), "true, "+d)
		}
		return nil, kp.refuse(orEINVAL(err), cks+"static_call_text_reserved", d)
	}
	if tr {
		kp.note("static_call_text_reserved", fmt.Sprintf("[%#x, %#x]", addr, addr), "false")
	}
	c.Enter(PhaseBug)
	if kp.Bugs != nil && kp.Bugs.FindBug(c, addr) {
		d := kp.bugDetail(fn(), addr)
		if tr {
			kp.note("find_bug", fmt.Sprintf("%#x", addr), d+": -EINVAL")
		}
		return nil, kp.refuse(EINVAL, cks+"find_bug", d)
	}
	if tr {
		kp.note("find_bug", fmt.Sprintf("%#x", addr), "NULL")
	}
	c.Enter(PhaseCFI)
	if name, yes := kp.isCFIPreambleSymbol(addr); yes {
		if tr {
			kp.note("is_cfi_preamble_symbol", kp.symPlus(addr), "true ("+name+"): -EINVAL")
		}
		return nil, kp.refuse(EINVAL, cks+"is_cfi_preamble_symbol", name+" is a CFI/FineIBT preamble")
	} else if tr {
		kp.note("is_cfi_preamble_symbol", kp.symPlus(addr), fmt.Sprintf("false (%s)", name))
	}
	c.Enter(PhaseText)
	if mod != nil {
		c.Inc(opConst) // try_module_get
		if mod.State == image.ModuleGoing {
			if tr {
				kp.note("try_module_get", mod.Name, "false (MODULE_STATE_GOING): -ENOENT")
			}
			return nil, kp.refuse(ENOENT, cks+"try_module_get", "module "+mod.Name+" is going away (MODULE_STATE_GOING)")
		}
		if mod.InitContains(addr) && mod.State != image.ModuleComing {
			if tr {
				kp.note("within_module_init", kp.symPlus(addr), fmt.Sprintf("true and module %s is %s: -ENOENT", mod.Name, mod.State))
			}
			return nil, kp.refuse(ENOENT, cks+"within_module_init", fmt.Sprintf("in module %s's init text and the module is %s, not coming", mod.Name, mod.State))
		}
		if tr {
			kp.note("try_module_get", mod.Name, "true")
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
		if kp.tracing() {
			kp.note("prepare_kprobe: arch_prepare_kprobe_ftrace", kp.symPlus(p.Addr), "0 (no instruction copy: ftrace calls the handler)")
		}
		return nil
	}
	return kp.archPrepareKprobe(p)
}

// armKprobe models kernel/kprobes.c:arm_kprobe.
func (kp *Kprobes) armKprobe(p *Kprobe) error {
	if kp.tracing() {
		kp.open("arm_kprobe", kp.symPlus(p.Addr), "")
		defer kp.close()
	}
	if p.Ftrace() {
		return kp.armKprobeFtrace(p)
	}
	kp.armKprobeInt3(p)
	return nil
}

// armKprobeFtrace models kernel/kprobes.c:arm_kprobe_ftrace: the ipmodify
// ops when the probe has a post handler.
func (kp *Kprobes) armKprobeFtrace(p *Kprobe) error {
	ops := "kprobe_ftrace_ops"
	if p.HasPostHandler {
		ops = "kprobe_ipmodify_ops"
	}
	if kp.Ftrace == nil {
		return kp.refuse(EINVAL, "arm_kprobe: arm_kprobe_ftrace", "no ftrace")
	}
	if err := kp.Ftrace.ArmKprobeFtrace(kp.C, p.Addr, p.HasPostHandler); err != nil {
		var e Errno
		if !errors.As(err, &e) {
			e = EINVAL
		}
		if kp.tracing() {
			kp.note("__arm_kprobe_ftrace", ops, err.Error())
		}
		return kp.refuse(e, "arm_kprobe: __arm_kprobe_ftrace", fmt.Sprintf("%s: %v", ops, err))
	}
	if kp.tracing() {
		kp.note("__arm_kprobe_ftrace", ops, "ftrace_set_filter_ip and register_ftrace_function: 0")
	}
	return nil
}

// armKprobeInt3 models kernel/kprobes.c:__arm_kprobe.
func (kp *Kprobes) armKprobeInt3(p *Kprobe) {
	if op := kp.getOptimizedKprobe(p.Addr); op != nil {
		fn := func() uint64 { return kp.fnOf(op.Addr) }
		if kp.tracing() {
			kp.note("__arm_kprobe: get_optimized_kprobe", kp.symPlus(p.Addr), fmt.Sprintf("the optprobe at %s covers it: unoptimize_kprobe(force)", kp.symPlus(op.Addr)))
		}
		kp.unoptimizeKprobe(op, true, Reason{Check: "__arm_kprobe: get_optimized_kprobe",
			Detail: fmt.Sprintf("unoptimized: a probe was armed at %s inside its jump [%s, %s)", kp.rel(fn(), p.Addr), kp.rel(fn(), op.Addr), kp.rel(fn(), op.Addr+uint64(op.Opt.Size)))})
	} else if kp.tracing() {
		kp.note("__arm_kprobe: get_optimized_kprobe", kp.symPlus(p.Addr), "NULL: no optprobe covers it")
	}
	kp.archArmKprobe(p)
	if kp.tracing() {
		kp.note("arch_arm_kprobe", kp.symPlus(p.Addr), "int3 written (text_poke + text_poke_sync)")
	}
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
			return kp.refuse(ENOMEM, "register_aggr_kprobe: alloc_aggr_kprobe", "kzalloc of the optimized_kprobe failed")
		}
		ap.ainsn = orig.ainsn
		if e := kp.Reg.InitAggrKprobe(ap, orig, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
		if kp.tracing() {
			kp.note("init_aggr_kprobe", kp.symPlus(ap.Addr), "the aggregator replaces the kprobe in kprobe_table")
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
			kp.unoptimizeKprobe(ap, true, Reason{Check: "register_aggr_kprobe: add_new_kprobe",
				Detail: "unoptimized: a probe with a post_handler joined (an optprobe cannot run post handlers)"})
		}
		p.ainsn = ap.ainsn
		if e := kp.Reg.AddNewKprobe(ap, p, c); e != nil {
			return fmt.Errorf("registry: %w", e)
		}
		if kp.tracing() {
			kp.note("add_new_kprobe", kp.symPlus(ap.Addr), fmt.Sprintf("added to ap->list (%d kprobes)", ap.NumChildren()))
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
	if err == nil && !ap.Optimized() && ap.why.IsZero() {
		// Only try_to_optimize_kprobe, arm_kprobe and reuse_unused_kprobe
		// call optimize_kprobe; an aggregator made here stays int3.
		ap.why = Reason{Check: "register_aggr_kprobe", Detail: "the aggregator made for this address is not queued for optimization (this path does not call optimize_kprobe)"}
		if ap.HasPostHandler {
			ap.why = postHandlerReason
		}
	}
	return err
}

// postHandlerReason: optimize_kprobe refuses an aggregator carrying
// aggr_post_handler.
var postHandlerReason = Reason{Check: "optimize_kprobe", Detail: "a probe at this address has a post_handler (an optprobe cannot run post handlers)"}

// reuseUnusedKprobe models kernel/kprobes.c:reuse_unused_kprobe.
func (kp *Kprobes) reuseUnusedKprobe(ap *Kprobe) error {
	ap.Flags &^= KprobeFlagDisabled
	if !ap.OptReady() {
		return kp.refuse(EINVAL, "register_aggr_kprobe: reuse_unused_kprobe", "the unused optprobe at this address is not optimization-ready")
	}
	if kp.tracing() {
		kp.note("reuse_unused_kprobe", kp.symPlus(ap.Addr), "the unused optprobe is reused")
	}
	kp.optimizeKprobe(ap)
	return nil
}

// Parent returns the aggregator whose list holds p, or nil.
func (p *Kprobe) Parent() *Kprobe { return p.parent }
