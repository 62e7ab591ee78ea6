package kprobes

import (
	"errors"
	"fmt"
)

// Invariant checks: simulator-side, uncounted assertions about the model's
// state between two calls (kprobe_mutex released). The fault tests and the
// soak campaign call them after every step and after teardown: a failed
// allocation must leave the state exactly as consistent as a success.

// CheckInvariants reports the first broken invariant of the registry, the
// registered probes, the optimizer lists, the slot caches and the counters,
// or nil:
//
//   - kprobe_table (or the rhashtable) and the P4 tree (rbtree or B-tree)
//     hold exactly the same entries, in the same address order, one per
//     address, each in the bucket hash_ptr puts it in;
//   - an aggregator's children point back to it, share its address and
//     insn slot, and are not hashed themselves; a plain entry has no
//     children; only an unused aggregator (disabled, queued for the
//     optimizer to reap) has none;
//   - KPROBE_FLAG_OPTIMIZED ⇒ an optimization-ready aggregator holding an
//     optinsn slot; an entry on ftrace holds no insn slot, any other one
//     (not gone) holds one; an entry is on optimizing_list / unoptimizing_list
//     exactly when its Queue says so, and every queued entry is hashed;
//   - each slot cache's slot_used[] bytes agree with nused, ngarbage and
//     nr_garbage, and the SLOT_USED slots are exactly the slots the
//     registered probes hold;
//   - no counter went down since the previous call (a uint64 count that
//     wrapped is a decrease), which also catches a rollback that
//     "uncounts" work.
func (kp *Kprobes) CheckInvariants() error {
	if err := kp.Reg.checkIndex(); err != nil {
		return err
	}
	if err := kp.checkEntries(); err != nil {
		return err
	}
	if err := kp.checkSlots(); err != nil {
		return err
	}
	return kp.checkCounters()
}

// CheckTeardown is CheckInvariants after every probe was unregistered and
// the optimizer drained: the registry and the tree are empty, no entry is
// queued, and the slot caches hold no SLOT_USED slot. Pages are freed as
// kernel/kprobes.c frees them: collect_one_slot frees an emptied page
// unless it is the only one (list_is_singular keeps the last page, so a
// cache may keep one empty page), and a slot freed dirty (an optprobe's
// detour buffer, a boosted insn) stays SLOT_DIRTY on its page until
// collect_garbage_slots runs, which only a later allocation (or more than
// a page's worth of garbage) triggers. So every page left is either the
// cache's only page or holds nothing but garbage.
func (kp *Kprobes) CheckTeardown() error {
	if err := kp.CheckInvariants(); err != nil {
		return err
	}
	if n := kp.Reg.Len(); n != 0 {
		return fmt.Errorf("teardown: %d entries still hashed (first at %#x)", n, kp.Reg.Entries()[0].Addr)
	}
	if n := len(kp.optimizing) + len(kp.unoptimizing) + len(kp.freeing); n != 0 {
		return fmt.Errorf("teardown: %d optimizer list entries left (optimizing %d, unoptimizing %d, freeing %d)",
			n, len(kp.optimizing), len(kp.unoptimizing), len(kp.freeing))
	}
	for _, ic := range []*insnCache{kp.insnSlots, kp.optSlots} {
		pages := ic.livePages()
		for _, pg := range pages {
			used := pg.nused - pg.ngarbage
			switch {
			case used != 0:
				return fmt.Errorf("teardown: %s page %#x still has %d slots in use", ic.name, pg.base, used)
			case pg.nused == 0 && len(pages) > 1:
				return fmt.Errorf("teardown: %s page %#x is empty but not freed, and it is not the only page (collect_one_slot frees it unless list_is_singular)", ic.name, pg.base)
			}
		}
	}
	return nil
}

// SlotPages reports how many pages the insn and optinsn slot caches hold,
// and how many of their slots are in use and garbage (SLOT_DIRTY).
// Simulator-side, for tests and reports.
func (kp *Kprobes) SlotPages() (insnPages, insnUsed, insnDirty, optPages, optUsed, optDirty int) {
	count := func(ic *insnCache) (pages, used, dirty int) {
		ps := ic.livePages()
		for _, pg := range ps {
			used += pg.nused - pg.ngarbage
			dirty += pg.ngarbage
		}
		return len(ps), used, dirty
	}
	insnPages, insnUsed, insnDirty = count(kp.insnSlots)
	optPages, optUsed, optDirty = count(kp.optSlots)
	return
}

// OptimizerQueued reports the lengths of optimizing_list and
// unoptimizing_list. Simulator-side.
func (kp *Kprobes) OptimizerQueued() (optimizing, unoptimizing int) {
	return len(kp.optimizing), len(kp.unoptimizing)
}

