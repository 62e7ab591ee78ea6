package kprobes

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// This file words what the model reports through kp.ex(): for each ev,
// the trail steps it records and, when the check refused, its Reason
// (the kernel call chain that decided, and what it found). Nothing here
// counts or decides; it reads the image directly and through the lookups
// of why.go.

// The events, in the order the register path meets them.
const (
	_ ev = iota // a rec without an ev has no wording

	// register_kprobe (register.go)
	evRegisterKprobe          // open; p: the caller's struct kprobe
	evRegisterKprobeReturns   // err: what it returns
	evRegisterKprobeFailed    // reason when no check named itself; err
	evRegisteredElsewhere     // addr: the new address, at: p->addr
	evWarnKprobeRereg         // addr
	evGetKprobe               // addr; p: the probe found there, or nil
	evHlistAddHeadRCU         // addr
	evArmSkippedAllDisarmed   //
	evArmSkippedDisabled      //
	evHlistDelRCU             // addr
	evRegisterKprobesRollback // n: the failing index, p: that probe, err
	evRegisterKprobesSkipped  // as evRegisterKprobesRollback
	evArmErrorSwallowed       // p, err: the arm_kprobe error (7.3 returns 0)

	// _kprobe_addr
	evKprobeAddr            // open
	evKprobeAddrArgs        // p
	evKallsymsLookupName    // name, at: the address found
	evKallsymsLookupSizeOff // addr, size; p: symbol_name and offset
	evArchAdjustData        // addr: the symbol start, off
	evArchAdjustFault       // addr: the symbol start, off
	evArchAdjustEndbr       // addr: the probe address; flag: on the entry
	evArchAdjustNoEndbr     // addr: the probe address

	// check_kprobe_address_safe
	evCheckKprobeAddressSafe // open; addr
	evFtraceLocation         // addr, at: ftrace_location; flag: at == addr
	evKernelText             // addr, mod: the module whose text holds it
	evInGateArea             // addr
	evWithinKprobeBlacklist  // addr
	evJumpLabelReserved      // addr
	evStaticCallReserved     // addr
	evFindBug                // addr
	evCFIPreamble            // addr, name: lookup_symbol_name's answer
	evTryModuleGet           // mod
	evTryModuleGet73         // mod (7.3: right after __module_text_address)
	evWithinModuleInit       // addr, mod

	// prepare_kprobe, arm_kprobe, register_aggr_kprobe
	evPrepareKprobeFtrace     // addr
	evArmKprobe               // open; addr
	evArmKprobeFtraceNone     //
	evArmKprobeFtrace         // p, err: what ftrace answered
	evGetOptimizedKprobe      // addr; p: the optprobe covering it, or nil
	evArchArmKprobe           // addr
	evAllocAggrKprobeRefused  //
	evInitAggrKprobe          // addr
	evAddNewKprobePostHandler //
	evAddNewKprobe            // addr, n: probes on the list
	evAggrNotQueued           //
	evPostHandler             //
	evReuseUnusedKprobe       // addr

	// arch_prepare_kprobe (x86_core.go)
	evRecoverOptprobed       // addr
	evRecoverProbed          // addr; flag: an ftrace site
	evCanProbeNoSymbol       // addr
	evCanProbeModelError     // err
	evCanProbeNoDecode       // addr: paddr, at: the symbol start, end: the walk's address, n
	evCanProbeBoundary       // as evCanProbeNoDecode; insn: the last one decoded
	evCanProbe               // as evCanProbeNoDecode
	evCanProbeNoDecodeTarget // as evCanProbeNoDecode (6.12+: the instruction at paddr)
	evCanProbeExceptionInsn  // as evCanProbeNoDecode; insn (6.12+)
	evCanProbeCFITrap        // as evCanProbeNoDecode; end: the trap, insn (6.12+, CFI)
	evCanProbe612            // as evCanProbeNoDecode; insn: the one at paddr
	evArchPrepareKprobe      // open; addr
	evAlternativesReserved   // addr
	evGetInsnSlot            // at: the slot
	evCopyInstruction        // addr, n: its length, insn, name: why it was refused
	evPrepareEmulation       // addr, insn, name: why it was refused
	evPrepareSinglestepBoost //
	evPrepareSinglestepRoom  // addr, insn
	evPrepareSinglestepInt3  // p

	// arch_prepare_optimized_kprobe (x86_opt.go)
	evCanOptimizeNoSymbol      // addr
	evCanOptimizeEntryText     // addr
	evCanOptimizeTooShort      // addr, size, off
	evCanOptimizeExtable       // addr: paddr, at: the symbol start, end: the instruction, n
	evCanOptimizeModelError    // as evCanOptimizeExtable; err
	evCanOptimizeNoDecode      // as evCanOptimizeExtable
	evCanOptimizeIndirectJump  // as evCanOptimizeExtable
	evCanOptimizeThunk         // as evCanOptimizeExtable
	evCanOptimizeJumpInto      // as evCanOptimizeExtable; insn
	evCanOptimize              // addr: paddr, at: the symbol start, size, n
	evCopyOptInstruction       // addr: src, end: the instruction, name: why it was refused
	evCopyOptNotBoostable      // addr: src, end: the instruction, insn
	evCopyOptFtraceReserved    // addr: src, end: the last copied byte
	evCopyOptJumpLabelReserved // as evCopyOptFtraceReserved
	evCopyOptStaticCall        // as evCopyOptFtraceReserved
	evCopyOptimized            // as evCopyOptFtraceReserved; n bytes, k instructions
	evArchCheckOptimized       // addr, n: the jump's size; p: the blocker, or nil
	evArchPrepareOptimized     // open; addr
	evOptinsnBuf               //
	evGetOptinsnSlot           // at: the slot
	evOptinsnSlotRange         // at: the slot
	evArchPrepareOptFailed     // err

	// the optimizer (optimizer.go)
	evAllocAggrKprobeFailed // addr
	evAllocAggrKprobe       // open; addr
	evPrepareOptFtrace      //
	evTryOptimizeFtrace     // addr
	evTryToOptimize         // open; addr
	evTryOptimizeNoAggr     //
	evTryOptimizeUnprepared //
	evInitOptKprobe         // addr
	evOptimizeNotReady      // addr, p
	evOptimizeNoSysctl      // addr
	evOptimizeDisabled      // addr
	evOptimizeAllDisarmed   // addr
	evOptimizePostHandler   // addr
	evOptimizeKeptJump      // addr
	evOptimizeQueued        // addr
	evUnoptimizeKprobe      // addr, name: why
	evDisarmUnoptimize      //
	evArchOptimizeKprobes   // addr, n: the jump's size

	// enable_kprobe, register_kretprobe (enable.go)
	evEnableNotRegistered     //
	evEnableGone              //
	evEnableKprobe            // open; addr
	evRegisterKretprobeFailed // err
	evKretprobeNotEntry       // p
	evKretprobeRereg          //
	evKretprobeBlacklist      //
	evKretprobeDataSize       // n
)

