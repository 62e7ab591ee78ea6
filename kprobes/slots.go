package kprobes

import "github.com/kpsim/kpsim/sim"

// insnCache models struct kprobe_insn_cache (kernel/kprobes.c): pages of
// fixed-size executable slots, newest page at the head of c->pages, each
// with a slot_used[] byte per slot.
type insnCache struct {
	name      string
	slotSize  int
	perPage   int
	pages     []*insnPage // pages[len-1] is the list head (list_add_rcu)
	nextBase  uint64
	nrGarbage int
}

type insnPage struct {
	base     uint64
	used     []uint8 // slotClean, slotUsed, slotDirty
	nused    int
	ngarbage int
}

const (
	slotClean uint8 = iota
	slotDirty
	slotUsed
)

// insnPageBase is where the model places insn pages: the module area,
// where module_alloc / execmem put them, within rel32 reach of the text.
const insnPageBase = 0xffffffffa0000000

// newInsnCache sets up one slot cache with slots_per_page = PAGE_SIZE /
// insn_size.
//
// Models kernel/kprobes.c:init_kprobes' cache setup (kprobe_insn_slots, kprobe_optinsn_slots).
func newInsnCache(name string, slotSize int) *insnCache {
	if slotSize <= 0 {
		slotSize = 1
	}
	// slots_per_page: PAGE_SIZE / insn_size.
	return &insnCache{name: name, slotSize: slotSize, perPage: 4096 / slotSize, nextBase: insnPageBase}
}

// getInsnSlot models kernel/kprobes.c:__get_insn_slot (no garbage to
// collect: with CONFIG_PREEMPTION nothing is freed dirty). It walks the
// pages from the head for one with a free slot and scans its slot_used[]
// bytes for the first clean one; with every page full it allocates a new
// page at the head. fail injects the page allocation failure (-ENOMEM).
func (ic *insnCache) getInsnSlot(c *sim.Counters, faults *sim.Faults, fail sim.FaultPoint) (uint64, bool) {
retry:
	for i := len(ic.pages) - 1; i >= 0; i-- {
		kip := ic.pages[i]
		c.Inc(opSlotPage)
		if kip.nused < ic.perPage {
			for s := 0; s < ic.perPage; s++ {
				c.Inc(opSlotScan)
				if kip.used[s] == slotClean {
					kip.used[s] = slotUsed
					kip.nused++
					return kip.base + uint64(s*ic.slotSize), true
				}
			}
			kip.nused = ic.perPage // WARN_ON(1) in the kernel
		}
	}
	if ic.nrGarbage > 0 {
		ic.collectGarbageSlots(c)
		goto retry
	}
	c.Inc(opKmalloc)
	if faults.Fail(fail) {
		c.Inc(opKmalloc) // the kfree of the page descriptor
		return 0, false
	}
	c.Inc(opSlotAlloc)
	c.Inc(opPerfPoke) // perf_event_ksymbol
	kip := &insnPage{base: ic.nextBase, used: make([]uint8, ic.perPage), nused: 1}
	kip.used[0] = slotUsed
	ic.nextBase += 4096
	ic.pages = append(ic.pages, kip)
	return kip.base, true
}

// freeInsnSlot models kernel/kprobes.c:__free_insn_slot: find the page
// holding slot walking from the head; a dirty slot (one a CPU may still be
// executing, e.g. an optprobe detour) becomes garbage, collected when more
// than a page's worth accumulates; a clean one is collected at once.
func (ic *insnCache) freeInsnSlot(c *sim.Counters, slot uint64, dirty bool) {
	for i := len(ic.pages) - 1; i >= 0; i-- {
		kip := ic.pages[i]
		c.Inc(opSlotPage)
		if slot < kip.base || slot >= kip.base+4096 {
			continue
		}
		s := int(slot-kip.base) / ic.slotSize
		if dirty {
			kip.used[s] = slotDirty
			kip.ngarbage++
			ic.nrGarbage++
			if ic.nrGarbage > ic.perPage {
				ic.collectGarbageSlots(c)
			}
		} else {
			ic.collectOneSlot(c, i, s)
		}
		return
	}
}

// collectOneSlot models kernel/kprobes.c:collect_one_slot. It reports
// whether the page was emptied (and freed, unless it is the only one).
func (ic *insnCache) collectOneSlot(c *sim.Counters, page, s int) bool {
	kip := ic.pages[page]
	kip.used[s] = slotClean
	kip.nused--
	if kip.nused != 0 {
		return false
	}
	if len(ic.pages) > 1 {
		// list_del_rcu, synchronize_rcu, free the page and descriptor.
		c.Inc(opSyncRCU)
		c.Inc(opSlotAlloc)
		c.Inc(opKmalloc)
		ic.pages = append(ic.pages[:page], ic.pages[page+1:]...)
	}
	return true
}

// collectGarbageSlots models kernel/kprobes.c:collect_garbage_slots.
func (ic *insnCache) collectGarbageSlots(c *sim.Counters) {
	c.Inc(opSyncRCU)
	for i := len(ic.pages) - 1; i >= 0; i-- {
		c.Inc(opSlotPage)
		kip := ic.pages[i]
		if kip.ngarbage == 0 {
			continue
		}
		kip.ngarbage = 0
		for s := 0; s < ic.perPage; s++ {
			c.Inc(opSlotScan)
			if kip.used[s] == slotDirty && ic.collectOneSlot(c, i, s) {
				break
			}
		}
	}
	ic.nrGarbage = 0
}

// bytes is the cache's memory: pages plus their descriptors.
func (ic *insnCache) bytes() int64 {
	return int64(len(ic.pages)) * int64(4096+40+ic.perPage)
}