// checkIndex: table and tree agree, entry by entry, in address order.
func (r *Registry) checkIndex() error {
	if err := r.table.check(); err != nil {
		return err
	}
	hashed := r.Entries()
	if len(hashed) != r.n {
		return fmt.Errorf("registry: %d entries hashed, count says %d", len(hashed), r.n)
	}
	for i, p := range hashed {
		if p.owner != r {
			return fmt.Errorf("registry: entry %#x is hashed but not owned by this registry", p.Addr)
		}
		if p.parent != nil {
			return fmt.Errorf("registry: entry %#x is hashed and also a child of %#x", p.Addr, p.parent.Addr)
		}
		if i > 0 && hashed[i-1].Addr >= p.Addr {
			return fmt.Errorf("registry: two entries at %#x (or out of order after %#x)", p.Addr, hashed[i-1].Addr)
		}
	}
	if !r.tree.present() {
		return nil
	}
	tree, err := r.tree.entries()
	if err != nil {
		return err
	}
	if len(tree) != len(hashed) {
		return fmt.Errorf("registry: the tree holds %d entries, the hash table %d", len(tree), len(hashed))
	}
	for i := range tree {
		if tree[i] != hashed[i] {
			return fmt.Errorf("registry: entry %d in address order: tree %#x (%p), hash table %#x (%p)", i, tree[i].Addr, tree[i], hashed[i].Addr, hashed[i])
		}
	}
	return nil
}

// checkEntries: each entry's own state and the optimizer lists.
func (kp *Kprobes) checkEntries() error {
	queued := map[*Kprobe]OptQueue{}
	for q, l := range map[OptQueue][]*Kprobe{QueueOptimizing: kp.optimizing, QueueUnoptimizing: kp.unoptimizing, QueueFreeing: kp.freeing} {
		for _, op := range l {
			if prev, dup := queued[op]; dup {
				return fmt.Errorf("optimizer: %#x is on two lists (%d and %d)", op.Addr, prev, q)
			}
			queued[op] = q
			if op.Queue != q {
				return fmt.Errorf("optimizer: %#x is on list %d but its op->list says %d", op.Addr, q, op.Queue)
			}
			if !op.aggr {
				return fmt.Errorf("optimizer: %#x is queued but is no optimized_kprobe", op.Addr)
			}
			// Between optimizer runs every queued op is hashed: only
			// kprobe_optimizer itself keeps reaped ones on freeing_list.
			if op.owner != kp.Reg {
				return fmt.Errorf("optimizer: %#x is queued (list %d) but not hashed", op.Addr, q)
			}
		}
	}
	for _, p := range kp.Reg.Entries() {
		if p.Queue != QueueNone {
			if _, ok := queued[p]; !ok {
				return fmt.Errorf("optimizer: %#x says it is on list %d but is on none", p.Addr, p.Queue)
			}
		}
		if !p.aggr {
			if len(p.children) != 0 {
				return fmt.Errorf("probe %#x: a plain kprobe with %d children", p.Addr, len(p.children))
			}
			if p.Optimized() || p.Queue != QueueNone || p.optSlot != 0 {
				return fmt.Errorf("probe %#x: a plain kprobe that is optimized, queued or holds an optinsn slot", p.Addr)
			}
		} else {
			if len(p.children) == 0 && !p.Unused() {
				return fmt.Errorf("aggregator %#x: no children but not unused (disabled %v)", p.Addr, p.Disabled())
			}
			// A gone one is the exception, as in 6.1: kill_optimized_kprobe
			// list_del_inits the op before optprobe_queued_unopt looks, so
			// an unused aggregator in a going module stays hashed, unreaped
			// (kernel/kprobes.c:794-806; killOptimizedKprobe).
			if len(p.children) == 0 && p.Queue == QueueNone && !p.Gone() {
				return fmt.Errorf("aggregator %#x: unused and on no optimizer list: nothing will reap it", p.Addr)
			}
			seen := map[*Kprobe]bool{}
			for _, q := range p.children {
				switch {
				case seen[q]:
					return fmt.Errorf("aggregator %#x: child %p listed twice", p.Addr, q)
				case q.parent != p:
					return fmt.Errorf("aggregator %#x: child %p points to parent %p", p.Addr, q, q.parent)
				case q.owner != nil:
					return fmt.Errorf("aggregator %#x: child %p is hashed itself", p.Addr, q)
				case q.aggr:
					return fmt.Errorf("aggregator %#x: a child is an aggregator", p.Addr)
				case q.Addr != p.Addr:
					return fmt.Errorf("aggregator %#x: child at %#x", p.Addr, q.Addr)
				case !p.Gone() && q.ainsn.slot != p.ainsn.slot:
					return fmt.Errorf("aggregator %#x: child slot %#x, aggregator slot %#x (copy_kprobe shares ainsn)", p.Addr, q.ainsn.slot, p.ainsn.slot)
				}
				seen[q] = true
			}
			if p.Optimized() && (!p.OptReady() || p.optSlot == 0) {
				return fmt.Errorf("aggregator %#x: KPROBE_FLAG_OPTIMIZED without a prepared optinsn slot", p.Addr)
			}
			if (p.optSlot != 0) != (p.Opt.Size != 0) {
				return fmt.Errorf("aggregator %#x: optinsn slot %#x with optinsn.size %d", p.Addr, p.optSlot, p.Opt.Size)
			}
			if p.Optimized() && p.HasPostHandler {
				return fmt.Errorf("aggregator %#x: optimized with a post handler", p.Addr)
			}
		}
		switch {
		case p.Ftrace() && p.ainsn.slot != 0:
			return fmt.Errorf("probe %#x: on ftrace but holds insn slot %#x", p.Addr, p.ainsn.slot)
		case !p.Ftrace() && !p.Gone() && p.ainsn.slot == 0:
			return fmt.Errorf("probe %#x: an int3 probe without an insn slot", p.Addr)
		}
	}
	return nil
}