const cks = "check_kprobe_address_safe: "

// cfiOption is the config option gating can_probe's is_cfi_trap check in
// the image's generation (the fact table's).
func (kp *Kprobes) cfiOption() string { return kp.g.cfiOption }

// words renders r: its trail steps when a Recorder is set, and the
// Reason when the check refused (failed) with errno err.
func (kp *Kprobes) words(r rec, err error, failed bool) Reason {
	tr := kp.Trail != nil
	note := func(check, args, result string) {
		if tr {
			kp.note(check, args, result)
		}
	}
	why := func(check, detail string) Reason {
		if failed {
			return Reason{Check: check, Detail: detail}
		}
		return Reason{}
	}
	hex := func(a uint64) string { return fmt.Sprintf("%#x", a) }
	// slot words a slot taken by caller with fn (get_insn_slot or
	// get_optinsn_slot: __get_insn_slot on the kind's cache).
	slot := func(caller, fn, kind string) Reason {
		if failed {
			note(fn, "", "NULL: -ENOMEM")
			return why(caller+": "+fn, "no "+kind+" slot: allocating a new kprobe_insn_page failed")
		}
		note(fn, "", hex(r.at))
		return Reason{}
	}
	switch r.ev {
	case evRegisterKprobe:
		note("register_kprobe", probeArgs(r.p), "")
	case evRegisterKprobeReturns:
		note("register_kprobe", "", "returns "+errName(r.err))
	case evRegisterKprobeFailed:
		// Every failing check names itself; this is a model fault.
		return why("register_kprobe", "failed with "+errName(r.err))
	case evRegisteredElsewhere:
		return why("register_kprobe", fmt.Sprintf("this struct kprobe is registered at %s, not %s", kp.symPlus(r.at), kp.symPlus(r.addr)))
	case evWarnKprobeRereg:
		const ck = "warn_kprobe_rereg: __get_valid_kprobe"
		if !failed {
			note(ck, kp.symPlus(r.addr), "NULL (not registered yet)")
			break
		}
		note(ck, kp.symPlus(r.addr), "this struct kprobe: -EINVAL")
		return why(ck, "this struct kprobe is already registered at "+kp.rel(kp.fnOf(r.addr), r.addr))
	case evGetKprobe:
		if tr && r.p != nil {
			what := "a kprobe"
			if r.p.IsAggr() {
				what = fmt.Sprintf("an aggregator of %d kprobes", r.p.NumChildren())
			}
			note("get_kprobe", kp.symPlus(r.addr), what+": register_aggr_kprobe")
		} else if tr {
			note("get_kprobe", kp.symPlus(r.addr), "NULL: a new probe address")
		}
	case evHlistAddHeadRCU:
		if tr {
			note("hlist_add_head_rcu", fmt.Sprintf("kprobe_table[%d]", HashPtr(r.addr, KprobeHashBits)), "inserted")
		}
	case evArmSkippedAllDisarmed:
		note("arm_kprobe", "", "skipped: kprobes_all_disarmed")
	case evArmSkippedDisabled:
		note("arm_kprobe", "", "skipped: KPROBE_FLAG_DISABLED")
	case evHlistDelRCU:
		if tr {
			note("hlist_del_rcu", kp.symPlus(r.addr), "unhashed after the arm failure")
		}
	case evArmErrorSwallowed:
		if tr {
			note("__register_kprobe", "", "arm_kprobe failed ("+errName(r.err)+"), unhashed; returns 0 anyway (7.3 only; 6.1 and 6.12 return the error)")
		}
		return why("__register_kprobe: arm_kprobe", fmt.Sprintf("arming failed with %s and the probe was unhashed, but __register_kprobe (7.3) returned 0: registered by its answer, not attached (%s)", errName(r.err), r.err))
	case evRegisterKprobesRollback, evRegisterKprobesSkipped:
		// The rest of the batch says why it is not registered.
		d := fmt.Sprintf("kps[%d] failed with %s (%s)", r.n, errName(r.err), r.p.Why())
		if r.ev == evRegisterKprobesRollback {
			return why("register_kprobes", "rolled back: "+d)
		}
		return why("register_kprobes", "not attempted: "+d)

	case evKprobeAddr:
		note("_kprobe_addr", "", "")
	case evKprobeAddrArgs:
		d := "neither symbol_name nor addr is set"
		if r.p.SymbolName != "" {
			d = "both symbol_name and addr are set"
		}
		note("_kprobe_addr", "", d+": -EINVAL")
		return why("_kprobe_addr", d)
	case evKallsymsLookupName:
		if !failed {
			if tr {
				note("kallsyms_lookup_name", fmt.Sprintf("%q", r.name), hex(r.at))
			}
			break
		}
		if tr {
			note("kallsyms_lookup_name", fmt.Sprintf("%q", r.name), "0: -ENOENT")
		}
		return why("_kprobe_addr: kallsyms_lookup_name", fmt.Sprintf("no symbol %q in vmlinux or any module", r.name))
	case evKallsymsLookupSizeOff:
		hasSym := r.p.SymbolName != ""
		if failed {
			note("kallsyms_lookup_size_offset", hex(r.addr), "0: in no symbol: -ENOENT")
			d := fmt.Sprintf("%#x is in no kallsyms symbol", r.addr)
			if hasSym {
				d = fmt.Sprintf("%s+%d is in no kallsyms symbol", r.p.SymbolName, r.p.Offset)
			}
			return why("_kprobe_addr: kallsyms_lookup_size_offset", d)
		}
		if tr {
			res := fmt.Sprintf("%s/%#x", kp.symPlus(r.addr), r.size)
			if name, start, ok := kp.symbolOf(r.addr); hasSym && ok && name != r.p.SymbolName && r.addr-uint64(r.p.Offset) != start {
				res += fmt.Sprintf(" (offset %d is past the end of %s)", r.p.Offset, r.p.SymbolName)
			}
			note("kallsyms_lookup_size_offset", hex(r.addr), res)
		}
	case evArchAdjustData:
		if tr {
			note("arch_adjust_kprobe_addr", fmt.Sprintf("%s, %d", kp.symPlus(r.addr), r.off), fmt.Sprintf("%#x (not text: no ENDBR)", r.addr+r.off))
		}
	case evArchAdjustFault:
		if tr {
			note("arch_adjust_kprobe_addr", fmt.Sprintf("%#x, %d", r.addr, r.off), "NULL (the 4-byte read faults): -EINVAL")
		}
		return why("_kprobe_addr: arch_adjust_kprobe_addr", fmt.Sprintf("copy_from_kernel_nofault of the 4 bytes at %#x faults", r.addr))
	case evArchAdjustEndbr:
		if tr {
			res := hex(r.addr)
			if r.flag {
				res += " (ENDBR at the entry: the probe goes after it, on_func_entry)"
			}
			note("arch_adjust_kprobe_addr", kp.symPlus(r.addr), res)
		}
	case evArchAdjustNoEndbr:
		if tr {
			w := "no ENDBR"
			if !kp.Image.Config.IBT {
				w = "is_endbr is false without CONFIG_X86_KERNEL_IBT"
			}
			note("arch_adjust_kprobe_addr", kp.symPlus(r.addr), fmt.Sprintf("%#x (%s)", r.addr, w))
		}

	case evCheckKprobeAddressSafe:
		note("check_kprobe_address_safe", kp.symPlus(r.addr), "")
	case evFtraceLocation:
		const ck = "check_ftrace_location: ftrace_location"
		switch {
		case failed:
			note(ck, kp.symPlus(r.addr), fmt.Sprintf("%#x: an ftrace site, no CONFIG_KPROBES_ON_FTRACE: -EINVAL", r.at))
			return why(cks+"check_ftrace_location", fmt.Sprintf("__fentry__ call at %s and no CONFIG_KPROBES_ON_FTRACE", kp.rel(kp.fnOf(r.addr), r.addr)))
		case !tr:
		case r.flag:
			note(ck, kp.symPlus(r.addr), fmt.Sprintf("%#x: the __fentry__ call, KPROBE_FLAG_FTRACE", r.addr))
		case r.at != 0:
			note(ck, kp.symPlus(r.addr), fmt.Sprintf("%#x (%s, the function's site, not this address)", r.at, kp.symPlus(r.at)))
		default:
			note(ck, kp.symPlus(r.addr), "0: no ftrace site")
		}
	case evKernelText:
		switch {
		case failed:
			d := "not kernel or module text"
			if kp.init != nil && kp.init.Contains(r.addr) {
				d = "in .init.text, which is freed once the system runs (system_state >= SYSTEM_FREEING_INITMEM)"
			}
			if tr {
				note("core_kernel_text", kp.symPlus(r.addr), "false")
				note("__module_text_address", kp.symPlus(r.addr), "NULL: -EINVAL")
			}
			return why(cks+"__module_text_address", d)
		case !tr:
		case r.mod == nil:
			note("core_kernel_text", kp.symPlus(r.addr), "true")
		default:
			note("core_kernel_text", kp.symPlus(r.addr), "false")
			note("__module_text_address", kp.symPlus(r.addr), "module "+r.mod.Name)
		}
	case evInGateArea:
		if !failed {
			if tr {
				note("in_gate_area_no_mm", hex(r.addr), "false")
			}
			break
		}
		if tr {
			note("in_gate_area_no_mm", hex(r.addr), "true: -EINVAL")
		}
		return why(cks+"in_gate_area_no_mm", "in the vsyscall page")
	case evWithinKprobeBlacklist:
		if !failed {
			if tr {
				note("within_kprobe_blacklist", kp.symPlus(r.addr), "false")
			}
			break
		}
		d := kp.blacklistDetail(r.addr)
		if tr {
			note("within_kprobe_blacklist", kp.symPlus(r.addr), "true, "+d+": -EINVAL")
		}
		return why(cks+"within_kprobe_blacklist", d)
	case evJumpLabelReserved, evStaticCallReserved:
		check := "jump_label_text_reserved"
		if r.ev == evStaticCallReserved {
			check = "static_call_text_reserved"
		}
		if !failed {
			if tr {
				note(check, fmt.Sprintf("[%#x, %#x]", r.addr, r.addr), "false")
			}
			break
		}
		var d string
		if r.ev == evStaticCallReserved {
			d = kp.staticCallDetail(kp.fnOf(r.addr), r.addr, r.addr)
		} else if d = kp.jumpLabelDetail(kp.fnOf(r.addr), r.addr, r.addr); isBug(err) {
			d = "BUG: " + d + " is not a 2- or 5-byte JMP or NOP"
		}
		if tr {
			note(check, fmt.Sprintf("[%#x, %#x]", r.addr, r.addr), "true, "+d)
		}
		return why(cks+check, d)
	case evFindBug:
		if !failed {
			if tr {
				note("find_bug", hex(r.addr), "NULL")
			}
			break
		}
		d := kp.bugDetail(kp.fnOf(r.addr), r.addr)
		if tr {
			note("find_bug", hex(r.addr), d+": -EINVAL")
		}
		return why(cks+"find_bug", d)
	case evCFIPreamble:
		if !failed {
			if tr {
				note("is_cfi_preamble_symbol", kp.symPlus(r.addr), fmt.Sprintf("false (%s)", r.name))
			}
			break
		}
		if tr {
			note("is_cfi_preamble_symbol", kp.symPlus(r.addr), "true ("+r.name+"): -EINVAL")
		}
		return why(cks+"is_cfi_preamble_symbol", r.name+" is a CFI/FineIBT preamble")
	case evTryModuleGet:
		if !failed {
			note("try_module_get", r.mod.Name, "true")
			break
		}
		note("try_module_get", r.mod.Name, "false (MODULE_STATE_GOING): -ENOENT")
		return why(cks+"try_module_get", "module "+r.mod.Name+" is going away (MODULE_STATE_GOING)")
	case evTryModuleGet73:
		const ck = "try_module_get (7.3: before the reserved checks)"
		if !failed {
			note(ck, r.mod.Name, "true")
			break
		}
		note(ck, r.mod.Name, "false (MODULE_STATE_GOING): -ENOENT")
		return why(cks+"try_module_get", "module "+r.mod.Name+" is going away (MODULE_STATE_GOING; 7.3 asks before the reserved checks)")
	case evWithinModuleInit:
		if tr {
			note("within_module_init", kp.symPlus(r.addr), fmt.Sprintf("true and module %s is %s: -ENOENT", r.mod.Name, r.mod.State))
		}
		return why(cks+"within_module_init", fmt.Sprintf("in module %s's init text and the module is %s, not coming", r.mod.Name, r.mod.State))

	case evPrepareKprobeFtrace:
		if tr {
			note("prepare_kprobe: arch_prepare_kprobe_ftrace", kp.symPlus(r.addr), "0 (no instruction copy: ftrace calls the handler)")
		}
	case evArmKprobe:
		note("arm_kprobe", kp.symPlus(r.addr), "")
	case evArmKprobeFtraceNone:
		return why("arm_kprobe: arm_kprobe_ftrace", "no ftrace")
	case evArmKprobeFtrace:
		ops := "kprobe_ftrace_ops"
		if r.p.HasPostHandler {
			ops = "kprobe_ipmodify_ops"
		}
		if !failed {
			note("__arm_kprobe_ftrace", ops, "ftrace_set_filter_ip and register_ftrace_function: 0")
			break
		}
		if tr {
			note("__arm_kprobe_ftrace", ops, r.err.Error())
		}
		return why("arm_kprobe: __arm_kprobe_ftrace", fmt.Sprintf("%s: %v", ops, r.err))
	case evGetOptimizedKprobe:
		const ck = "__arm_kprobe: get_optimized_kprobe"
		op := r.p
		if op == nil {
			if tr {
				note(ck, kp.symPlus(r.addr), "NULL: no optprobe covers it")
			}
			break
		}
		if tr {
			note(ck, kp.symPlus(r.addr), fmt.Sprintf("the optprobe at %s covers it: unoptimize_kprobe(force)", kp.symPlus(op.Addr)))
		}
		fn := kp.fnOf(op.Addr)
		return why(ck, fmt.Sprintf("unoptimized: a probe was armed at %s inside its jump [%s, %s)", kp.rel(fn, r.addr), kp.rel(fn, op.Addr), kp.rel(fn, op.Addr+uint64(op.Opt.Size))))
	case evArchArmKprobe:
		if tr {
			note("arch_arm_kprobe", kp.symPlus(r.addr), "int3 written (text_poke + text_poke_sync)")
		}
	case evAllocAggrKprobeRefused:
		return why("register_aggr_kprobe: alloc_aggr_kprobe", "kzalloc of the optimized_kprobe failed")
	case evInitAggrKprobe:
		if tr {
			note("init_aggr_kprobe", kp.symPlus(r.addr), "the aggregator replaces the kprobe in kprobe_table")
		}
	case evAddNewKprobePostHandler:
		return why("register_aggr_kprobe: add_new_kprobe", "unoptimized: a probe with a post_handler joined (an optprobe cannot run post handlers)")
	case evAddNewKprobe:
		if tr {
			note("add_new_kprobe", kp.symPlus(r.addr), fmt.Sprintf("added to ap->list (%d kprobes)", r.n))
		}
	case evAggrNotQueued:
		// Only try_to_optimize_kprobe, arm_kprobe and reuse_unused_kprobe
		// call optimize_kprobe; an aggregator made here stays int3.
		return why("register_aggr_kprobe", "the aggregator made for this address is not queued for optimization (this path does not call optimize_kprobe)")
	case evPostHandler:
		return why("optimize_kprobe", postHandlerDetail)
	case evReuseUnusedKprobe:
		if failed {
			return why("register_aggr_kprobe: reuse_unused_kprobe", "the unused optprobe at this address is not optimization-ready")
		}
		if tr {
			note("reuse_unused_kprobe", kp.symPlus(r.addr), "the unused optprobe is reused")
		}

	case evRecoverOptprobed:
		if tr {
			kp.noteSub("__recover_optprobed_insn", kp.symPlus(r.addr), "the original bytes under an optprobe's jump")
		}
	case evRecoverProbed:
		if tr {
			what := "an ftrace site: decoded as the ideal NOP5"
			if !r.flag {
				what = "the original byte under a kprobe's int3"
			}
			kp.noteSub("__recover_probed_insn", kp.symPlus(r.addr), what)
		}
	case evCanProbeNoSymbol:
		return why("arch_prepare_kprobe: can_probe", fmt.Sprintf("%#x is in no kallsyms symbol", r.addr))
	case evCanProbeModelError:
		return why("arch_prepare_kprobe: can_probe", "model error: "+r.err.Error())
	case evCanProbeNoDecode:
		fn := r.at
		if tr {
			note("can_probe", kp.symPlus(r.addr), fmt.Sprintf("false: walked %s, %s does not decode", insns(r.n), kp.rel(fn, r.end)))
		}
		return why("arch_prepare_kprobe: can_probe", fmt.Sprintf("the instruction at %s does not decode", kp.rel(fn, r.end)))
	case evCanProbeBoundary:
		fn, last := r.at, r.insn
		start := r.end - uint64(last.Len)
		if tr {
			note("can_probe", kp.symPlus(r.addr), fmt.Sprintf("false: walked %s from %s to %s, past %s", insns(r.n), kp.symPlus(fn), kp.rel(fn, r.end), kp.rel(fn, r.addr)))
		}
		return why("arch_prepare_kprobe: can_probe", fmt.Sprintf("%s is not an instruction boundary: the %d-byte %s at %s spans it", kp.rel(fn, r.addr), last.Len, kp.insnName(last, start), kp.rel(fn, start)))
	case evCanProbe:
		if tr {
			note("can_probe", kp.symPlus(r.addr), fmt.Sprintf("true: walked %s from %s, %s is an instruction boundary", insns(r.n), kp.symPlus(r.at), kp.rel(r.at, r.addr)))
		}
	case evCanProbeNoDecodeTarget:
		fn := r.at
		if tr {
			note("can_probe", kp.symPlus(r.addr), fmt.Sprintf("false: walked %s to %s, which does not decode (6.12+ decodes the probed instruction)", insns(r.n), kp.rel(fn, r.end)))
		}
		return why("arch_prepare_kprobe: can_probe", fmt.Sprintf("the probed instruction at %s does not decode (6.12+: can_probe decodes it)", kp.rel(fn, r.end)))
	case evCanProbeExceptionInsn:
		fn := r.at
		d := fmt.Sprintf("is_exception_insn (6.12+): %s at %s raises an exception by design (INT3, INT n, INTO, INT1, UD0/1/2)", kp.insnName(r.insn, r.addr), kp.rel(fn, r.addr))
		if tr {
			note("can_probe", kp.symPlus(r.addr), "false: "+d)
		}
		return why("arch_prepare_kprobe: can_probe", d)
	case evCanProbeCFITrap:
		fn := r.at
		d := fmt.Sprintf("is_cfi_trap (6.12+, %s): %s at %s is a kCFI type check, its trap at %s", kp.cfiOption(), kp.insnName(r.insn, r.addr), kp.rel(fn, r.addr), kp.rel(fn, r.end))
		if tr {
			note("can_probe", kp.symPlus(r.addr), "false: "+d)
		}
		return why("arch_prepare_kprobe: can_probe", d)
	case evCanProbe612:
		if tr {
			w := "not an exception instruction"
			if kp.g.isCFITrap {
				w += ", no kCFI trap"
			}
			note("can_probe", kp.symPlus(r.addr), fmt.Sprintf("true: walked %s from %s, %s is an instruction boundary; %s there is %s (6.12+)", insns(r.n), kp.symPlus(r.at), kp.rel(r.at, r.addr), kp.insnName(r.insn, r.addr), w))
		}
	case evArchPrepareKprobe:
		note("arch_prepare_kprobe", kp.symPlus(r.addr), "")
	case evAlternativesReserved:
		if tr {
			note("alternatives_text_reserved", kp.symPlus(r.addr), "false (SMP: smp_alt_modules is empty)")
		}
	case evGetInsnSlot:
		return slot("arch_prepare_kprobe", "get_insn_slot", "insn")
	case evCopyInstruction:
		if failed {
			if tr {
				note("__copy_instruction", kp.symPlus(r.addr), "0: the instruction "+copyWhy(r.err)+": -EINVAL")
			}
			return why("arch_copy_kprobe: __copy_instruction", fmt.Sprintf("the instruction at %s %s", kp.rel(kp.fnOf(r.addr), r.addr), copyWhy(r.err)))
		}
		if tr {
			note("__copy_instruction", kp.symPlus(r.addr), fmt.Sprintf("%d (%s)", r.n, kp.insnName(r.insn, r.addr)))
		}
	case evPrepareEmulation:
		if failed {
			if tr {
				note("prepare_emulation", kp.insnName(r.insn, r.addr), r.err.Error()+": "+errName(err))
			}
			return why("arch_copy_kprobe: prepare_emulation", r.err.Error())
		}
		if tr {
			note("prepare_emulation", kp.insnName(r.insn, r.addr), "0")
		}
	case evPrepareSinglestepBoost:
		note("prepare_singlestep", "", "boosted: a jmp back follows the copy")
	case evPrepareSinglestepRoom:
		note("prepare_singlestep", "", "no room for the int3: -ENOSPC")
		return why("arch_copy_kprobe: prepare_singlestep", fmt.Sprintf("no room for an int3 after the %d-byte instruction at %s", r.insn.Len, kp.rel(kp.fnOf(r.addr), r.addr)))
	case evPrepareSinglestepInt3:
		w := "CONFIG_PREEMPTION"
		switch {
		case !kp.Cfg.Preemption && r.p.HasPostHandler:
			w = "post_handler"
		case !kp.Cfg.Preemption:
			w = "not boostable, or no room for the jmp back"
		}
		note("prepare_singlestep", "", "single-step: an int3 follows the copy (not boosted: "+w+")")

	case evCanOptimizeNoSymbol:
		return why("can_optimize", fmt.Sprintf("%#x is in no kallsyms symbol", r.addr))
	case evCanOptimizeEntryText:
		if tr {
			note("can_optimize", kp.symPlus(r.addr), "false: in the entry text")
		}
		return why("can_optimize", "in the entry text (__entry_text_start..__entry_text_end)")
	case evCanOptimizeTooShort:
		if tr {
			note("can_optimize", kp.symPlus(r.addr), fmt.Sprintf("false: only %d bytes to the next symbol", r.size-r.off))
		}
		return why("can_optimize", fmt.Sprintf("%d bytes from %s to the end of the symbol, a jmp needs 5", r.size-r.off, kp.rel(r.addr-r.off, r.addr)))
	case evCanOptimizeExtable, evCanOptimizeModelError, evCanOptimizeNoDecode, evCanOptimizeIndirectJump, evCanOptimizeThunk, evCanOptimizeJumpInto:
		d := kp.canOptimizeDetail(r)
		if tr {
			gen := ""
			if r.ev == evCanOptimizeThunk {
				gen = " (6.1 only: 6.12 dropped the thunk-range check)"
			}
			note("can_optimize", kp.symPlus(r.addr), fmt.Sprintf("false: walked %s of %s: %s%s", insns(r.n), kp.symPlus(r.at), d, gen))
		}
		return why("can_optimize", d)
	case evCanOptimize:
		if tr {
			start := r.at
			ind := "no indirect jump"
			if !kp.g.insnIsIndirectJump {
				ind = "indirect jumps not checked (6.12+ with CONFIG_MITIGATION_RETPOLINE or CONFIG_X86_KERNEL_IBT)"
			}
			note("can_optimize", kp.symPlus(r.addr), fmt.Sprintf("true: walked %s of %s (to %s): no exception-table entry, %s, no jump into [%s, %s]",
				insns(r.n), kp.symPlus(start), fmt.Sprintf("+%d", r.size), ind, kp.rel(start, r.addr+1), kp.rel(start, r.addr+1+x86.DISP32Size)))
		}
	case evCopyOptInstruction, evCopyOptNotBoostable:
		const ck = "copy_optimized_instructions"
		fn := kp.fnOf(r.addr)
		var d, gen string
		check := ck + ": __copy_instruction"
		if r.ev == evCopyOptNotBoostable {
			check = ck
			d = fmt.Sprintf("%s at %s is not boostable", kp.insnName(r.insn, r.end), kp.rel(fn, r.end))
			if kp.Extable != nil && kp.Extable.SearchExceptionTables(nil, r.end) {
				d = fmt.Sprintf("%s at %s is not boostable (exception-table entry)", kp.insnName(r.insn, r.end), kp.rel(fn, r.end))
			} else if !kp.g.canBoostGroups && x86.CanBoost(r.insn, true) {
				// Said in the trail, not in the reason: 6.1's reasons
				// (and their digest) read as before the generations.
				gen = " (6.1's can_boost; 6.12+ boosts this group)"
			}
		} else {
			d = fmt.Sprintf("the instruction at %s %s", kp.rel(fn, r.end), copyWhy(r.err))
		}
		if tr {
			note(ck, kp.symPlus(r.addr), "-EINVAL: "+d+gen)
		}
		return why(check, d)
	case evCopyOptFtraceReserved, evCopyOptJumpLabelReserved, evCopyOptStaticCall, evCopyOptimized:
		return kp.copyOptimizedWords(r, err, note, why)
	case evArchCheckOptimized:
		fn := kp.fnOf(r.addr)
		rng := fmt.Sprintf("(%s, %s)", kp.rel(fn, r.addr), kp.rel(fn, r.addr+uint64(r.n)))
		if !failed {
			note("arch_check_optimized_kprobe", kp.symPlus(r.addr), "0: no armed probe in "+rng)
			break
		}
		d := fmt.Sprintf("armed probe at %s inside the jump's bytes %s", kp.rel(fn, r.p.Addr), rng)
		note("arch_check_optimized_kprobe", kp.symPlus(r.addr), "-EEXIST: "+d)
		return why("optimize_kprobe: arch_check_optimized_kprobe", d)
	case evArchPrepareOptimized:
		note("arch_prepare_optimized_kprobe", kp.symPlus(r.addr), "")
	case evOptinsnBuf:
		return why("arch_prepare_optimized_kprobe: kzalloc", "the MAX_OPTINSN_SIZE staging buffer could not be allocated")
	case evGetOptinsnSlot:
		return slot("arch_prepare_optimized_kprobe", "get_optinsn_slot", "optinsn")
	case evOptinsnSlotRange:
		return why("arch_prepare_optimized_kprobe", fmt.Sprintf("the detour buffer at %#x is out of rel32 reach", r.at))
	case evArchPrepareOptFailed:
		return why("arch_prepare_optimized_kprobe", "failed with "+errName(r.err))

	case evAllocAggrKprobeFailed:
		if tr {
			note("alloc_aggr_kprobe", kp.symPlus(r.addr), "NULL (kzalloc failed)")
		}
	case evAllocAggrKprobe:
		note("alloc_aggr_kprobe", kp.symPlus(r.addr), "")
	case evPrepareOptFtrace:
		return why("try_to_optimize_kprobe", ftraceDetail)
	case evTryOptimizeFtrace:
		if tr {
			note("try_to_optimize_kprobe", kp.symPlus(r.addr), "skipped: kprobe_ftrace(p)")
		}
		return why("try_to_optimize_kprobe", ftraceDetail)
	case evTryToOptimize:
		note("try_to_optimize_kprobe", kp.symPlus(r.addr), "")
	case evTryOptimizeNoAggr:
		return why("try_to_optimize_kprobe: alloc_aggr_kprobe", "kzalloc of the optimized_kprobe failed")
	case evTryOptimizeUnprepared:
		note("try_to_optimize_kprobe", "", "not prepared: the optimized_kprobe is freed, the probe stays int3")
	case evInitOptKprobe:
		if tr {
			note("init_aggr_kprobe", kp.symPlus(r.addr), "the optimized_kprobe replaces the probe in kprobe_table")
		}
	case evOptimizeNotReady:
		// A plain probe (its try_to_optimize_kprobe follows) or an
		// aggregator whose preparation failed: p.why already says why.
		if tr && r.p.IsAggr() {
			note("optimize_kprobe", kp.symPlus(r.addr), "not queued: not optimization-ready ("+r.p.why.String()+")")
		}
	case evOptimizeNoSysctl, evOptimizeDisabled, evOptimizeAllDisarmed, evOptimizePostHandler:
		d := optimizeRefusals[r.ev]
		if tr {
			note("optimize_kprobe", kp.symPlus(r.addr), "not queued: "+d)
		}
		return why("optimize_kprobe", d)
	case evOptimizeKeptJump:
		if tr {
			note("optimize_kprobe", kp.symPlus(r.addr), "taken off unoptimizing_list: the jump stays")
		}
	case evOptimizeQueued:
		if tr {
			note("optimize_kprobe", kp.symPlus(r.addr), "queued on optimizing_list (KPROBE_FLAG_OPTIMIZED), kick_kprobe_optimizer")
		}
	case evUnoptimizeKprobe:
		if tr {
			note("unoptimize_kprobe", kp.symPlus(r.addr), r.name)
		}
	case evDisarmUnoptimize:
		return why("__disarm_kprobe: unoptimize_kprobe", "unoptimized: the probe is being disarmed")
	case evArchOptimizeKprobes:
		if tr {
			note("do_optimize_kprobes: arch_optimize_kprobes", kp.symPlus(r.addr),
				fmt.Sprintf("JMP32 to the detour buffer written over %d bytes (text_poke_bp)", r.n))
		}

	case evEnableNotRegistered:
		return why("enable_kprobe: __get_valid_kprobe", "the probe is not registered")
	case evEnableGone:
		return why("enable_kprobe", "the probe is gone (KPROBE_FLAG_GONE: its module went away)")
	case evEnableKprobe:
		note("enable_kprobe", kp.symPlus(r.addr), "")
	case evRegisterKretprobeFailed:
		return why("register_kretprobe", "failed with "+errName(r.err))
	case evKretprobeNotEntry:
		return why("register_kretprobe: kprobe_on_func_entry", "not a function entry: "+probeArgs(r.p))
	case evKretprobeRereg:
		return why("register_kretprobe: warn_kprobe_rereg", "this kretprobe is already registered")
	case evKretprobeBlacklist:
		return why("register_kretprobe: kretprobe_blacklist", "__switch_to switches stacks")
	case evKretprobeDataSize:
		return why("register_kretprobe", fmt.Sprintf("data_size %d is above KRETPROBE_MAX_DATA_SIZE", r.n))
	default:
		panic(fmt.Sprintf("kprobes: no wording for event %d", r.ev))
	}
	return Reason{}
}

