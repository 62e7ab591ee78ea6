package kprobes

import (
	"slices"

	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

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
	fast      *slotIndex // the fast form (nil: walk ic.pages)
	// src is c->alloc / c->free: where the generation takes insn pages
	// from (gen.go); nil is 6.1's module_alloc.
	src pageSource
	// cpus is num_online_cpus() (Config.CPUs), for the page sources'
	// TLB-flush broadcasts.
	cpus int
}

// slotIndex is the simulator's fast form of the page list (the default;
// ic.pages and its walks are the straightforward form, kept for
// SimOptions.Walk). __get_insn_slot and __free_insn_slot walk c->pages from
// the head; every new page is added at the head (list_add_rcu) and a page
// leaves from anywhere (list_del_rcu), so a page's position from the head
// is the number of live pages created no earlier than it (seqCount over
// the creation order). The walk stops at the newest page with room (the
// newest member of a second seqCount, pages with nused < slots_per_page;
// nused counts used and dirty slots, so such a page always has a clean
// slot) or at the page holding the slot (pages are never reused, so the
// slot's address names its page). The scan of slot_used[] is bounded by a
// page and stays a scan, started at a hint below which no slot is clean.
// collect_garbage_slots visits every page once and scans only those with
// garbage, which the index lists. The counts are the walks', proved by
// TestSlotCacheFastMatchesWalk and the scenario differentials.
type slotIndex struct {
	pages   seqCount    // live pages by creation number
	room    seqCount    // live pages with a clean slot
	bySeq   []*insnPage // bySeq[seq]; nil once freed
	garbage []int       // pages with ngarbage > 0 (creation numbers)
}

