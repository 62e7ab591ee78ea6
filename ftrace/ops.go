package ftrace

import (
	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/mm"
	"github.com/kpsim/kpsim/sim"
)

// Errno is the kernel error code these paths return (package errno).
type Errno = errno.Errno

// The codes the ftrace and kprobes-on-ftrace paths return.
const (
	ENOENT = errno.ENOENT
	ENOMEM = errno.ENOMEM
	EBUSY  = errno.EBUSY
	EINVAL = errno.EINVAL
)

// Ops is one struct ftrace_ops of kernel/kprobes.c: kprobe_ftrace_ops
// (FTRACE_OPS_FL_SAVE_REGS) or kprobe_ipmodify_ops (SAVE_REGS | IPMODIFY),
// with its filter hash and its user count (kprobe_ftrace_enabled /
// kprobe_ipmodify_enabled).
type Ops struct {
	Name     string
	IPModify bool

	ft         *Ftrace
	enabled    bool // FTRACE_OPS_FL_ENABLED
	trampoline bool // x86 arch_ftrace_update_trampoline made one (kept: the ops is not DYNAMIC)
	users      int
	hash       filterHash
	// disarmWarns counts __disarm_kprobe_ftrace's WARN_ONCE: the filter
	// update failed after the user count went down (see DisarmKprobeFtrace).
	disarmWarns int
}

// DisarmWarnings reports how many times __disarm_kprobe_ftrace's
// ftrace_set_filter_ip failed after kprobe_ftrace_enabled was decremented
// (WARN_ONCE "Failed to disarm kprobe-ftrace"): from then on the kernel's
// user count no longer matches the filter, and the model keeps it so.
func (o *Ops) DisarmWarnings() int { return o.disarmWarns }

// Enabled reports FTRACE_OPS_FL_ENABLED (registered with ftrace).
func (o *Ops) Enabled() bool { return o.enabled }

// Users returns kprobe_ftrace_enabled / kprobe_ipmodify_enabled.
func (o *Ops) Users() int { return o.users }

// Filter returns the ips in the ops' filter hash, in address order.
func (o *Ops) Filter() []uint64 { return o.hash.ips() }

// HashBits returns the filter hash's size_bits (0 for EMPTY_HASH).
func (o *Ops) HashBits() int { return o.hash.bits }

// KprobeOps returns kprobe_ipmodify_ops when ipmodify (a probe with a
// post_handler), else kprobe_ftrace_ops.
func (ft *Ftrace) KprobeOps(ipmodify bool) *Ops {
	if ipmodify {
		return ft.ipmodifyOps
	}
	return ft.kprobeOps
}

// SetForeignIPModify marks the record at ip as owned by another IPMODIFY
// ftrace_ops (a livepatch, say): its ref count and FTRACE_FL_IPMODIFY are
// set and its call is live, so arming an ipmodify kprobe there fails with
// -EBUSY. Returns false when ip is not a record. A test device; uncounted.
func (ft *Ftrace) SetForeignIPModify(ip uint64) bool {
	p, ok := ft.posOf(ip)
	if !ok {
		return false
	}
	ft.foreign[ip] = true
	r := ft.rec(int(p))
	r.Flags |= FlIPModify
	ft.recompute(ip)
	r.Flags |= FlEnabled | FlRegsEn
	if r.Flags&FlTramp != 0 {
		r.Flags |= FlTrampEn
	}
	return true
}

// recompute sets the record's ref count and REGS/TRAMP request flags as
// the net effect of __ftrace_hash_rec_update's disable/enable passes
// leaves them: count = enabled ops tracing ip; REGS once any SAVE_REGS ops
// traces it (cleared with the rest when the call is turned off); TRAMP
// when exactly one ops with a trampoline traces it.
func (ft *Ftrace) recompute(ip uint64) *Record {
	p, ok := ft.posOf(ip)
	if !ok {
		return nil
	}
	r := ft.rec(int(p))
	n := 0
	for _, o := range ft.allOps() {
		if o.enabled && o.hash.has(ip) {
			n++
		}
	}
	if ft.foreign[ip] {
		n++
	}
	r.Flags = r.Flags&^RefMax | uint64(n)
	if n > 0 {
		r.Flags |= FlRegs
	}
	if n == 1 {
		r.Flags |= FlTramp
	} else {
		r.Flags &^= FlTramp
	}
	return r
}

