package kprobes

import (
	"github.com/kpsim/kpsim/sim"
)

// Phases of the enable and disable paths the front doors take after
// registration (kernel/kprobes.c:enable_kprobe, disable_kprobe). Arming
// itself is counted in PhaseArm, disarming in PhaseDisable.
var (
	PhaseEnable  = sim.NewPhase("enable_kprobe", "enable_kprobe: __get_valid_kprobe, flag updates (arming is counted in arm)")
	PhaseDisable = sim.NewPhase("disable_kprobe", "disable_kprobe: __disable_kprobe, disarm_kprobe")
)

// EnableKprobe models kernel/kprobes.c:enable_kprobe (6.1.192): the probe
// must be registered and not gone; a child of an aggregator loses its own
// DISABLED flag; a disabled entry (the aggregator or the probe itself) is
// armed, and a failed arm restores both flags. Arming an int3 probe ends in
// optimize_kprobe, which queues a prepared aggregator for the optimizer:
// this is where a probe registered disabled (tracefs, perf) gets optimized.
func (kp *Kprobes) EnableKprobe(p *Kprobe) error {
	c, x := kp.C, kp.ex()
	prev := c.Enter(PhaseEnable)
	defer c.Enter(prev)
	p.refused = Reason{}
	ap := kp.Reg.GetValidKprobe(p, c)
	if ap == nil {
		p.refused = x.reason(rec{ev: evEnableNotRegistered})
		return EINVAL
	}
	if p.Gone() {
		p.refused = x.reason(rec{ev: evEnableGone})
		return EINVAL
	}
	defer x.close(x.open(rec{ev: evEnableKprobe, addr: p.Addr}))
	if p != ap {
		p.Flags &^= KprobeFlagDisabled
	}
	if !kp.Reg.AllDisarmed && ap.Disabled() {
		ap.Flags &^= KprobeFlagDisabled
		c.Enter(PhaseArm)
		err := kp.armKprobe(ap)
		c.Enter(PhaseEnable)
		if err != nil {
			ap.Flags |= KprobeFlagDisabled
			if p != ap {
				p.Flags |= KprobeFlagDisabled
			}
			p.refused = kp.why
			return err
		}
	}
	return nil
}

// DisableKprobe models kernel/kprobes.c:disable_kprobe: __disable_kprobe
// (the probe flagged DISABLED; its entry disarmed once no child is
// enabled, re-optimizing a neighbour the int3 had blocked).
func (kp *Kprobes) DisableKprobe(p *Kprobe) error {
	c := kp.C
	prev := c.Enter(PhaseDisable)
	defer c.Enter(prev)
	ops := &UnregisterOps{DisarmKprobe: func(p *Kprobe) error { return kp.disarmKprobe(p, true) }}
	if _, err := kp.Reg.disableKprobe(p, ops, c); err != nil {
		if err == ErrInvalid {
			return EINVAL
		}
		return err
	}
	return nil
}

// KprobeOnFuncEntry models kernel/kprobes.c:kprobe_on_func_entry: resolve
// (addr or sym+offset) as _kprobe_addr does and report whether the result
// is a function entry: nil, EINVAL when it is not an entry, or _kprobe_addr's
// error (ENOENT for an unknown symbol). Counted in the caller's phase.
func (kp *Kprobes) KprobeOnFuncEntry(addr uint64, sym string, offset uint32) error {
	_, onEntry, err := kp.kprobeAddr(&Kprobe{Addr: addr, SymbolName: sym, Offset: offset})
	if err != nil {
		return err
	}
	if !onEntry {
		return EINVAL
	}
	return nil
}

// KprobeAddr models kernel/kprobes.c:kprobe_addr (_kprobe_addr without the
// entry flag), counted in the caller's phase.
func (kp *Kprobes) KprobeAddr(addr uint64, sym string, offset uint32) (uint64, error) {
	a, _, err := kp.kprobeAddr(&Kprobe{Addr: addr, SymbolName: sym, Offset: offset})
	return a, err
}

// KretprobeMaxDataSize is KRETPROBE_MAX_DATA_SIZE (include/linux/kprobes.h).
const KretprobeMaxDataSize = 4096

// Kretprobe models struct kretprobe as far as registration needs it.
type Kretprobe struct {
	Kp        Kprobe
	MaxActive int // 0: max(10, 2 * num_possible_cpus())
	DataSize  int
	// instances is rp->maxactive once the rethook is populated (0 when
	// not registered).
	instances int
}