type insnPage struct {
	base     uint64
	used     []uint8 // slotClean, slotUsed, slotDirty
	nused    int
	ngarbage int
	seq      int // creation number (fast form; 1 for the first page)
	clean    int // fast form: no slot below this index is clean
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
func newInsnCache(name string, slotSize int, walk bool) *insnCache {
	if slotSize <= 0 {
		slotSize = 1
	}
	// slots_per_page: PAGE_SIZE / insn_size.
	ic := &insnCache{name: name, slotSize: slotSize, perPage: 4096 / slotSize, nextBase: insnPageBase, cpus: DefaultConfig().CPUs}
	if !walk {
		ic.fast = &slotIndex{bySeq: []*insnPage{nil}}
	}
	return ic
}

// getInsnSlot models kernel/kprobes.c:__get_insn_slot (no garbage to
// collect: with CONFIG_PREEMPTION nothing is freed dirty). It walks the
// pages from the head for one with a free slot and scans its slot_used[]
// bytes for the first clean one; with every page full it allocates a new
// page at the head. fail injects the page allocation failure (-ENOMEM).
func (ic *insnCache) getInsnSlot(c *sim.Counters, faults *sim.Faults, fail sim.FaultPoint) (uint64, bool) {
	if ic.fast != nil {
		return ic.getInsnSlotFast(c, faults, fail)
	}
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
	kip := ic.newInsnPage(c, faults, fail)
	if kip == nil {
		return 0, false
	}
	ic.pages = append(ic.pages, kip)
	return kip.base, true
}

// newInsnPage is __get_insn_slot's tail when every page is full: kmalloc
// the page descriptor, c->alloc the page (failing at fail), announce it
// (perf_event_ksymbol) and take its first slot. It returns nil when the
// allocation fails. Both forms of getInsnSlot end with it.
//
// Models kernel/kprobes.c:__get_insn_slot (the new page).
func (ic *insnCache) newInsnPage(c *sim.Counters, faults *sim.Faults, fail sim.FaultPoint) *insnPage {
	c.Inc(opKmalloc)
	if faults.Fail(fail) {
		c.Inc(opKmalloc) // the kfree of the page descriptor
		return nil
	}
	ic.source().allocInsnPage(c, ic.cpus)
	c.Inc(opPerfPoke) // perf_event_ksymbol
	kip := &insnPage{base: ic.nextBase, used: make([]uint8, ic.perPage), nused: 1, clean: 1}
	kip.used[0] = slotUsed
	ic.nextBase += 4096
	return kip
}

// freeInsnSlot models kernel/kprobes.c:__free_insn_slot: find the page
// holding slot walking from the head; a dirty slot (one a CPU may still be
// executing, e.g. an optprobe detour) becomes garbage, collected when more
// than a page's worth accumulates; a clean one is collected at once.
func (ic *insnCache) freeInsnSlot(c *sim.Counters, slot uint64, dirty bool) {
	if ic.fast != nil {
		ic.freeInsnSlotFast(c, slot, dirty)
		return
	}
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
		ic.source().freeInsnPage(c, ic.cpus)
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
	return int64(ic.npages()) * int64(4096+40+ic.perPage)
}

// npages is the number of pages on c->pages.
func (ic *insnCache) npages() int {
	if ic.fast != nil {
		return ic.fast.pages.n
	}
	return len(ic.pages)
}

// getInsnSlotFast is getInsnSlot on the slotIndex: the same decisions and
// counts (see slotIndex) without walking the pages.
//
// Models kernel/kprobes.c:__get_insn_slot.
func (ic *insnCache) getInsnSlotFast(c *sim.Counters, faults *sim.Faults, fail sim.FaultPoint) (uint64, bool) {
	f := ic.fast
	for {
		if seq := f.room.newest(); seq != 0 {
			// The walk visits every page from the head down to this one.
			kip := f.bySeq[seq]
			c.Add(opSlotPage, uint64(f.pages.position(seq)))
			s := kip.clean
			for kip.used[s] != slotClean {
				s++
			}
			c.Add(opSlotScan, uint64(s+1)) // slot_used[0..s] compared
			kip.used[s] = slotUsed
			kip.nused++
			kip.clean = s + 1
			if kip.nused == ic.perPage {
				f.room.leave(seq)
			}
			return kip.base + uint64(s*ic.slotSize), true
		}
		c.Add(opSlotPage, uint64(f.pages.n)) // every page visited, all full
		if ic.nrGarbage == 0 {
			break
		}
		ic.collectGarbageSlotsFast(c)
	}
	kip := ic.newInsnPage(c, faults, fail)
	if kip == nil {
		return 0, false
	}
	kip.seq = f.pages.join()
	f.bySeq = append(f.bySeq, kip) // bySeq[kip.seq]: pages join in creation order
	if kip.nused < ic.perPage {
		f.room.add(kip.seq)
	}
	return kip.base, true
}

// freeInsnSlotFast is freeInsnSlot on the slotIndex.
//
// Models kernel/kprobes.c:__free_insn_slot.
func (ic *insnCache) freeInsnSlotFast(c *sim.Counters, slot uint64, dirty bool) {
	f := ic.fast
	var kip *insnPage
	if slot >= insnPageBase {
		if seq := (slot-insnPageBase)/4096 + 1; seq < uint64(len(f.bySeq)) {
			kip = f.bySeq[seq]
		}
	}
	if kip == nil {
		c.Add(opSlotPage, uint64(f.pages.n)) // the walk finds no page
		return
	}
	c.Add(opSlotPage, uint64(f.pages.position(kip.seq)))
	s := int(slot-kip.base) / ic.slotSize
	if dirty {
		kip.used[s] = slotDirty
		if kip.ngarbage == 0 {
			f.garbage = append(f.garbage, kip.seq)
		}
		kip.ngarbage++
		ic.nrGarbage++
		if ic.nrGarbage > ic.perPage {
			ic.collectGarbageSlotsFast(c)
		}
		return
	}
	ic.collectOneSlotFast(c, kip, s)
}

// collectOneSlotFast is collectOneSlot on the slotIndex.
//
// Models kernel/kprobes.c:collect_one_slot.
func (ic *insnCache) collectOneSlotFast(c *sim.Counters, kip *insnPage, s int) bool {
	f := ic.fast
	kip.used[s] = slotClean
	if kip.nused == ic.perPage {
		f.room.add(kip.seq)
	}
	kip.nused--
	kip.clean = min(kip.clean, s)
	if kip.nused != 0 {
		return false
	}
	if f.pages.n > 1 {
		c.Inc(opSyncRCU)
		ic.source().freeInsnPage(c, ic.cpus)
		c.Inc(opKmalloc)
		f.pages.leave(kip.seq)
		f.room.leave(kip.seq)
		f.bySeq[kip.seq] = nil
	}
	return true
}

// collectGarbageSlotsFast is collectGarbageSlots on the slotIndex: the
// walk visits every page on the list once (a page freed on the way has
// been visited already) and scans the pages with garbage, head first.
//
// Models kernel/kprobes.c:collect_garbage_slots.
func (ic *insnCache) collectGarbageSlotsFast(c *sim.Counters) {
	f := ic.fast
	c.Inc(opSyncRCU)
	c.Add(opSlotPage, uint64(f.pages.n))
	slices.SortFunc(f.garbage, func(a, b int) int { return b - a }) // newest (head) first
	for _, seq := range f.garbage {
		kip := f.bySeq[seq]
		if kip == nil || kip.ngarbage == 0 {
			continue
		}
		kip.ngarbage = 0
		var scans uint64
		for s := 0; s < ic.perPage; s++ {
			scans++
			if kip.used[s] == slotDirty && ic.collectOneSlotFast(c, kip, s) {
				break
			}
		}
		c.Add(opSlotScan, scans)
	}
	f.garbage = f.garbage[:0]
	ic.nrGarbage = 0
}

// source is the cache's page source (6.1's when none was chosen).
func (ic *insnCache) source() pageSource {
	if ic.src == nil {
		return moduleAllocPages{}
	}
	return ic.src
}

// pageSource is where a kprobe insn cache's pages come from and go:
// kprobe_insn_cache.alloc / .free (alloc_insn_page / free_insn_page; the
// optinsn cache's weak alloc_optinsn_page calls the same).
type pageSource interface {
	// cpus is num_online_cpus(): each set_memory_* call's TLB flush
	// interrupts the others (mm.SetMemoryCalls).
	allocInsnPage(c *sim.Counters, cpus int)
	freeInsnPage(c *sim.Counters, cpus int)
}

// moduleAllocPages: module_alloc(PAGE_SIZE), set_memory_ro, set_memory_x;
// freed with module_memfree (vfree).
//
// Models arch/x86/kernel/kprobes/core.c:alloc_insn_page (6.1.192).
type moduleAllocPages struct{}

func (moduleAllocPages) allocInsnPage(c *sim.Counters, cpus int) {
	c.Inc(opSlotAlloc)
	mm.SetMemoryCalls(c, 2, cpus) // set_memory_ro, set_memory_x
}

// freeInsnPage is priced as an allocation (kprobe.insn_page.alloc: two
// set_memory_* calls' worth of page-table work and flushes).
func (moduleAllocPages) freeInsnPage(c *sim.Counters, cpus int) {
	c.Inc(opSlotAlloc)
	mm.SetMemoryCalls(c, 2, cpus)
}

// execmemPages: execmem_alloc(EXECMEM_KPROBES, PAGE_SIZE) (x86 sets no
// EXECMEM_KPROBES range in 6.12, so execmem_init_missing copies the
// default: a plain vmalloc in the module range) and one set_memory_rox;
// freed with execmem_free (vfree, as 6.1).
//
// Models arch/x86/kernel/kprobes/core.c:alloc_insn_page (6.12.117).
type execmemPages struct{}

func (execmemPages) allocInsnPage(c *sim.Counters, cpus int) {
	c.Inc(opSlotAllocExecmem)
	mm.SetMemoryCalls(c, 1, cpus) // set_memory_rox
}

func (execmemPages) freeInsnPage(c *sim.Counters, cpus int) { moduleAllocPages{}.freeInsnPage(c, cpus) }

// execmemROXCache: 7.3's generic alloc_insn_page = execmem_alloc(
// EXECMEM_KPROBES), whose x86 range has EXECMEM_ROX_CACHE
// (CONFIG_ARCH_HAS_EXECMEM_ROX, and X86_FEATURE_PSE, which the model
// assumes): a page is carved from a free area of the ROX cache; when none
// is left, execmem_cache_populate_alloc vmallocs round_up(PAGE_SIZE,
// PMD_SIZE) = 2 MiB, fills it with int3, set_memory_rox once and adds it.
// execmem_free gives the page back to the cache (execmem_force_rw, trap
// fill, execmem_restore_rox). The cache is shared with module text,
// ftrace and BPF; the model assumes kprobes' pages are the only ones
// taken from its free areas after boot (free counts the bytes left).
//
// Models kernel/kprobes.c:alloc_insn_page / free_insn_page (7.3) with
// mm/execmem.c:execmem_cache_alloc / execmem_cache_free (7.3).
type execmemROXCache struct{ free uint64 }

const (
	pageSize = 4096
	pmdSize  = 2 << 20
)

func (e *execmemROXCache) allocInsnPage(c *sim.Counters, cpus int) {
	if e.free < pageSize {
		c.Inc(opExecmemCachePopulate)
		mm.SetMemoryCalls(c, 1, cpus) // set_memory_rox of the 2 MiB
		e.free += pmdSize
	}
	c.Inc(opExecmemCacheAlloc)
	e.free -= pageSize
}

func (e *execmemROXCache) freeInsnPage(c *sim.Counters, cpus int) {
	c.Inc(opExecmemCacheFree)
	mm.SetMemoryCalls(c, 3, cpus) // execmem_force_rw (nx, rw), execmem_restore_rox
	e.free += pageSize
}