// checkRecord models kernel/trace/ftrace.c:ftrace_check_record(rec,
// enable=1, update=1) for the flags the model uses; it reports whether the
// call site must change (MAKE_CALL, MODIFY_CALL or MAKE_NOP).
func checkRecord(r *Record) bool {
	if r.Flags&FlDisabled != 0 && r.Flags&FlEnabled == 0 {
		return false // skip_record
	}
	if r.Count() > 0 {
		regs := (r.Flags&FlRegs != 0) != (r.Flags&FlRegsEn != 0)
		tramp := (r.Flags&FlTramp != 0) != (r.Flags&FlTrampEn != 0)
		if r.Flags&FlEnabled != 0 && !regs && !tramp {
			return false
		}
		r.Flags |= FlEnabled
		r.Flags &^= FlRegsEn | FlTrampEn
		if r.Flags&FlRegs != 0 {
			r.Flags |= FlRegsEn
		}
		if r.Flags&FlTramp != 0 {
			r.Flags |= FlTrampEn
		}
		return true
	}
	if r.Flags&FlEnabled == 0 {
		return false
	}
	r.Flags &= FlDisabled
	return true
}

// replaceCode models arch/x86/kernel/ftrace.c:ftrace_replace_code(enable):
// two for_ftrace_rec_iter passes over every record, ftrace_test_record on
// each (pass 1 verifies the changed sites, pass 2 queues their text_poke),
// then text_poke_finish, with a text_poke_bp_batch every TextPokeArrayMax
// queued sites. Only the records in dirty can have changed state
// since the last pass, so only they are re-checked by the simulator.
func (ft *Ftrace) replaceCode(c *sim.Counters, dirty []uint64) {
	c.Add(OpReplaceCheck, uint64(2*len(ft.flat)))
	sites := 0
	for _, ip := range dirty {
		if p, ok := ft.posOf(ip); ok && checkRecord(ft.rec(int(p))) {
			sites++
			textPokeLocInit(c) // pass 2's text_poke_queue of the site
		}
	}
	c.Add(OpReplaceSite, uint64(sites))
	// text_poke_queue flushes the vector when it is full (text_poke_flush:
	// tp_vec_nr == TP_VEC_MAX), text_poke_finish the rest: one
	// text_poke_bp_batch per TextPokeArrayMax sites (the records are in
	// address order, so tp_order_fail never flushes early).
	if batches := (sites + TextPokeArrayMax - 1) / TextPokeArrayMax; batches > 0 {
		c.Add(OpTextPokeBatch, uint64(batches))
		alternative.SyncCPUs(c, pokeBatchSyncs*batches, ft.CPUs)
	}
}

func countWalk(c *sim.Counters, s walkStats) {
	c.Add(OpRecVisit, uint64(s.visits))
	c.Add(OpHashLookup, uint64(s.lookups))
	c.Add(OpHashNode, uint64(s.nodes))
}

// freeHash counts free_ftrace_hash of a hash with count entries and 2^bits
// buckets (ftrace_hash_clear iterates the buckets only when count != 0).
func freeHash(c *sim.Counters, count, bits int) {
	if count == 0 {
		return
	}
	c.Add(OpHashBucket, uint64(1)<<bits)
	c.Add(OpHashFree, uint64(count))
}

