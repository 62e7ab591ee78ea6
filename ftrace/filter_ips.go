package ftrace

import (
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// allOps lists every ftrace_ops the model knows: the two kprobe ops, then
// the dynamic ones (fprobes) in creation order.
func (ft *Ftrace) allOps() []*Ops {
	return append([]*Ops{ft.kprobeOps, ft.ipmodifyOps}, ft.dynOps...)
}

// NewOps returns a fresh ftrace_ops with an empty filter hash, not
// registered: what a struct fprobe embeds (fprobe_init sets
// FTRACE_OPS_FL_SAVE_REGS, which every ops of this model has).
func (ft *Ftrace) NewOps(name string) *Ops {
	o := &Ops{Name: name, ft: ft}
	ft.dynOps = append(ft.dynOps, o)
	return o
}

// ReleaseOps forgets an unregistered ops whose filter was freed (the
// memory holding it is gone). Uncounted.
func (ft *Ftrace) ReleaseOps(o *Ops) {
	if i := slices.Index(ft.dynOps, o); i >= 0 && !o.enabled {
		ft.dynOps = slices.Delete(ft.dynOps, i, i+1)
	}
}

// NumOps returns how many ftrace_ops are registered (FTRACE_OPS_FL_ENABLED).
func (ft *Ftrace) NumOps() int { return ft.opsCount() }

// OpsHashBytes is the memory of o's filter hash.
func (o *Ops) HashBytes() int64 { return o.hash.bytes() }

// SetFilterIPs models kernel/trace/ftrace.c:ftrace_set_filter_ips(ops,
// ips, cnt, remove=0, reset=0) → ftrace_set_addr → ftrace_set_hash:
//
//  1. alloc_and_copy_ftrace_hash(FTRACE_HASH_DEFAULT_BITS, filter) (zero
//     1024 buckets, copy the old entries; -ENOMEM: fault ftrace.hash.alloc);
//  2. ftrace_match_addr: for every ip __ftrace_match_addr —
//     ftrace_location(ip) (0 → -EINVAL, the temporary hash is freed),
//     __ftrace_lookup_ip on the temporary hash (its chains grow by
//     add_hash_entry's hlist_add_head: no resize while filling), then
//     add_hash_entry unless already present;
//  3. ftrace_hash_move_and_update_ops: dup_hash into 2^fls(n/2) buckets,
//     and for a registered ops the disable/enable record passes and one
//     ftrace_replace_code (two passes over every record) for the whole set;
//     the old hash is freed.
//
// IPMODIFY ops are not supported here (the kprobe ops use SetFilterIP).
func (ft *Ftrace) SetFilterIPs(c *sim.Counters, o *Ops, ips []uint64) error {
	if o.IPModify {
		return EINVAL
	}
	h := &o.hash
	oldCount, oldBits := h.count, h.bits
	if err := ft.allocAndCopyHash(c, h); err != nil {
		return err
	}
	// fresh[t]: entries added to the temporary hash's bucket t, newest
	// first (hlist_add_head); they sit in front of the copied ones.
	fresh := map[int][]uint64{}
	var added []uint64
	seen := map[uint64]bool{}
	for _, ip := range ips {
		loc := ft.Location(c, ip)
		if loc == 0 {
			freeHash(c, oldCount+len(added), HashDefaultBits)
			return EINVAL
		}
		t := tBucket(loc)
		c.Inc(OpHashLookup)
		if seen[loc] {
			c.Add(OpHashNode, uint64(slices.Index(fresh[t], loc)+1))
			continue
		}
		if pos, n := h.tmpChain(loc); pos != 0 {
			c.Add(OpHashNode, uint64(len(fresh[t])+pos))
			continue
		} else {
			c.Add(OpHashNode, uint64(len(fresh[t])+n))
		}
		c.Inc(OpHashAdd)
		fresh[t] = append([]uint64{loc}, fresh[t]...)
		seen[loc] = true
		added = append(added, loc)
	}
	newCount := oldCount + len(added)
	if newCount > 0 {
		if ft.f.Fail(FaultHashMove) {
			freeHash(c, newCount, HashDefaultBits) // the temporary hash
			return ENOMEM
		}
		c.Add(OpHashBucketInit, uint64(1)<<dupHashBits(newCount))
		c.Add(OpHashBucket, 1<<HashDefaultBits)
		c.Add(OpHashMove, uint64(newCount))
	}
	// The temporary hash's iteration order (buckets ascending, fresh
	// entries first) is the order dup_hash re-inserts in; add() keeps
	// filterHash's per-bucket lists in that order.
	slices.SortStableFunc(added, func(a, b uint64) int { return tBucket(a) - tBucket(b) })
	ft.hashMoveAndUpdate(c, o, h, added, true, oldCount, oldBits)
	return nil
}

// FreeFilter models kernel/trace/ftrace.c:ftrace_free_filter on an
// unregistered ops: free_ftrace_hash of the filter (and the empty notrace
// hash), leaving EMPTY_HASH.
func (ft *Ftrace) FreeFilter(c *sim.Counters, o *Ops) {
	if o.enabled {
		return
	}
	h := &o.hash
	freeHash(c, h.count, h.bits)
	for _, ip := range h.ips() {
		ft.change(h, ip, false)
	}
}

// RemoveFilterIPs models kernel/trace/ftrace.c:ftrace_set_filter_ips(ops,
// ips, cnt, remove=1, reset=0), which 7.3's fprobe uses to take a detached
// fprobe's addresses off the shared fprobe_ftrace_ops / fprobe_graph_ops
// (fprobe_ftrace_remove_ips, fprobe_graph_remove_ips):
// alloc_and_copy_ftrace_hash, then per ip __ftrace_match_addr's remove
// branch — ftrace_location (0 → -EINVAL), ftrace_lookup_ip (absent →
// -ENOENT; both free the temporary hash), free_hash_entry — then the hash
// move with the enabled ops' disable/enable record passes and one
// ftrace_replace_code for the whole set, and the old hash freed. The
// lookup's chain length is the one of the hash before the batch (earlier
// removals of the same batch are not subtracted).
func (ft *Ftrace) RemoveFilterIPs(c *sim.Counters, o *Ops, ips []uint64) error {
	if o.IPModify {
		return EINVAL
	}
	h := &o.hash
	oldCount, oldBits := h.count, h.bits
	if err := ft.allocAndCopyHash(c, h); err != nil {
		return err
	}
	var gone []uint64
	seen := map[uint64]bool{}
	for _, ip := range ips {
		loc := ft.Location(c, ip)
		if loc == 0 {
			freeHash(c, oldCount-len(gone), HashDefaultBits)
			return EINVAL
		}
		if oldCount-len(gone) == 0 {
			freeHash(c, 0, HashDefaultBits)
			return ENOENT // ftrace_lookup_ip on an empty hash
		}
		c.Inc(OpHashLookup)
		pos, chain := h.tmpChain(loc)
		if pos == 0 || seen[loc] {
			c.Add(OpHashNode, uint64(chain))
			freeHash(c, oldCount-len(gone), HashDefaultBits)
			return ENOENT
		}
		c.Add(OpHashNode, uint64(pos))
		c.Inc(OpHashFree)
		seen[loc] = true
		gone = append(gone, loc)
	}
	newCount := oldCount - len(gone)
	if newCount > 0 {
		if ft.f.Fail(FaultHashMove) {
			freeHash(c, newCount, HashDefaultBits)
			return ENOMEM
		}
		c.Add(OpHashBucketInit, uint64(1)<<dupHashBits(newCount))
		c.Add(OpHashBucket, 1<<HashDefaultBits)
		c.Add(OpHashMove, uint64(newCount))
	}
	ft.hashMoveAndUpdate(c, o, h, gone, false, oldCount, oldBits)
	return nil
}

// hashMoveAndUpdate is the common tail of ftrace_set_filter_ips with and
// without remove: the filter hash takes (add) or drops the changed
// locations; on an enabled ops ftrace_hash_move_and_update_ops walks the
// records with the old hash and the new one (ftrace_hash_rec_disable /
// _enable) and rewrites the call sites whose callback changed; then the
// old hash is freed.
//
// Models kernel/trace/ftrace.c:ftrace_hash_move_and_update_ops.
func (ft *Ftrace) hashMoveAndUpdate(c *sim.Counters, o *Ops, h *filterHash, changed []uint64, add bool, oldCount, oldBits int) {
	var disable walkStats
	oldMatched := 0
	if o.enabled {
		disable = ft.recUpdateWalk(h)
		if oldCount > 0 {
			oldMatched = oldCount - h.w.irregular
		}
	}
	for _, loc := range changed {
		ft.change(h, loc, add)
	}
	if o.enabled {
		countWalk(c, disable)
		c.Add(OpRecMatch, uint64(oldMatched))
		enable := ft.recUpdateWalk(h)
		countWalk(c, enable)
		if h.count > 0 {
			c.Add(OpRecMatch, uint64(h.count-h.w.irregular))
		}
		var dirty []uint64
		for _, loc := range changed {
			if ft.recompute(loc) != nil {
				dirty = append(dirty, loc)
			}
		}
		ft.replaceCode(c, dirty)
	}
	freeHash(c, oldCount, oldBits)
}