// checkSlots: the caches' bookkeeping and the slots the probes hold.
func (kp *Kprobes) checkSlots() error {
	held := map[uint64]*Kprobe{}
	opt := map[uint64]*Kprobe{}
	for _, p := range kp.Reg.Entries() {
		if s := p.ainsn.slot; s != 0 {
			if q, dup := held[s]; dup {
				return fmt.Errorf("insn slot %#x held by the entries at %#x and %#x", s, q.Addr, p.Addr)
			}
			held[s] = p
		}
		if s := p.optSlot; s != 0 {
			if q, dup := opt[s]; dup {
				return fmt.Errorf("optinsn slot %#x held by the aggregators at %#x and %#x", s, q.Addr, p.Addr)
			}
			opt[s] = p
		}
	}
	if err := kp.insnSlots.check(held); err != nil {
		return err
	}
	return kp.optSlots.check(opt)
}

// check verifies one cache against the slots held.
func (ic *insnCache) check(held map[uint64]*Kprobe) error {
	garbage, used := 0, 0
	bases := map[uint64]bool{}
	for _, pg := range ic.livePages() {
		if bases[pg.base] {
			return fmt.Errorf("%s: two pages at %#x", ic.name, pg.base)
		}
		bases[pg.base] = true
		nused, dirty := 0, 0
		for s, u := range pg.used {
			addr := pg.base + uint64(s*ic.slotSize)
			switch u {
			case slotUsed:
				nused++
				used++
				if held[addr] == nil {
					return fmt.Errorf("%s: slot %#x is SLOT_USED but no registered probe holds it (leaked)", ic.name, addr)
				}
			case slotDirty:
				nused++
				dirty++
				if p := held[addr]; p != nil {
					return fmt.Errorf("%s: slot %#x is SLOT_DIRTY but the probe at %#x still holds it", ic.name, addr, p.Addr)
				}
			}
		}
		if nused != pg.nused || dirty != pg.ngarbage {
			return fmt.Errorf("%s: page %#x counts nused %d / ngarbage %d, its slot_used[] says %d / %d", ic.name, pg.base, pg.nused, pg.ngarbage, nused, dirty)
		}
		garbage += dirty
	}
	if garbage != ic.nrGarbage {
		return fmt.Errorf("%s: nr_garbage %d, the pages hold %d dirty slots", ic.name, ic.nrGarbage, garbage)
	}
	if used != len(held) {
		for addr, p := range held {
			if !ic.holds(addr) {
				return fmt.Errorf("%s: the probe at %#x holds slot %#x, which is not SLOT_USED on any page", ic.name, p.Addr, addr)
			}
		}
		return fmt.Errorf("%s: %d slots in use, %d held by probes", ic.name, used, len(held))
	}
	return nil
}

func (ic *insnCache) holds(addr uint64) bool {
	for _, pg := range ic.livePages() {
		if addr >= pg.base && addr < pg.base+4096 {
			s := int(addr-pg.base) / ic.slotSize
			return s < len(pg.used) && pg.used[s] == slotUsed
		}
	}
	return false
}

// ErrCounterDecreased is wrapped by CheckInvariants when a count went down.
var ErrCounterDecreased = errors.New("a counter decreased")

// checkCounters compares the counts with the previous call's.
func (kp *Kprobes) checkCounters() error {
	if kp.C == nil {
		return nil
	}
	now := kp.C.Snapshot()
	prev := kp.invCounts
	kp.invCounts = now
	for i := range prev {
		if i < len(now) && now[i] < prev[i] {
			return fmt.Errorf("%w: slot %d from %d to %d", ErrCounterDecreased, i, prev[i], now[i])
		}
	}
	for i, v := range now {
		if v >= 1<<62 {
			return fmt.Errorf("%w: slot %d holds %d (a wrapped subtraction)", ErrCounterDecreased, i, v)
		}
	}
	return nil
}

// ForgetCounters drops the counter snapshot CheckInvariants compares with
// (call it after Counters.Reset).
func (kp *Kprobes) ForgetCounters() { kp.invCounts = nil }

// livePages is the cache's c->pages in any order: the one place the
// checks learn how the simulator stores the page list (a faster form of
// the list must answer here too).
func (ic *insnCache) livePages() []*insnPage {
	if ic.fast == nil {
		return ic.pages
	}
	var out []*insnPage
	for _, p := range ic.fast.bySeq[1:] {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