// canOptimizeDetail words what stopped can_optimize's walk at r.end.
func (kp *Kprobes) canOptimizeDetail(r rec) string {
	start := r.at
	switch r.ev {
	case evCanOptimizeExtable:
		return fmt.Sprintf("the instruction at %s has an exception-table entry (it may fault and be fixed up)", kp.rel(start, r.end))
	case evCanOptimizeModelError:
		return "model error: " + r.err.Error()
	case evCanOptimizeNoDecode:
		return fmt.Sprintf("the instruction at %s does not decode", kp.rel(start, r.end))
	case evCanOptimizeIndirectJump:
		return fmt.Sprintf("indirect jump at %s", kp.rel(start, r.end))
	case evCanOptimizeThunk:
		return fmt.Sprintf("jump into the indirect thunks at %s (CONFIG_RETPOLINE)", kp.rel(start, r.end))
	}
	t := r.end + uint64(r.insn.Len) + uint64(r.insn.Imm)
	return fmt.Sprintf("jump into the probed bytes at %s (%s to %s)", kp.rel(start, r.end), kp.insnName(r.insn, r.end), kp.rel(start, t))
}

// copyOptimizedWords words copy_optimized_instructions' reserved-range
// checks over [r.addr, r.end] and its success.
func (kp *Kprobes) copyOptimizedWords(r rec, err error, note func(check, args, result string), why func(check, detail string) Reason) Reason {
	const ck = "copy_optimized_instructions"
	fn := kp.fnOf(r.addr)
	rng := func() string { return fmt.Sprintf("[%s, %s]", kp.rel(fn, r.addr), kp.rel(fn, r.end)) }
	var check, d string
	switch r.ev {
	case evCopyOptimized:
		if kp.Trail != nil {
			note(ck, kp.symPlus(r.addr), fmt.Sprintf("%d bytes: %d boostable instructions %s, no ftrace, jump-label or static-call site in them", r.n, r.k, rng()))
		}
		return Reason{}
	case evCopyOptFtraceReserved:
		check, d = "ftrace_text_reserved", "an ftrace site"
	case evCopyOptJumpLabelReserved:
		check = "jump_label_text_reserved"
		if d = kp.jumpLabelDetail(fn, r.addr, r.end); isBug(err) {
			return why(ck+": "+check, "BUG: "+d+" is not a 2- or 5-byte JMP or NOP")
		}
	case evCopyOptStaticCall:
		check = "static_call_text_reserved"
		if isBug(err) {
			return why(ck+": "+check, "model error: "+err.Error())
		}
		d = kp.staticCallDetail(fn, r.addr, r.end)
	}
	d += " in the copied bytes " + rng()
	if kp.Trail != nil {
		note(ck, kp.symPlus(r.addr), fmt.Sprintf("-EBUSY: %s: %s", check, d))
	}
	return why(ck+": "+check, d)
}