// ipmodConflict models the conflict test of
// kernel/trace/ftrace.c:__ftrace_hash_update_ipmodify for an IPMODIFY ops:
// the walk position of the first record entering the filter that already
// has FTRACE_FL_IPMODIFY (another IPMODIFY ops owns it), or -1.
func (ft *Ftrace) ipmodConflict(entering []uint64) int {
	conflict := -1
	for _, ip := range entering {
		if p, ok := ft.posOf(ip); ok {
			r := ft.rec(int(p))
			if r.Flags&FlDisabled == 0 && r.Flags&FlIPModify != 0 && (conflict < 0 || int(p) < conflict) {
				conflict = int(p)
			}
		}
	}
	return conflict
}

// ipmodSide is what one side (old or new hash) of
// __ftrace_hash_update_ipmodify's walk looks up: every non-disabled record
// once, or — on a conflict at position conflict — the records up to and
// including it and, in the rollback walk, those before it. An empty side
// (EMPTY_HASH) costs nothing: ftrace_lookup_ip returns before hashing.
func (ft *Ftrace) ipmodSide(h *filterHash, conflict int) walkStats {
	if h == nil || h.count == 0 {
		return walkStats{}
	}
	if conflict < 0 {
		return ft.fullWalk(h)
	}
	a, b := ft.bruteWalk(h, conflict+1), ft.bruteWalk(h, conflict)
	return walkStats{lookups: a.lookups + b.lookups, nodes: a.nodes + b.nodes}
}

// countIPMod counts one __ftrace_hash_update_ipmodify walk with its two
// sides' lookups.
func (ft *Ftrace) countIPMod(c *sim.Counters, conflict int, old, new walkStats) {
	if conflict < 0 {
		c.Add(OpRecVisit, uint64(len(ft.flat)))
	} else {
		c.Add(OpRecVisit, uint64(2*(conflict+1)))
	}
	c.Add(OpHashLookup, uint64(old.lookups+new.lookups))
	c.Add(OpHashNode, uint64(old.nodes+new.nodes))
}

// ipmodApply sets / clears FTRACE_FL_IPMODIFY as a successful walk does.
func (ft *Ftrace) ipmodApply(entering, leaving []uint64) {
	for _, ip := range entering {
		if p, ok := ft.posOf(ip); ok && ft.rec(int(p)).Flags&FlDisabled == 0 {
			ft.rec(int(p)).Flags |= FlIPModify
		}
	}
	for _, ip := range leaving {
		if p, ok := ft.posOf(ip); ok && ft.rec(int(p)).Flags&FlDisabled == 0 {
			ft.rec(int(p)).Flags &^= FlIPModify
		}
	}
}