// Instances reports how many kretprobe_instance objects were allocated.
func (rp *Kretprobe) Instances() int { return rp.instances }

// RegisterKretprobe models kernel/kprobes.c:register_kretprobe with
// CONFIG_KRETPROBE_ON_RETHOOK (Debian 6.1): kprobe_on_func_entry, the
// re-registration check for address probes, the arch kretprobe blacklist
// (x86: __switch_to, resolved at init_kprobes), the data-size limit, then
// rethook_alloc and maxactive instance allocations before register_kprobe.
// The pre handler is pre_handler_kretprobe, there is no post handler.
func (kp *Kprobes) RegisterKretprobe(rp *Kretprobe) error {
	p := &rp.Kp
	p.refused, kp.why = Reason{}, Reason{}
	err := kp.registerKretprobe(rp)
	if err != nil && p.refused.IsZero() {
		p.refused = kp.why
		if p.refused.IsZero() {
			p.refused = kp.ex().reason(rec{ev: evRegisterKretprobeFailed, err: err})
		}
	}
	return err
}

func (kp *Kprobes) registerKretprobe(rp *Kretprobe) error {
	c, x := kp.C, kp.ex()
	prev := c.Enter(PhaseNameLookup)
	defer c.Enter(prev)
	p := &rp.Kp
	if _, onEntry, err := kp.kprobeAddr(&Kprobe{Addr: p.Addr, SymbolName: p.SymbolName, Offset: p.Offset}); err != nil {
		return err
	} else if !onEntry {
		return x.refuse(EINVAL, rec{ev: evKretprobeNotEntry, p: p})
	}
	if p.Addr != 0 {
		c.Enter(PhaseRereg)
		if kp.Reg.GetValidKprobe(p, c) != nil {
			return x.refuse(EINVAL, rec{ev: evKretprobeRereg})
		}
		c.Enter(PhaseNameLookup)
	}
	// kretprobe_blacklist_size is 1 on x86: kprobe_addr and one compare.
	addr, err := kp.KprobeAddr(p.Addr, p.SymbolName, p.Offset)
	if err != nil {
		p.refused = kp.why
		return err
	}
	c.Inc(opConst)
	if sw := kp.switchTo(); sw != 0 && addr == sw {
		return x.refuse(EINVAL, rec{ev: evKretprobeBlacklist})
	}
	if rp.DataSize > KretprobeMaxDataSize {
		return x.refuse(E2BIG, rec{ev: evKretprobeDataSize, n: rp.DataSize})
	}
	p.HasPostHandler = false
	if rp.MaxActive <= 0 {
		rp.MaxActive = max(10, 2*kp.Cfg.CPUs)
	}
	c.Enter(PhasePrepare)
	if err := kp.g.rethookAlloc(kp, rp); err != nil {
		return err
	}
	if err := kp.RegisterKprobe(p); err != nil {
		c.Enter(PhasePrepare)
		kp.g.rethookFree(kp, rp)
		return err
	}
	return nil
}

// UnregisterKretprobes models kernel/kprobes.c:unregister_kretprobes: the
// kprobes' tops, one synchronize_rcu, then rethook_free (the instances are
// freed after a grace period: one kfree each, counted here).
func (kp *Kprobes) UnregisterKretprobes(rps []*Kretprobe) int {
	ps := make([]*Kprobe, len(rps))
	for i, rp := range rps {
		ps[i] = &rp.Kp
	}
	n := kp.UnregisterKprobes(ps)
	prev := kp.C.Enter(PhaseUnregister)
	for _, rp := range rps {
		if rp.instances > 0 {
			kp.g.rethookFree(kp, rp)
		}
	}
	kp.C.Enter(prev)
	return n
}

// switchTo is the address init_kprobes resolved for x86's
// kretprobe_blacklist (__switch_to), 0 if the image has none. Boot work:
// not counted.
func (kp *Kprobes) switchTo() uint64 {
	if kp.kretBlacklist == nil {
		a, _ := kp.Syms.LookupName(nil, "__switch_to")
		kp.kretBlacklist = &a
	}
	return *kp.kretBlacklist
}

// OpSyncRCU is the synchronize_rcu op, for the front doors that wait for
// grace periods of their own (tracefs deletion, perf close).
var OpSyncRCU = opSyncRCU

// OpKmalloc is the kmalloc/kzalloc/kfree op.
var OpKmalloc = opKmalloc