func isBug(err error) bool {
	var b *BugError
	return errors.As(err, &b)
}

const (
	postHandlerDetail = "a probe at this address has a post_handler (an optprobe cannot run post handlers)"
	ftraceDetail      = "a kprobe on ftrace (KPROBE_FLAG_FTRACE): the __fentry__ call site is patched by ftrace, not jump-optimized"
)

// optimizeRefusals words optimize_kprobe's refusals.
var optimizeRefusals = map[ev]string{
	evOptimizeNoSysctl:    "kprobes_allow_optimization is false (sysctl debug.kprobes-optimization = 0)",
	evOptimizeDisabled:    "the probe is disabled (KPROBE_FLAG_DISABLED)",
	evOptimizeAllDisarmed: "kprobes_all_disarmed (debugfs kprobes/enabled = 0)",
	evOptimizePostHandler: postHandlerDetail,
}

// probeArgs formats the caller's struct kprobe for the trail.
func probeArgs(p *Kprobe) string {
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

// errName is an errno's kernel spelling for the trail: "-EINVAL".
func errName(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}

// insns spells an instruction count: "1 instruction", "14 instructions".
func insns(n int) string {
	if n == 1 {
		return "1 instruction"
	}
	return fmt.Sprintf("%d instructions", n)
}

// The phrases the wording is made of, read from the image.

// symPlus formats addr as the kernel's %pS does: name+0xoff.
func (kp *Kprobes) symPlus(addr uint64) string {
	name, start, ok := kp.symbolOf(addr)
	if !ok {
		return fmt.Sprintf("%#x", addr)
	}
	return fmt.Sprintf("%s+%#x", name, addr-start)
}

// rel formats addr relative to the symbol start fn as "+N" (decimal, as
// kprobe_events offsets are usually written), or as name+N when addr lies
// in another symbol.
func (kp *Kprobes) rel(fn, addr uint64) string {
	name, start, ok := kp.symbolOf(addr)
	switch {
	case ok && start == fn:
		return fmt.Sprintf("+%d", addr-fn)
	case ok:
		return fmt.Sprintf("%s+%d", name, addr-start)
	}
	return fmt.Sprintf("%#x", addr)
}

// insnName names an instruction in a reason: its kprobes class when it
// has one (jcc, jmp, call, ret, ...), else its mnemonic.
func (kp *Kprobes) insnName(i x86.Insn, addr uint64) string {
	locs := kp.Image.McountLocs
	if m := kp.Image.ModuleAt(addr); m != nil {
		locs = m.McountLocs
	}
	if j, ok := slices.BinarySearch(locs, addr); ok && locs[j] == addr {
		// Recovered as the ideal NOP5 (__recover_probed_insn).
		return "__fentry__ call (an ftrace NOP5)"
	}
	switch i.Kind {
	case x86.KindOther:
	case x86.KindJmpIndirect:
		return "indirect jmp"
	case x86.KindCallIndirect:
		return "indirect call"
	default:
		return i.Kind.String()
	}
	if full, err := kp.insn.Decode(nil, kp.Image.Text(addr, x86.MaxInsnSize)); err == nil && full.Mnemonic != "" {
		return full.Mnemonic
	}
	return fmt.Sprintf("opcode %#02x", i.Opcode[0])
}

// jumpLabelDetail describes the jump-label site that reserves a byte of
// [start, end], relative to symbol fn: "NOP5 site at +5".
func (kp *Kprobes) jumpLabelDetail(fn, start, end uint64) string {
	var tables [][]image.JumpEntry
	tables = append(tables, kp.jumpEntries(nil))
	if m := kp.Image.ModuleAt(start); m != nil {
		tables = append(tables, kp.jumpEntries(m))
	}
	for _, t := range tables {
		i := sort.Search(len(t), func(i int) bool { return t[i].Code+x86.JMP32InsnSize > start })
		for ; i < len(t) && t[i].Code <= end; i++ {
			kind, size := jumpSiteKind(kp.Image.Text(t[i].Code, 5))
			if t[i].Code+uint64(size) > start {
				d := fmt.Sprintf("%s site at %s", kind, kp.rel(fn, t[i].Code))
				if key := kp.dataName(t[i].Key); key != "" {
					d += " (key " + key + ")"
				}
				return d
			}
		}
	}
	return fmt.Sprintf("a jump-label site overlaps [%s, %s]", kp.rel(fn, start), kp.rel(fn, end))
}

// staticCallDetail describes the static-call site that reserves a byte
// of [start, end]: "call site of static call foo at +12".
func (kp *Kprobes) staticCallDetail(fn, start, end uint64) string {
	sites := kp.Image.StaticCallSites
	if m := kp.Image.ModuleAt(start); m != nil {
		sites = append(slices.Clip(sites), m.StaticCallSites...)
	}
	var best *image.StaticCallSite
	for i := range sites {
		s := &sites[i]
		if s.Addr <= end && s.Addr+x86.CALLInsnSize > start && (best == nil || s.Addr < best.Addr) {
			best = s
		}
	}
	if best == nil {
		return fmt.Sprintf("a static-call site overlaps [%s, %s]", kp.rel(fn, start), kp.rel(fn, end))
	}
	kind := "call"
	if best.Tail {
		kind = "tail-call (jmp)"
	}
	d := fmt.Sprintf("%s site at %s", kind, kp.rel(fn, best.Addr))
	if key := kp.dataName(best.Key); key != "" {
		d += " of static call " + strings.TrimPrefix(key, "__SCK__")
	}
	return d
}

// bugDetail describes the bug entry at addr: "WARN at +14 (fs/read_write.c:450)".
func (kp *Kprobes) bugDetail(fn, addr uint64) string {
	entries := kp.Image.BugEntries
	if m := kp.Image.ModuleAt(addr); m != nil {
		entries = m.BugEntries
	}
	for _, b := range entries {
		if b.Addr != addr {
			continue
		}
		kind := "BUG"
		if b.Flags&1 != 0 { // BUGFLAG_WARNING
			kind = "WARN"
		}
		d := fmt.Sprintf("%s at %s (ud2 with a __bug_table entry)", kind, kp.rel(fn, addr))
		if b.File != "" {
			d = fmt.Sprintf("%s at %s (%s:%d)", kind, kp.rel(fn, addr), b.File, b.Line)
		}
		return d
	}
	return fmt.Sprintf("__bug_table entry at %s", kp.rel(fn, addr))
}

// blacklistDetail says which part of populate_kprobe_blacklist covers
// addr: "blacklisted (entry text)", or for a compiler clone whose base
// name is blacklisted, "blacklisted (NOKPROBE_SYMBOL) via its base name foo".
func (kp *Kprobes) blacklistDetail(addr uint64) string {
	if why := kp.blacklistClass(addr); why != "" {
		return "blacklisted (" + why + ")"
	}
	name, _, ok := kp.symbolOf(addr)
	if i := strings.IndexByte(name, '.'); ok && i > 0 {
		base := name[:i]
		if a, ok := kp.firstByName(base); ok {
			if why := kp.blacklistClass(a); why != "" {
				return fmt.Sprintf("blacklisted (%s) via its base name %s (%s cut at '.')", why, base, name)
			}
		}
	}
	return "blacklisted"
}

// copyWhy words what __copy_instruction refused: a copyRefusal, or the
// recovery's model error.
func copyWhy(err error) string {
	var c copyRefusal
	if errors.As(err, &c) {
		return c.Error()
	}
	return "model error: " + err.Error()
}

func (c copyRefusal) Error() string {
	switch c {
	case copyNoDecode:
		return "does not decode"
	case copyEmulatePrefix:
		return "has a Xen/KVM emulate prefix (ud2; .ascii)"
	case copyInt3:
		return "is an int3 (someone else's breakpoint, or padding)"
	case copyMaskingException:
		return "masks interrupts for one instruction (mov to %ss / pop %ss)"
	case copyRIPOutOfReach:
		return "is RIP-relative and its target is out of rel32 reach of the slot"
	}
	return fmt.Sprintf("copy refusal %d", uint8(c))
}

func (n notEmulated) Error() string {
	switch n {
	case notEmulatedFarCall:
		return "far call (lcall) is not emulated"
	case notEmulatedFarJmp:
		return "far jmp (ljmp) is not emulated"
	case notEmulatedInt3:
		return "int3 is not emulated"
	case notEmulatedIret:
		return "iret is not emulated"
	case notEmulatedVMX:
		return "VMX instruction (0f 01 /0: vmcall, vmlaunch, ...) is not emulated"
	}
	what := "indirect call"
	if n&0xf == notEmulatedIndirectJmp {
		what = "indirect jmp"
	}
	switch n &^ 0xf {
	case notEmulatedFar:
		return "far " + what + " is not emulated"
	case notEmulatedAddr32:
		return what + " with a 32-bit address size is not emulated"
	case notEmulatedMemory:
		return what + " through memory is not emulated"
	}
	return fmt.Sprintf("emulation refusal %d", uint8(n))
}