// SetFilterIP models kernel/trace/ftrace.c:ftrace_set_filter_ip(ops, ip,
// remove, reset=0) → ftrace_set_hash:
//
//  1. alloc_and_copy_ftrace_hash(FTRACE_HASH_DEFAULT_BITS, filter): zero
//     1024 buckets, iterate the old hash's buckets, copy every entry
//     (-ENOMEM: fault point ftrace.hash.alloc);
//  2. __ftrace_match_addr: ip = ftrace_location(ip) (0 → -EINVAL); remove:
//     look it up (absent → -ENOENT) and free it; add: look it up, add if
//     absent;
//  3. ftrace_hash_move_and_update_ops → ftrace_hash_move: dup_hash into
//     2^fls(n/2) buckets (EMPTY_HASH when n = 0); for an enabled IPMODIFY
//     ops __ftrace_hash_update_ipmodify over every record (-EBUSY,
//     -EINVAL); for an enabled ops __ftrace_hash_rec_update's disable pass
//     on the old hash and enable pass on the new one (each stops once all
//     of its hash's entries were matched); then ftrace_ops_update_code →
//     ftrace_replace_code over every record twice; the old hash is freed
//     through RCU;
//  4. the temporary hash (empty after the move) is freed.
func (ft *Ftrace) SetFilterIP(c *sim.Counters, o *Ops, ip uint64, remove bool) error {
	h := &o.hash
	oldCount, oldBits := h.count, h.bits
	if err := ft.allocAndCopyHash(c, h); err != nil {
		return err
	}
	// The temporary hash holds a copy of every entry until the move.
	failTmp := func(n int) { freeHash(c, n, HashDefaultBits) }

	loc := ft.Location(c, ip)
	if loc == 0 {
		failTmp(oldCount)
		return EINVAL
	}
	pos, chain := h.tmpChain(loc)
	if remove {
		if oldCount == 0 { // ftrace_lookup_ip on an empty hash
			return ENOENT
		}
		c.Inc(OpHashLookup)
		if pos == 0 {
			c.Add(OpHashNode, uint64(chain))
			failTmp(oldCount)
			return ENOENT
		}
		c.Add(OpHashNode, uint64(pos))
		c.Inc(OpHashFree)
	} else {
		c.Inc(OpHashLookup)
		if pos != 0 {
			c.Add(OpHashNode, uint64(pos)) // already there: nothing to add
		} else {
			c.Add(OpHashNode, uint64(chain))
			c.Inc(OpHashAdd)
		}
	}
	changed := (pos == 0) != remove // the set differs from the old one
	newCount := oldCount
	if changed {
		if remove {
			newCount--
		} else {
			newCount++
		}
	}
	// __ftrace_hash_move → dup_hash (nothing for an empty source).
	if newCount > 0 {
		if ft.f.Fail(FaultHashMove) {
			// ftrace_hash_move: -ENOMEM; ftrace_set_hash frees the
			// temporary hash; nothing installed.
			freeHash(c, newCount, HashDefaultBits)
			return ENOMEM
		}
		c.Add(OpHashBucketInit, uint64(1)<<dupHashBits(newCount))
		c.Add(OpHashBucket, 1<<HashDefaultBits)
		c.Add(OpHashMove, uint64(newCount))
	}

	// The old hash's walks are costed before the simulator applies the
	// change (the kernel still has it installed at that point).
	var disable, oldIPMod walkStats
	oldMatched := 0
	conflict := -1
	var entering, leaving []uint64
	if changed && !remove {
		entering = []uint64{loc}
	} else if changed {
		leaving = []uint64{loc}
	}
	if o.enabled {
		disable = ft.recUpdateWalk(h)
		if oldCount > 0 {
			oldMatched = oldCount - h.w.irregular
		}
		if o.IPModify {
			if oldCount == 0 || newCount == 0 {
				// ftrace_hash_ipmodify_update: an empty side is NULL.
				freeHash(c, newCount, dupHashBits(newCount))
				return EINVAL
			}
			conflict = ft.ipmodConflict(entering)
			oldIPMod = ft.ipmodSide(h, conflict)
		}
	}
	if changed {
		ft.change(h, loc, !remove)
	}
	if o.enabled && o.IPModify {
		ft.countIPMod(c, conflict, oldIPMod, ft.ipmodSide(h, conflict))
		if conflict >= 0 {
			if changed {
				ft.change(h, loc, remove) // the kernel never installs the new hash
			}
			freeHash(c, newCount, dupHashBits(newCount))
			return EBUSY
		}
		ft.ipmodApply(entering, leaving)
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
		if changed {
			ft.recompute(loc)
			dirty = []uint64{loc}
		}
		ft.replaceCode(c, dirty) // ftrace_ops_update_code → ftrace_run_modify_code
	}
	freeHash(c, oldCount, oldBits) // free_ftrace_hash_rcu(old_hash)
	return nil
}

// opsCount is how many ftrace_ops are registered (the trace function is
// ftrace_stub for 0, the ops' own for 1, ftrace_ops_list_func for more).
func (ft *Ftrace) opsCount() int {
	n := 0
	for _, o := range ft.allOps() {
		if o.enabled {
			n++
		}
	}
	if len(ft.foreign) > 0 {
		n++
	}
	return n
}

