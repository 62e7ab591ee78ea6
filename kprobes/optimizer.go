package kprobes

import (
	"fmt"

	"github.com/kpsim/kpsim/sim"
)

// allocAggrKprobe models kernel/kprobes.c:alloc_aggr_kprobe (OPTPROBES):
// a zeroed optimized_kprobe at p's address, with the optimized
// instructions prepared unless p is on ftrace. nil when kzalloc fails.
func (kp *Kprobes) allocAggrKprobe(p *Kprobe) *Kprobe {
	kp.C.Inc(opKmalloc)
	x := kp.ex()
	if kp.Faults.Fail(FaultAggrAlloc) {
		x.step(rec{ev: evAllocAggrKprobeFailed, addr: p.Addr})
		return nil
	}
	defer x.close(x.open(rec{ev: evAllocAggrKprobe, addr: p.Addr}))
	op := &Kprobe{Addr: p.Addr}
	kp.prepareOptimizedKprobe(op, p)
	return op
}

// prepareOptimizedKprobe models kernel/kprobes.c:__prepare_optimized_kprobe.
// A failure leaves Opt.Size 0 and its reason in op.why.
func (kp *Kprobes) prepareOptimizedKprobe(op, p *Kprobe) {
	if p.Ftrace() {
		op.why = kp.ex().reason(rec{ev: evPrepareOptFtrace})
		return
	}
	saved := kp.why // a registration's pending refusal, if any
	kp.why = Reason{}
	if err := kp.archPrepareOptimizedKprobe(op); err != nil {
		op.why = kp.why
		if op.why.IsZero() {
			op.why = kp.ex().reason(rec{ev: evArchPrepareOptFailed, err: err})
		}
	} else {
		op.why = Reason{}
	}
	kp.why = saved
}

// tryToOptimizeKprobe models kernel/kprobes.c:try_to_optimize_kprobe.
func (kp *Kprobes) tryToOptimizeKprobe(p *Kprobe) {
	x := kp.ex()
	if p.Ftrace() {
		// A kprobe on an ftrace site is never jump-optimized.
		p.why = x.reason(rec{ev: evTryOptimizeFtrace, addr: p.Addr})
		return
	}
	defer x.close(x.open(rec{ev: evTryToOptimize, addr: p.Addr}))
	ap := kp.allocAggrKprobe(p)
	if ap == nil {
		p.why = x.reason(rec{ev: evTryOptimizeNoAggr})
		return
	}
	if ap.Opt.Size == 0 { // !arch_prepared_optinsn(&op->optinsn)
		kp.archRemoveOptimizedKprobe(ap, true)
		kp.C.Inc(opKmalloc) // kfree(op)
		p.why = ap.why
		x.step(rec{ev: evTryOptimizeUnprepared})
		return
	}
	ap.ainsn = p.ainsn
	if err := kp.Reg.InitAggrKprobe(ap, p, kp.C); err != nil {
		panic(fmt.Sprintf("kprobes: init_aggr_kprobe on a probe just registered: %v", err))
	}
	x.step(rec{ev: evInitOptKprobe, addr: ap.Addr})
	kp.optimizeKprobe(ap)
}

