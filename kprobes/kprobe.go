package kprobes

// Flags of struct kprobe (include/linux/kprobes.h).
const (
	KprobeFlagGone        uint32 = 1  // KPROBE_FLAG_GONE: breakpoint has already gone
	KprobeFlagDisabled    uint32 = 2  // KPROBE_FLAG_DISABLED: probe is temporarily disabled
	KprobeFlagOptimized   uint32 = 4  // KPROBE_FLAG_OPTIMIZED: only for optimized_kprobe
	KprobeFlagFtrace      uint32 = 8  // KPROBE_FLAG_FTRACE: probe is using ftrace
	KprobeFlagOnFuncEntry uint32 = 16 // KPROBE_FLAG_ON_FUNC_ENTRY: probe is on the function entry
)

// Sizes used by the windows below (arch/x86/include/asm).
const (
	// MaxOptimizedLength is MAX_OPTIMIZED_LENGTH = MAX_INSN_SIZE (15) +
	// DISP32_SIZE (4) = 19. get_optimized_kprobe probes addr-1 ... addr-18.
	MaxOptimizedLength = 19
	// Jmp32InsnSize is JMP32_INSN_SIZE = 5: __recover_optprobed_insn probes
	// addr, addr-1, ..., addr-4.
	Jmp32InsnSize = 5
	// MaxLookBack is the largest look-back an AddrIter accepts: the
	// get_optimized_kprobe window, MaxOptimizedLength-1 = 18 bytes.
	MaxLookBack = MaxOptimizedLength - 1
)

// OptQueue says which optimizer list an optimized_kprobe's op->list is on.
// kprobe_disarmed() and kprobe_queued() only ask whether it is on any.
type OptQueue uint8

// The optimizer lists of kernel/kprobes.c.
const (
	QueueNone         OptQueue = iota // list_empty(&op->list)
	QueueOptimizing                   // on optimizing_list
	QueueUnoptimizing                 // on unoptimizing_list
	QueueFreeing                      // on freeing_list (inside kprobe_optimizer)
)

// OptInsn models struct arch_optimized_insn (arch/x86/include/asm/kprobes.h)
// as far as the registry's predicates need it.
type OptInsn struct {
	// CopiedInsn is copied_insn[DISP32_SIZE]: the 4 original bytes after
	// the int3 that the jump's rel32 overwrites.
	CopiedInsn [4]byte
	// Size is the number of bytes copied to the detour buffer (5..19); 0
	// means not prepared (arch_prepared_optinsn() is false).
	Size int
}

// Kprobe models struct kprobe, and for aggregators the optimized_kprobe
// around it (with CONFIG_OPTPROBES, as on Debian x86-64, every aggregator is
// allocated as an optimized_kprobe). Exported fields are the caller's to set
// before registration and the pipeline's to update under kprobe_mutex.
type Kprobe struct {
	// Addr is kprobe.addr, the probed address (the table and tree key).
	// It must not change while the probe is registered.
	Addr uint64
	// SymbolName and Offset are kprobe.symbol_name and kprobe.offset.
	SymbolName string
	Offset     uint32
	// Flags holds KprobeFlag* bits (kprobe.flags).
	Flags uint32
	// HasPostHandler models kprobe.post_handler != NULL (for an aggregator:
	// it carries aggr_post_handler).
	HasPostHandler bool
	// Opcode is kprobe.opcode, the original byte under the int3.
	Opcode byte

	// Opt is op->optinsn; meaningful for aggregators only.
	Opt OptInsn
	// Queue models op->list: which optimizer list the aggregator is on.
	Queue OptQueue

	// aggr marks an aggregator: kprobe_aggrprobe(p), i.e. p->pre_handler ==
	// aggr_pre_handler.
	aggr bool
	// children is ap->list in list order (head first; list_add_rcu adds at
	// the head, so the newest child comes first). Aggregators only.
	children []*Kprobe

	// ainsn models p->ainsn (struct arch_specific_insn): the single-step
	// slot; an aggregator shares its first child's (init_aggr_kprobe).
	ainsn archInsn
	// optSlot is op->optinsn.insn, the detour buffer (aggregators).
	optSlot uint64

	// why is the reason this entry is not optimized (zero when it is);
	// refused is why the last RegisterKprobe of this struct failed. See Why.
	why, refused Reason

	// armErr is the arm_kprobe error 7.3's __register_kprobe swallowed
	// (see ArmError).
	armErr error

	// Simulator-side bookkeeping, never used to answer a counted query.
	owner  *Registry // registry whose table holds p (nil if not hashed)
	parent *Kprobe   // aggregator whose list holds p (nil if none)
}

// IsAggr models kprobe_aggrprobe(p).
func (p *Kprobe) IsAggr() bool { return p.aggr }

// Children returns the aggregator's list (ap->list) in list order: newest
// child first. It returns nil for a plain probe. The slice is the caller's.
func (p *Kprobe) Children() []*Kprobe { return append([]*Kprobe(nil), p.children...) }

// NumChildren returns the length of ap->list.
func (p *Kprobe) NumChildren() int { return len(p.children) }

// Gone models kprobe_gone(p).
func (p *Kprobe) Gone() bool { return p.Flags&KprobeFlagGone != 0 }

// Disabled models kprobe_disabled(p): DISABLED or GONE.
func (p *Kprobe) Disabled() bool { return p.Flags&(KprobeFlagDisabled|KprobeFlagGone) != 0 }

// Optimized models kprobe_optimized(p).
func (p *Kprobe) Optimized() bool { return p.Flags&KprobeFlagOptimized != 0 }

// Ftrace models kprobe_ftrace(p).
func (p *Kprobe) Ftrace() bool { return p.Flags&KprobeFlagFtrace != 0 }

// Unused models kernel/kprobes.c:kprobe_unused: an aggregator that is
// disabled and has no children (waiting to be reaped by the optimizer).
func (p *Kprobe) Unused() bool { return p.aggr && p.Disabled() && len(p.children) == 0 }

// OptReady models kernel/kprobes.c:kprobe_optready: an aggregator whose
// optinsn is prepared (arch_prepared_optinsn: optinsn.size != 0).
func (p *Kprobe) OptReady() bool { return p.aggr && p.Opt.Size != 0 }

// Queued models kernel/kprobes.c:kprobe_queued: an aggregator on an
// optimizer list.
func (p *Kprobe) Queued() bool { return p.aggr && p.Queue != QueueNone }

// Disarmed models kernel/kprobes.c:kprobe_disarmed (CONFIG_OPTPROBES): a
// plain probe is disarmed when disabled; an aggregator when disabled and
// not on any optimizer list (a disabled optprobe still queued for
// unoptimization still has its jump).
func (p *Kprobe) Disarmed() bool {
	if !p.aggr {
		return p.Disabled()
	}
	return p.Disabled() && p.Queue == QueueNone
}

// WithinOptimized models arch/x86/kernel/kprobes/opt.c:
// arch_within_optimized_kprobe: op->kp.addr <= addr < op->kp.addr +
// op->optinsn.size.
func (p *Kprobe) WithinOptimized(addr uint64) bool {
	return p.Addr <= addr && addr-p.Addr < uint64(p.Opt.Size)
}

// Registered reports whether p is in a registry: hashed itself, or a child
// of a hashed aggregator. Simulator-side; not a kernel walk.
func (p *Kprobe) Registered() bool {
	return p.owner != nil || (p.parent != nil && p.parent.owner != nil)
}