func traceFunc(n int) int { return min(n, 2) }

// RegisterFunction models kernel/trace/ftrace.c:register_ftrace_function →
// ftrace_startup(ops, 0): prepare_direct_functions_for_ipmodify (walks the
// filter hash), __register_ftrace_function (ops list, trampoline,
// update_ftrace_function), ftrace_hash_ipmodify_enable (IPMODIFY: every
// record; -EINVAL for an empty filter, -EBUSY on a conflict, both rolled
// back), ftrace_hash_rec_enable (early-stopping walk), then
// ftrace_startup_enable → ftrace_replace_code when calls or the trace
// function change.
func (ft *Ftrace) RegisterFunction(c *sim.Counters, o *Ops) error {
	h := &o.hash
	if o.enabled {
		return EBUSY // __register_ftrace_function: WARN_ON(ENABLED)
	}
	if o.IPModify && h.count > 0 {
		c.Add(OpHashBucket, uint64(1)<<h.bits)
		c.Add(OpHashNode, uint64(h.count))
	}
	before := traceFunc(ft.opsCount())
	c.Inc(OpOpsRegister)
	mm.SetMemoryCalls(c, 2, ft.CPUs) // the trampoline's set_memory_ro, set_memory_x
	o.enabled, o.trampoline = true, true
	if o.IPModify {
		// ftrace_hash_ipmodify_enable: old EMPTY_HASH, new the filter
		// (NULL when empty → -EINVAL before any walk).
		var err error
		if h.count == 0 {
			err = EINVAL
		} else {
			entering := h.ips()
			conflict := ft.ipmodConflict(entering)
			ft.countIPMod(c, conflict, walkStats{}, ft.ipmodSide(h, conflict))
			if conflict >= 0 {
				err = EBUSY
			} else {
				ft.ipmodApply(entering, nil)
			}
		}
		if err != nil {
			o.enabled = false
			c.Inc(OpOpsUnregister) // rollback: __unregister_ftrace_function
			alternative.SyncCPUs(c, opsUnregisterSyncs, ft.CPUs)
			return err
		}
	}
	s := ft.recUpdateWalk(h)
	countWalk(c, s)
	if h.count > 0 {
		c.Add(OpRecMatch, uint64(h.count-h.w.irregular))
	}
	ft.finishUpdate(c, h, before)
	return nil
}

// finishUpdate recomputes the records of h's ips (the simulator's record
// flags) and counts ftrace_startup/ftrace_shutdown's tail: the trace
// function update when the ops count crossed 1, and ftrace_replace_code
// over the records that changed.
func (ft *Ftrace) finishUpdate(c *sim.Counters, h *filterHash, before int) {
	var dirty []uint64
	update := false
	for ip := range h.member {
		if r := ft.recompute(ip); r != nil {
			dirty = append(dirty, ip)
			update = true
		}
	}
	funcChanged := traceFunc(ft.opsCount()) != before
	if funcChanged {
		c.Inc(OpUpdateTraceFunc)
		alternative.SyncCPUs(c, updateTraceFuncSyncs, ft.CPUs)
	}
	if update || funcChanged {
		if update {
			ft.replaceCode(c, dirty)
		}
	}
}

