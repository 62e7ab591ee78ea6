package sim

import (
	"fmt"
	"time"
)

// Context says on whose account the kernel does an op's work, as perf sees
// it. `perf stat CMD` counts the cycles of CMD's task and its children on
// whatever CPU they run (including the kernel work done in their syscalls);
// it does not count a kworker the task queued work on, an RCU callback run
// later from softirq or an rcuc kthread, or the interrupt handlers an IPI
// runs on other CPUs. `perf stat -a` counts all of them. A wait (a grace
// period, synchronize_rcu_tasks) is neither: it is time the task sleeps,
// reported as time (Op.Waits), not cycles.
type Context uint8

const (
	// Task is the registering task's own work: its syscalls, everything
	// done under kprobe_mutex in its context. The default.
	Task Context = iota
	// Kworker is work run from a workqueue: kprobe_optimizer (a delayed
	// work on system_wq), rht_deferred_worker.
	Kworker
	// RCUCallback is work run after a grace period from call_rcu's
	// callback (softirq, or rcuc/rcuog kthreads with rcu_nocbs).
	RCUCallback
	// OtherCPU is interrupt work on the other online CPUs: the handlers of
	// the IPIs a text_poke_sync or a TLB-flush broadcast sends.
	OtherCPU
	// NumContexts is the number of contexts.
	NumContexts
)

var contextNames = [NumContexts]string{"task", "kworker", "rcu_callback", "other_cpus"}

func (c Context) String() string {
	if c < NumContexts {
		return contextNames[c]
	}
	return fmt.Sprintf("context(%d)", uint8(c))
}

// Contexts lists every context in order.
func Contexts() []Context {
	out := make([]Context, NumContexts)
	for i := range out {
		out[i] = Context(i)
	}
	return out
}

// In declares where op's work runs (the default is Task, or the context of
// the phase it is counted in; see ContextOf). why cites the kernel source
// that puts it there. Call it at package initialisation, beside NewOp.
func (o Op) In(ctx Context, why string) Op {
	mustOpen("op " + o.Name())
	o.d.info.Context, o.d.info.ContextWhy = ctx, why
	return o
}

// In declares where a phase's work runs: every op counted in it is charged
// to ctx unless the op names another non-task context (an IPI handler
// counted while the optimizer runs is still other CPUs' work).
func (p Phase) In(ctx Context, why string) Phase {
	mustOpen("phase " + p.Name())
	p.d.info.Context, p.d.info.ContextWhy = ctx, why
	return p
}

// Range declares the documented range of op's weight: the cheapest and
// dearest values the sources behind its default allow (a measurement's
// spread, the span of documented hardware latencies). The sensitivity
// report moves the weight across it. source says where the bounds come
// from.
func (o Op) Range(lo, hi float64, source string) Op {
	mustOpen("op " + o.Name())
	if lo < 0 || hi < lo {
		panic(fmt.Sprintf("sim: op %s: range [%g, %g] is not 0 <= lo <= hi", o.Name(), lo, hi))
	}
	o.d.info.Lo, o.d.info.Hi, o.d.info.RangeSource = lo, hi, source
	return o
}

// Waits declares that each count of op puts the task to sleep for about d
// (between lo and hi): a grace period, a delayed work's delay. The wait is
// time, not cycles; reports show it apart. source cites where d comes from.
func (o Op) Waits(d, lo, hi time.Duration, source string) Op {
	mustOpen("op " + o.Name())
	if d < lo || hi < d || lo < 0 {
		panic(fmt.Sprintf("sim: op %s: wait %v not within [%v, %v]", o.Name(), d, lo, hi))
	}
	o.d.info.Wait = WaitInfo{Typical: d, Lo: lo, Hi: hi, Source: source}
	return o
}

// WaitInfo is how long one count of an op blocks the task.
type WaitInfo struct {
	Typical, Lo, Hi time.Duration
	Source          string
}

func mustOpen(what string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.frozen {
		panic("sim: " + what + " declared after counters were created")
	}
}

// ContextOf returns where one count of op in phase ph runs: the op's own
// context when it names one other than Task, else the phase's.
func ContextOf(ph Phase, op Op) Context {
	if c := op.d.info.Context; c != Task {
		return c
	}
	return ph.d.info.Context
}

// ContextCycles is an estimate split by context.
type ContextCycles [NumContexts]float64

// Task returns the registering task's share: what `perf stat CMD` counts.
func (c ContextCycles) Task() float64 { return c[Task] }

