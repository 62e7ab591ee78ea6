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
//
// Models kernel/kprobes.c:register_kretprobe's rethook block (6.1.192).
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

// rethookFree models rethook_free (6.1.192): call_rcu to rethook_free_rcu,
// one kfree for the rethook and each node in its pool.
//
// Models kernel/trace/rethook.c:rethook_free (6.1.192).
func (kp *Kprobes) rethookFree(rp *Kretprobe) {
	kp.C.Add(opKmalloc, uint64(1+rp.instances))
	rp.instances = 0
}

// rethookAlloc612 models the allocation block of register_kretprobe in
// 6.12.117 and 7.3: rethook_alloc(rp, handler, sizeof(struct
// kretprobe_instance) + data_size, maxactive) = kzalloc of the rethook
// (FaultRethookAlloc) and objpool_init: kzalloc of cpu_slots, then per
// possible CPU one __vmalloc_node of its slot and its share of the
// maxactive objects (FaultKretprobeInstance @N fails the N-th CPU's slot:
// objpool_fini_percpu_slots frees those made and cpu_slots, rethook_alloc
// frees the rethook, ERR_PTR(-ENOMEM)). No per-instance kzalloc. The model
// takes the possible CPUs to be Cfg.CPUs.
//
// Models kernel/trace/rethook.c:rethook_alloc and lib/objpool.c:objpool_init (6.12.117, 7.3).
func (kp *Kprobes) rethookAlloc612(rp *Kretprobe) error {
	c := kp.C
	c.Inc(opKmalloc) // rethook_alloc's kzalloc
	if kp.Faults.Fail(FaultRethookAlloc) {
		return kp.refuse(ENOMEM, "register_kretprobe: rethook_alloc", "kzalloc of the rethook failed")
	}
	c.Inc(opKmalloc) // objpool_init: kzalloc(cpu_slots)
	cpus := max(kp.Cfg.CPUs, 1)
	for i := 0; i < cpus; i++ {
		c.Inc(opObjpoolSlot)
		if kp.Faults.Fail(FaultKretprobeInstance) {
			c.Add(opObjpoolSlot, uint64(i)) // objpool_fini_percpu_slots: kvfree each slot made
			c.Add(opKmalloc, 2)             // kfree(cpu_slots), kfree(rh)
			return kp.refuse(ENOMEM, "register_kretprobe: rethook_alloc: objpool_init",
				fmt.Sprintf("the objpool slot of CPU %d of %d (maxactive %d objects) could not be allocated (6.12+: one allocation per possible CPU, not per instance)", i+1, cpus, rp.MaxActive))
		}
	}
	rp.instances = rp.MaxActive
	return nil
}

// rethookFree612 models rethook_free in 6.12.117 and 7.3: call_rcu to
// objpool_fini, which (no instance in flight) frees each possible CPU's
// slot (kvfree), cpu_slots and, through rethook_fini_pool, the rethook.
//
// Models kernel/trace/rethook.c:rethook_free and lib/objpool.c:objpool_free (6.12.117, 7.3).
func (kp *Kprobes) rethookFree612(rp *Kretprobe) {
	kp.C.Add(opObjpoolSlot, uint64(max(kp.Cfg.CPUs, 1)))
	kp.C.Add(opKmalloc, 2)
	rp.instances = 0
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