// UnregisterFunction models kernel/trace/ftrace.c:unregister_ftrace_function
// → ftrace_shutdown(ops, 0): __unregister_ftrace_function (-EBUSY when not
// registered), ftrace_hash_ipmodify_disable (IPMODIFY: every record),
// ftrace_hash_rec_disable (early-stopping walk), ftrace_replace_code, the
// all-records sanity walk when no ftrace_ops is left, then
// cleanup_direct_functions_after_ipmodify (walks the filter hash).
func (ft *Ftrace) UnregisterFunction(c *sim.Counters, o *Ops) error {
	h := &o.hash
	if !o.enabled {
		return EBUSY
	}
	before := traceFunc(ft.opsCount())
	c.Inc(OpOpsUnregister)
	alternative.SyncCPUs(c, opsUnregisterSyncs, ft.CPUs)
	if o.IPModify && h.count > 0 {
		// ftrace_hash_ipmodify_disable: old the filter, new EMPTY_HASH
		// (an empty filter is NULL: -EINVAL, ignored, no walk).
		ft.countIPMod(c, -1, ft.ipmodSide(h, -1), walkStats{})
		ft.ipmodApply(nil, h.ips())
	}
	s := ft.recUpdateWalk(h)
	countWalk(c, s)
	if h.count > 0 {
		c.Add(OpRecMatch, uint64(h.count-h.w.irregular))
	}
	o.enabled = false
	ft.finishUpdate(c, h, before)
	if ft.opsCount() == 0 {
		c.Add(OpRecVisit, uint64(len(ft.flat)))
	}
	if o.IPModify {
		c.Add(OpHashBucket, uint64(1)<<h.bits)
		c.Add(OpHashNode, uint64(h.count))
	}
	return nil
}

// ArmKprobeFtrace models kernel/kprobes.c:arm_kprobe_ftrace →
// __arm_kprobe_ftrace(p, ops, cnt) with ops = kprobe_ipmodify_ops when the
// probe has a post_handler (ipmodify), else kprobe_ftrace_ops:
// ftrace_set_filter_ip(ops, ip, 0, 0) (its error is returned), then for
// the ops' first user register_ftrace_function (on failure the ip is
// removed again with ftrace_set_filter_ip(ops, ip, 1, 0) and the error
// returned), then the user count goes up.
func (ft *Ftrace) ArmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error {
	o := ft.KprobeOps(ipmodify)
	if err := ft.SetFilterIP(c, o, ip, false); err != nil {
		return err
	}
	if o.users == 0 {
		if err := ft.RegisterFunction(c, o); err != nil {
			_ = ft.SetFilterIP(c, o, ip, true)
			return err
		}
	}
	o.users++
	return nil
}

// DisarmKprobeFtrace models kernel/kprobes.c:disarm_kprobe_ftrace →
// __disarm_kprobe_ftrace(p, ops, cnt): for the last user
// unregister_ftrace_function first (its error is returned, the count kept),
// then the count goes down and ftrace_set_filter_ip(ops, ip, 1, 0) removes
// the ip (its error — -ENOENT for an ip not in the filter, -EINVAL for
// one that is no ftrace location — is returned after a WARN).
func (ft *Ftrace) DisarmKprobeFtrace(c *sim.Counters, ip uint64, ipmodify bool) error {
	o := ft.KprobeOps(ipmodify)
	if o.users == 1 {
		if err := ft.UnregisterFunction(c, o); err != nil {
			return err
		}
	}
	o.users--
	err := ft.SetFilterIP(c, o, ip, true)
	if err != nil {
		// WARN_ONCE, and no undo: the count stays decremented, the ip
		// stays in the filter (kernel/kprobes.c:__disarm_kprobe_ftrace).
		o.disarmWarns++
	}
	return err
}

// allocAndCopyHash models kernel/trace/ftrace.c:alloc_and_copy_ftrace_hash
// as ftrace_set_hash calls it on the ops' filter hash: the allocation
// (FaultHashAlloc: -ENOMEM), FTRACE_HASH_DEFAULT_BITS bucket heads
// initialised, and, for a non-empty hash, a walk of its buckets copying
// every entry.
func (ft *Ftrace) allocAndCopyHash(c *sim.Counters, h *filterHash) error {
	if ft.f.Fail(FaultHashAlloc) {
		return ENOMEM
	}
	c.Add(OpHashBucketInit, 1<<HashDefaultBits)
	if h.count > 0 {
		c.Add(OpHashBucket, uint64(1)<<h.bits)
		c.Add(OpHashCopy, uint64(h.count))
	}
	return nil
}