// optimizeKprobe models kernel/kprobes.c:optimize_kprobe: queue an
// aggregator on optimizing_list (the jump is written by the optimizer).
// Each refusal leaves its reason in p.why (unless p is not an optprobe).
func (kp *Kprobes) optimizeKprobe(p *Kprobe) {
	x := kp.ex()
	switch {
	case !p.OptReady():
		// A plain probe (its try_to_optimize_kprobe follows) or an
		// aggregator whose preparation failed: p.why already says why.
		x.step(rec{ev: evOptimizeNotReady, addr: p.Addr, p: p})
		return
	case !kp.Cfg.AllowOptimization:
		p.why = x.reason(rec{ev: evOptimizeNoSysctl, addr: p.Addr})
		return
	case p.Disabled():
		p.why = x.reason(rec{ev: evOptimizeDisabled, addr: p.Addr})
		return
	case kp.Reg.AllDisarmed:
		p.why = x.reason(rec{ev: evOptimizeAllDisarmed, addr: p.Addr})
		return
	case p.HasPostHandler:
		p.why = x.reason(rec{ev: evOptimizePostHandler, addr: p.Addr})
		return
	}
	saved := kp.why
	kp.why = Reason{}
	err := kp.archCheckOptimizedKprobe(p)
	p.why, kp.why = kp.why, saved
	if err != nil {
		return
	}
	p.why = Reason{}
	if p.Optimized() {
		if kp.optprobeQueuedUnopt(p) {
			kp.listDel(p)
			x.step(rec{ev: evOptimizeKeptJump, addr: p.Addr})
		}
		return
	}
	p.Flags |= KprobeFlagOptimized
	if p.Queue != QueueNone {
		return // WARN_ON_ONCE(!list_empty(&op->list))
	}
	kp.listAdd(p, QueueOptimizing)
	kp.kicked = true
	x.step(rec{ev: evOptimizeQueued, addr: p.Addr})
}

// unoptimizeKprobe models kernel/kprobes.c:unoptimize_kprobe. why is the
// reason the probe is left unoptimized, recorded when it was optimized.
func (kp *Kprobes) unoptimizeKprobe(p *Kprobe, force bool, why Reason) {
	if !p.IsAggr() || p.Disarmed() {
		return
	}
	if !p.Optimized() {
		return
	}
	p.why = why
	kp.ex().step(rec{ev: evUnoptimizeKprobe, addr: p.Addr, name: why.Detail})
	if p.Queue != QueueNone {
		if kp.optprobeQueuedUnopt(p) {
			if force {
				kp.forceUnoptimizeKprobe(p)
				kp.listDel(p)
				kp.listAdd(p, QueueFreeing)
			}
		} else {
			kp.listDel(p)
			p.Flags &^= KprobeFlagOptimized
		}
		return
	}
	if force {
		kp.forceUnoptimizeKprobe(p)
	} else {
		kp.listAdd(p, QueueUnoptimizing)
		kp.kicked = true
	}
}

// forceUnoptimizeKprobe models kernel/kprobes.c:force_unoptimize_kprobe.
func (kp *Kprobes) forceUnoptimizeKprobe(op *Kprobe) {
	kp.archUnoptimizeKprobe(op)
	op.Flags &^= KprobeFlagOptimized
}

// optprobeQueuedUnopt models kernel/kprobes.c:optprobe_queued_unopt: a
// walk of unoptimizing_list from its head.
func (kp *Kprobes) optprobeQueuedUnopt(op *Kprobe) bool {
	l := kp.unoptimizing
	for i := len(l) - 1; i >= 0; i-- {
		kp.C.Inc(opOptListVisit)
		if l[i] == op {
			return true
		}
	}
	return false
}

// listAdd puts op at the head of list q (list_add).
func (kp *Kprobes) listAdd(op *Kprobe, q OptQueue) {
	op.Queue = q
	switch q {
	case QueueOptimizing:
		kp.optimizing = append(kp.optimizing, op)
	case QueueUnoptimizing:
		kp.unoptimizing = append(kp.unoptimizing, op)
	case QueueFreeing:
		kp.freeing = append(kp.freeing, op)
	}
}

// listDel takes op off its list (list_del_init, O(1) in the kernel; the
// simulator searches its slice).
func (kp *Kprobes) listDel(op *Kprobe) {
	var l *[]*Kprobe
	switch op.Queue {
	case QueueOptimizing:
		l = &kp.optimizing
	case QueueUnoptimizing:
		l = &kp.unoptimizing
	case QueueFreeing:
		l = &kp.freeing
	default:
		return
	}
	for i := len(*l) - 1; i >= 0; i-- {
		if (*l)[i] == op {
			*l = append((*l)[:i], (*l)[i+1:]...)
			break
		}
	}
	op.Queue = QueueNone
}

