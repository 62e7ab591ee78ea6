package kprobes

import (
	"fmt"

	"github.com/kpsim/kpsim/sim"
)

// Fault points of register_kretprobe (CONFIG_KRETPROBE_ON_RETHOOK, as on
// Debian 6.1) and of arch_prepare_optimized_kprobe's staging buffer. The
// pipeline's first points (insn and optinsn slots, the aggregator) are in
// pipeline_ops.go.
var (
	FaultRethookAlloc = sim.NewFaultPoint("kretprobe.rethook.alloc",
		"register_kretprobe: rethook_alloc's kzalloc fails (-ENOMEM; nothing allocated, nothing to free)")
	FaultOptinsnBuf = sim.NewFaultPoint("kprobe.optinsn_buf.alloc",
		"arch_prepare_optimized_kprobe: kzalloc of the MAX_OPTINSN_SIZE staging buffer fails (-ENOMEM before get_optinsn_slot: optimization silently skipped)")
	FaultKretprobeInstance = sim.NewFaultPoint("kretprobe.instance.alloc",
		"register_kretprobe: the kzalloc of one kretprobe_instance fails (-ENOMEM; rethook_free frees the rethook and the instances already added); @N fails the N-th instance")
)

// rethookAlloc models the allocation block of
// kernel/kprobes.c:register_kretprobe (CONFIG_KRETPROBE_ON_RETHOOK): rh = rethook_alloc(rp,
// kretprobe_rethook_handler), -ENOMEM if NULL; then rp->maxactive
// kzalloc(sizeof(struct kretprobe_instance) + data_size), each added to
// the pool with rethook_add_node; a NULL one makes rethook_free(rp->rh)
// free the rethook and every node already added (call_rcu →
// rethook_free_rcu: one kfree each) and returns -ENOMEM. On success
// rp.instances is rp.MaxActive. Without faults it counts exactly
// 1 + maxactive kmallocs, as before the points existed.
func (kp *Kprobes) rethookAlloc(rp *Kretprobe) error {
	c := kp.C
	c.Inc(opKmalloc) // rethook_alloc's kzalloc
	if kp.Faults.Fail(FaultRethookAlloc) {
		return kp.refuse(ENOMEM, "register_kretprobe: rethook_alloc", "kzalloc of the rethook failed")
	}
	for i := 0; i < rp.MaxActive; i++ {
		c.Inc(opKmalloc)
		if kp.Faults.Fail(FaultKretprobeInstance) {
			c.Add(opKmalloc, uint64(1+i)) // rethook_free: the nodes added and the rethook
			return kp.refuse(ENOMEM, "register_kretprobe: kzalloc", fmt.Sprintf("kretprobe_instance %d of %d: kzalloc failed (rethook_free)", i+1, rp.MaxActive))
		}
	}
	rp.instances = rp.MaxActive
	return nil
}

// RegisterKretprobes models kernel/kprobes.c:register_kretprobes: -EINVAL
// for an empty batch; otherwise register_kretprobe on each in turn, and on
// the i-th failure unregister_kretprobes(rps, i) rolls the first i back.
// It returns the index of the failing kretprobe (or len) and its error;
// the kretprobes rolled back or never attempted say so in Why.
func (kp *Kprobes) RegisterKretprobes(rps []*Kretprobe) (int, error) {
	if len(rps) == 0 {
		return 0, EINVAL
	}
	for i, rp := range rps {
		if err := kp.RegisterKretprobe(rp); err != nil {
			if i > 0 {
				kp.UnregisterKretprobes(rps[:i])
			}
			why := fmt.Sprintf("rps[%d] failed with %s (%s)", i, errName(err), rp.Kp.Why())
			for j, q := range rps {
				switch {
				case j < i:
					q.Kp.refused = Reason{Check: "register_kretprobes", Detail: "rolled back: " + why}
				case j > i:
					q.Kp.refused = Reason{Check: "register_kretprobes", Detail: "not attempted: " + why}
				}
			}
			return i, err
		}
	}
	return len(rps), nil
}
