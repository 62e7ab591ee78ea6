package kprobes

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// moduleBlacklist is the module side of the blacklist model
// (kprobes/blacklist.List): remove_module_kprobe_blacklist at GOING.
type moduleBlacklist interface {
	RemoveModule(c *sim.Counters, m *image.Module)
}

// KprobesModuleCallback models kernel/kprobes.c:kprobes_module_callback
// (6.1.192), the module notifier, for MODULE_STATE_GOING (the module's
// core and init text are about to be freed) and MODULE_STATE_LIVE (its
// init text is freed): under kprobe_mutex every kprobe_table bucket is
// walked and each entry inside the module's init text, or with GOING its
// core text, is killed (kill_kprobe); at GOING the module's blacklist
// entries are removed. The caller sets m.State first (the module loader
// does before it calls the notifier chain). Other states do nothing here
// (COMING's add_module_kprobe_blacklist happens at load, with the
// blacklist). It returns how many entries were killed. Counted in
// PhaseUnregister (teardown work): one kprobe.hash.visit per entry walked.
func (kp *Kprobes) KprobesModuleCallback(m *image.Module, state image.ModuleState) int {
	if state != image.ModuleGoing && state != image.ModuleLive {
		return 0
	}
	c := kp.C
	prev := c.Enter(PhaseUnregister)
	defer c.Enter(prev)
	checkcore := state == image.ModuleGoing
	es := kp.Reg.Entries() // the buckets' entries; kill_kprobe never unhashes
	c.Add(opHashVisit, uint64(len(es)))
	killed := 0
	for _, p := range es {
		if m.InitContains(p.Addr) || (checkcore && m.Text != nil && m.Text.Contains(p.Addr)) {
			kp.killKprobe(p)
			killed++
		}
	}
	if state == image.ModuleGoing {
		if bl, ok := kp.Blacklist.(moduleBlacklist); ok {
			bl.RemoveModule(c, m)
		}
	}
	return killed
}

// killKprobe models kernel/kprobes.c:kill_kprobe: a probe on ftrace that
// is armed is disarmed first (ftrace still works at GOING); p and, for an
// aggregator, every child are flagged GONE; an aggregator loses its post
// handler and its optimization (kill_optimized_kprobe); the insn slot is
// freed. The text is not touched: it is about to be freed.
func (kp *Kprobes) killKprobe(p *Kprobe) {
	if p.Gone() {
		return // WARN_ON_ONCE
	}
	if p.Ftrace() && !p.Disabled() && !kp.Reg.AllDisarmed && kp.Ftrace != nil {
		_ = kp.Ftrace.DisarmKprobeFtrace(kp.C, p.Addr, p.HasPostHandler) // its WARN is the only report
	}
	p.Flags |= KprobeFlagGone
	if p.IsAggr() {
		for _, q := range p.children {
			q.Flags |= KprobeFlagGone
		}
		p.HasPostHandler = false
		kp.killOptimizedKprobe(p)
	}
	kp.archRemoveKprobe(p)
}

// killOptimizedKprobe models kernel/kprobes.c:kill_optimized_kprobe: the
// op leaves its optimizer list (list_del_init), loses OPTIMIZED, and its
// detour buffer is freed (arch_remove_optimized_kprobe). 6.1 then moves an
// unused op still queued for unoptimization to freeing_list; after the
// list_del_init above optprobe_queued_unopt never finds it, so that branch
// never fires in 6.1 and the unused op stays hashed: kept as the kernel
// has it.
func (kp *Kprobes) killOptimizedKprobe(op *Kprobe) {
	if op.Queue != QueueNone {
		kp.listDel(op)
	}
	op.Flags &^= KprobeFlagOptimized
	if op.Unused() && kp.optprobeQueuedUnopt(op) {
		kp.listDel(op)
		kp.listAdd(op, QueueFreeing)
	}
	kp.archRemoveOptimizedKprobe(op, true)
}