// getOptimizedKprobe models kernel/kprobes.c:get_optimized_kprobe as in
// 6.1.192 (skip-disarmed backport): the nearest armed, optimization-ready
// probe in [addr-18, addr-1] whose jump covers addr. With
// iter-get-optimized one descending range query replaces 18 get_kprobe.
func (kp *Kprobes) getOptimizedKprobe(addr uint64) *Kprobe {
	c := kp.C
	ok := func(p *Kprobe) bool { return p.OptReady() && !p.Disarmed() && p.WithinOptimized(addr) }
	if kp.Sw.Has(sim.IterGetOptimized) && kp.Reg.HasTree() {
		it := kp.Reg.OptimizedWindow(addr, c)
		for it.Next() {
			if ok(it.Probe()) {
				return it.Probe()
			}
		}
		return nil
	}
	for i := uint64(1); i < MaxOptimizedLength && i <= addr; i++ {
		if p := kp.Reg.GetKprobe(addr-i, c); p != nil && ok(p) {
			return p
		}
	}
	return nil
}

// KickPending reports whether kick_kprobe_optimizer ran since the last
// optimizer pass (the delayed work is queued).
func (kp *Kprobes) KickPending() bool { return kp.kicked }

// RunOptimizer models one run of the kprobe_optimizer worker
// (kernel/kprobes.c): unoptimize, one synchronize_rcu_tasks, optimize,
// free what was cleaned. It counts in the optimizer phase. The caller
// decides when the delayed work runs (a deterministic schedule, so every
// switch setting sees the same timing).
func (kp *Kprobes) RunOptimizer() {
	c := kp.C
	prev := c.Enter(PhaseOptimizer)
	defer c.Enter(prev)
	kp.kicked = false

	// do_unoptimize_kprobes
	if len(kp.unoptimizing) > 0 {
		// arch_unoptimize_kprobes: each op unpatched, moved to freeing_list.
		for i := len(kp.unoptimizing) - 1; i >= 0; i-- {
			op := kp.unoptimizing[i]
			kp.archUnoptimizeKprobe(op)
			op.Queue = QueueFreeing
			kp.freeing = append(kp.freeing, op)
		}
		kp.unoptimizing = kp.unoptimizing[:0]
	}
	var keep []*Kprobe
	for i := len(kp.freeing) - 1; i >= 0; i-- {
		op := kp.freeing[i]
		op.Flags &^= KprobeFlagOptimized
		if op.Disabled() && !op.Gone() {
			kp.archDisarmKprobe(op)
		}
		if op.Unused() {
			if err := kp.Reg.Delete(op, c); err != nil {
				panic(fmt.Sprintf("kprobes: reaping an unused optprobe: %v", err))
			}
			keep = append(keep, op)
		} else {
			op.Queue = QueueNone
		}
	}
	// freeing_list now holds only the unhashed ops, in list order.
	kp.freeing = kp.freeing[:0]
	for i := len(keep) - 1; i >= 0; i-- {
		kp.freeing = append(kp.freeing, keep[i])
	}
	c.Inc(opSyncRCUTasks)

	// do_optimize_kprobes
	if !kp.Reg.AllDisarmed && kp.Cfg.AllowOptimization && len(kp.optimizing) > 0 {
		for i := len(kp.optimizing) - 1; i >= 0; i-- {
			op := kp.optimizing[i]
			kp.archOptimizeKprobe(op)
			op.Queue = QueueNone
			kp.ex().step(rec{ev: evArchOptimizeKprobes, addr: op.Addr, n: op.Opt.Size})
		}
		kp.optimizing = kp.optimizing[:0]
	}

	// do_free_cleaned_kprobes
	for i := len(kp.freeing) - 1; i >= 0; i-- {
		op := kp.freeing[i]
		op.Queue = QueueNone
		if !op.Unused() {
			continue // WARN_ON_ONCE
		}
		if kp.g.freeCleanedReoptimize { // 7.3: retry the sibling it held back
			if q := kp.getOptimizedKprobe(op.Addr); q != nil {
				kp.optimizeKprobe(q)
			}
		}
		kp.freeAggrKprobe(op)
	}
	kp.freeing = kp.freeing[:0]
	if len(kp.optimizing) > 0 || len(kp.unoptimizing) > 0 {
		kp.kicked = true
	}
}