// System returns every context's cycles: what `perf stat -a` counts of
// this work.
func (c ContextCycles) System() float64 {
	var s fsum
	for _, v := range c {
		s.add(v)
	}
	return s.value()
}

// PhaseContextCycles returns phase ph's estimated cycles split by context
// (each correctly rounded, as PhaseCycles).
func (t *CostTable) PhaseContextCycles(c *Counters, ph Phase) ContextCycles {
	var out ContextCycles
	if c == nil {
		return out
	}
	var s [NumContexts]fsum
	ops, _ := handles()
	i := ph.Index()
	row := c.v[i*c.nops : (i+1)*c.nops]
	for op, n := range row {
		if n != 0 && op < len(t.w) {
			s[ContextOf(ph, Op{ops[op]})].addProduct(n, t.w[op])
		}
	}
	for k := range s {
		out[k] = s[k].value()
	}
	return out
}

// ContextCycles returns every phase's estimate split by context.
func (t *CostTable) ContextCycles(c *Counters) ContextCycles {
	var out ContextCycles
	if c == nil {
		return out
	}
	var s [NumContexts]fsum
	ops, phs := handles()
	for i, n := range c.v {
		if n != 0 {
			op := i % c.nops
			s[ContextOf(Phase{phs[i/c.nops]}, Op{ops[op]})].addProduct(n, t.w[op])
		}
	}
	for k := range s {
		out[k] = s[k].value()
	}
	return out
}

// PhaseWaits returns, per context, the time phase ph's counted ops keep
// it waiting (typical durations).
func PhaseWaits(c *Counters, ph Phase) [NumContexts]time.Duration {
	var out [NumContexts]time.Duration
	if c == nil {
		return out
	}
	ops, _ := handles()
	i := ph.Index()
	for op, n := range c.v[i*c.nops : (i+1)*c.nops] {
		if n != 0 && ops[op].info.Wait.Typical != 0 {
			out[ContextOf(ph, Op{ops[op]})] += time.Duration(n) * ops[op].info.Wait.Typical
		}
	}
	return out
}

// Waits returns, per op that waits and context it was counted in, the
// count and the time it keeps that context waiting (typical, low and
// high), summed over phases, in op then context order. Only a Task wait
// is time the registering task sleeps; a kworker's wait delays the
// worker, not the task.
func Waits(c *Counters) []OpWait {
	if c == nil {
		return nil
	}
	ops, phs := handles()
	type key struct {
		op  int
		ctx Context
	}
	n := map[key]uint64{}
	for i, v := range c.v {
		if v == 0 {
			continue
		}
		op := i % c.nops
		if w := ops[op].info.Wait; w.Typical == 0 && w.Hi == 0 {
			continue
		}
		n[key{op, ContextOf(Phase{phs[i/c.nops]}, Op{ops[op]})}] += v
	}
	var out []OpWait
	for op := range ops {
		for ctx := range NumContexts {
			v := n[key{op, ctx}]
			if v == 0 {
				continue
			}
			w := ops[op].info.Wait
			out = append(out, OpWait{Op: Op{ops[op]}, Context: ctx, N: v,
				Typical: time.Duration(v) * w.Typical, Lo: time.Duration(v) * w.Lo, Hi: time.Duration(v) * w.Hi})
		}
	}
	return out
}

// OpWait is the waiting one op's counts stand for.
type OpWait struct {
	Op              Op
	Context         Context
	N               uint64
	Typical, Lo, Hi time.Duration
}

// OpContextCount is how often one op was counted in one context over a
// run's phases, and the cycles that is under a cost table.
type OpContextCount struct {
	Op      Op
	Context Context
	N       uint64
	Cycles  float64
}

// OpContextCounts returns, for every op counted (metrics excluded), its
// count per context summed over phases and the cycles t charges for it,
// in op then context order.
func (t *CostTable) OpContextCounts(c *Counters) []OpContextCount {
	if c == nil {
		return nil
	}
	ops, phs := handles()
	n := make([]uint64, len(ops)*int(NumContexts))
	for i, v := range c.v {
		if v != 0 {
			op := i % c.nops
			n[op*int(NumContexts)+int(ContextOf(Phase{phs[i/c.nops]}, Op{ops[op]}))] += v
		}
	}
	var out []OpContextCount
	for i, v := range n {
		if v == 0 || ops[i/int(NumContexts)].info.Metric {
			continue
		}
		op := i / int(NumContexts)
		var s fsum
		s.addProduct(v, t.w[op])
		out = append(out, OpContextCount{Op: Op{ops[op]}, Context: Context(i % int(NumContexts)), N: v, Cycles: s.value()})
	}
	return out
}
