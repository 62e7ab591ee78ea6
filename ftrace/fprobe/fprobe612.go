package fprobe

import (
	"fmt"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/sim"
)

// Ops of 6.12.117's rethook_alloc → objpool_init. Weights: below.
var (
	OpObjpoolInit = sim.NewOp("fprobe.objpool.init", wObjpoolInit, rObjpoolInit,
		"objpool_init: the kzalloc of pool->cpu_slots (nr_cpu_ids pointers) and the pool set-up")
	OpObjpoolSlot = sim.NewOp("fprobe.objpool.slot", wObjpoolSlot, rObjpoolSlot,
		"objpool_init_percpu_slots: one possible CPU's slot, a __vmalloc_node of the entries array (capacity pointers) plus its share of the nodes")
	OpObjpoolPage = sim.NewOp("fprobe.objpool.page", wObjpoolPage, rObjpoolPage,
		"one 4 KiB page of an objpool slot: the vmalloc page and PTE, and the slot's memset")
	OpObjpoolNode = sim.NewOp("fprobe.objpool.node", wObjpoolNode, rObjpoolNode,
		"objpool_init_percpu_slot: one node, rethook_init_node (node->rethook) and the slot entry store")
)

// Weights.
const (
	wObjpoolInit = 80
	rObjpoolInit = "as fprobe.rethook.node (BenchmarkWeightHashCopy, 30.6 ns ≈ 80 cycles): one SLUB allocation of a small zeroed object"
	wObjpoolSlot = 1500
	rObjpoolSlot = "hardware fact: __vmalloc_node_range's fixed work — a vmap_area from the busy/free rb-trees under their spinlocks, the vm_struct kzalloc, the area's page-array kmalloc — ≈ 0.6 µs at 2.6 GHz; its pages are fprobe.objpool.page"
	wObjpoolPage = 380
	rObjpoolPage = "as bpf mm.vmalloc.page (250 cycles: a buddy page from the per-CPU lists plus one PTE of vmap_pages_range) plus objpool's memset of 4 KiB at 32 bytes/cycle (≈ 130 cycles)"
	wObjpoolNode = 3
	rObjpoolNode = "hardware fact: two stores (node->rethook, slot->entries[tail]) and the tail/nr_objs increments in an L1-hot loop ≈ 3 cycles"
)

// objpoolNrObjectMax is OBJPOOL_NR_OBJECT_MAX (include/linux/objpool.h,
// 6.12.117): objpool_init refuses more objects with -EINVAL, which
// rethook_alloc returns as ERR_PTR(-ENOMEM).
const objpoolNrObjectMax = 1 << 24

// RethookNodeBytes612 is sizeof(struct fprobe_rethook_node) on x86-64
// 6.12.117: struct rethook_node (rcu_head 16, llist_node 8, rethook* 8,
// ret_addr 8, frame 8 = 48) plus entry_ip and entry_parent_ip.
const RethookNodeBytes612 = 64

// initRethook612 models kernel/trace/fprobe.c:fprobe_init_rethook (6.12.117):
// num = nr_maxactive or num × num_possible_cpus() × 2 (≤ 0: -EINVAL), then
// rethook_alloc(fp, fprobe_exit_handler, sizeof(fprobe_rethook_node) +
// entry_data_size, num): the struct rethook kzalloc and objpool_init —
// more than OBJPOOL_NR_OBJECT_MAX nodes is -EINVAL there, -ENOMEM from
// rethook_alloc; the cpu_slots array; per possible CPU one vmalloc'd slot
// of 16 + roundup_pow_of_two(num) × 8 + obj_size × its nodes bytes,
// memset, its nodes initialised (objpool_init_percpu_slots).
func initRethook612(e *Env, c *sim.Counters, fp *Fprobe, num int) error {
	if !fp.ExitHandler {
		return nil
	}
	if fp.NrMaxActive != 0 {
		num = fp.NrMaxActive
	} else {
		num *= e.PossibleCPUs * 2
	}
	if num <= 0 {
		return errno.EINVAL
	}
	if e.Faults.Fail(FaultRethookAlloc) {
		return errno.ENOMEM
	}
	c.Inc(OpRethookAlloc)
	if num > objpoolNrObjectMax {
		e.why = fmt.Sprintf("fprobe_init_rethook (6.12.117): rethook_alloc → objpool_init refuses %d nodes > OBJPOOL_NR_OBJECT_MAX", num)
		return errno.ENOMEM
	}
	c.Inc(OpObjpoolInit)
	objSize := (RethookNodeBytes612 + fp.EntryDataSize + 7) &^ 7
	capacity := 1
	for capacity < num {
		capacity <<= 1
	}
	cpus := max(e.PossibleCPUs, 1)
	var bytes int64
	for cpu := 0; cpu < cpus; cpu++ {
		nodes := num / cpus
		if cpu < num%cpus {
			nodes++
		}
		size := int64(16 + capacity*8 + objSize*nodes)
		c.Inc(OpObjpoolSlot)
		c.Add(OpObjpoolPage, uint64((size+4095)/4096))
		bytes += size
	}
	c.Add(OpObjpoolNode, uint64(num))
	fp.rethookSize, fp.rethookBytes = num, bytes
	return nil
}