// freeAggrKprobe models kernel/kprobes.c:free_aggr_kprobe (OPTPROBES).
func (kp *Kprobes) freeAggrKprobe(ap *Kprobe) {
	kp.archRemoveOptimizedKprobe(ap, true)
	kp.archRemoveKprobe(ap)
	kp.C.Inc(opKmalloc)
}

// disarmKprobe models kernel/kprobes.c:disarm_kprobe(p, reopt).
func (kp *Kprobes) disarmKprobe(p *Kprobe, reopt bool) error {
	if p.Ftrace() {
		if kp.Ftrace == nil {
			return EINVAL
		}
		return kp.Ftrace.DisarmKprobeFtrace(kp.C, p.Addr, p.HasPostHandler)
	}
	// __disarm_kprobe
	kp.unoptimizeKprobe(p, kp.Reg.AllDisarmed, kp.ex().reason(rec{ev: evDisarmUnoptimize}))
	if !p.Queued() {
		kp.archDisarmKprobe(p)
		if q := kp.getOptimizedKprobe(p.Addr); q != nil && reopt {
			kp.optimizeKprobe(q)
		}
	}
	return nil
}

// UnregisterKprobes models kernel/kprobes.c:unregister_kprobes: every
// probe's __unregister_kprobe_top under kprobe_mutex, one
// synchronize_rcu, then the bottoms. Probes that were not registered are
// skipped (their top fails). It returns how many were unregistered.
func (kp *Kprobes) UnregisterKprobes(ps []*Kprobe) int {
	c := kp.C
	prev := c.Enter(PhaseUnregister)
	defer c.Enter(prev)
	ops := &UnregisterOps{
		DisarmKprobe:     func(p *Kprobe) error { return kp.disarmKprobe(p, true) },
		OptimizeKprobe:   kp.optimizeKprobe,
		ArchRemoveKprobe: kp.archRemoveKprobe,
		FreeAggrKprobe:   kp.freeAggrKprobe,
	}
	n := 0
	for _, p := range ps {
		if err := kp.Reg.UnregisterKprobe(p, ops, c); err == nil {
			n++
		}
	}
	c.Inc(opSyncRCU)
	return n
}

// Drain runs the optimizer until both of its lists are empty, as the
// re-kicked delayed work eventually does.
func (kp *Kprobes) Drain() {
	for i := 0; kp.kicked || len(kp.optimizing) > 0 || len(kp.unoptimizing) > 0 || len(kp.freeing) > 0; i++ {
		if i > 3 {
			panic("kprobes: optimizer does not converge")
		}
		kp.RunOptimizer()
	}
}

// Bytes reports the modelled kernel memory of the registered probes and
// their slots.
func (kp *Kprobes) Bytes() []sim.NamedBytes {
	var probes, aggrs int64
	for _, p := range kp.Reg.Entries() {
		if p.IsAggr() {
			aggrs++
			probes += int64(p.NumChildren())
		} else {
			probes++
		}
	}
	out := []sim.NamedBytes{
		{Name: "kprobe.structs.bytes", Bytes: probes*128 + aggrs*168},
		{Name: "kprobe.insn_slots.bytes", Bytes: kp.insnSlots.bytes()},
		{Name: "kprobe.optinsn_slots.bytes", Bytes: kp.optSlots.bytes()},
	}
	// The index: the hash table's bucket heads (or the rhashtable), and the
	// P4 tree (an rb_node of 3 words per entry, or the B-tree's nodes).
	return append(out, kp.Reg.Bytes()...)
}
