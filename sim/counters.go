package sim

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Op identifies a counted kernel operation. Ops are registered with NewOp at
// package initialisation, like kernel tracepoints. An Op is a handle: its
// dense index (Index) is assigned when the registry freezes (the first
// Counters or cost table), in name order, so neither a counter's identity
// nor any order a report derives from it depends on package import order.
type Op struct{ d *opDesc }

// Phase identifies a part of a scenario that a report shows separately (name
// lookup, address safety checks, arming, ...). Like Op, a handle whose index
// is assigned in name order at freeze; the order reports list phases in is
// declared by the reports (scenarios.PhaseOrder), not derived from it.
type Phase struct{ d *phaseDesc }

type opDesc struct {
	info OpInfo
	idx  int
}

type phaseDesc struct {
	info PhaseInfo
	idx  int
}

// OpInfo describes a registered operation.
type OpInfo struct {
	Name string
	// Cycles is the default cost weight of one occurrence.
	Cycles float64
	// Rationale says where Cycles comes from: a Go micro-benchmark of the
	// modelled operation or a cited hardware fact. Never a fitted value.
	Rationale string
	// Doc says which kernel work one count stands for.
	Doc string
	// Metric marks a count that is not an operation (bytes touched, name
	// comparisons already priced through their parts): reported, never
	// priced, and left out of operation totals.
	Metric bool
	// Context is where the op's work runs (Task unless declared with
	// Op.In), and ContextWhy the kernel source that puts it there.
	Context    Context
	ContextWhy string
	// Lo and Hi bound the weight's documented range (Op.Range; both 0
	// when none was declared), RangeSource says where they come from.
	Lo, Hi      float64
	RangeSource string
	// Wait is how long one count blocks the task (Op.Waits), if it does.
	Wait WaitInfo
}

// PhaseInfo describes a registered phase.
type PhaseInfo struct {
	Name string
	Doc  string
	// Context is where the phase's work runs (Phase.In; Task by default).
	Context    Context
	ContextWhy string
}

var registry struct {
	mu     sync.Mutex
	ops    []*opDesc // registration order until freeze, then name order
	opIdx  map[string]*opDesc
	phases []*phaseDesc
	phIdx  map[string]*phaseDesc
	frozen bool
}

// PhaseOther is the phase counts land in when no phase was entered.
var PhaseOther = NewPhase("other", "work outside any named phase")

// NewOp registers a counted operation. It panics on a duplicate or empty name
// or after the registry froze: ops are declared at package initialisation,
// like kernel tracepoints, never at run time.
func NewOp(name string, cycles float64, rationale, doc string) Op {
	if cycles < 0 {
		panic("sim: negative cost for op " + name)
	}
	d := &opDesc{info: OpInfo{Name: name, Cycles: cycles, Rationale: rationale, Doc: doc}, idx: -1}
	enroll("op", name, d, &registry.ops, &registry.opIdx)
	return Op{d}
}

// NewMetric registers a counted metric: like an op, but not an operation
// of its own (e.g. bytes touched), so reports keep it out of op totals and
// it costs nothing.
func NewMetric(name, doc string) Op {
	op := NewOp(name, 0, "metric: not an operation, no cost of its own", doc)
	op.d.info.Metric = true // before any reader: the registry is not frozen yet
	return op
}

// NewPhase registers a phase. Same rules as NewOp.
func NewPhase(name, doc string) Phase {
	d := &phaseDesc{info: PhaseInfo{Name: name, Doc: doc}, idx: -1}
	enroll("phase", name, d, &registry.phases, &registry.phIdx)
	return Phase{d}
}

// enroll adds d to one of the registry's lists under name: the checks
// NewOp and NewPhase share.
func enroll[D any](kind, name string, d *D, list *[]*D, byName *map[string]*D) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	switch {
	case registry.frozen:
		panic("sim: " + kind + " " + name + " registered after counters were created")
	case name == "":
		panic("sim: " + kind + " with empty name")
	}
	if *byName == nil {
		*byName = map[string]*D{}
	}
	if _, dup := (*byName)[name]; dup {
		panic("sim: duplicate " + kind + " " + name)
	}
	*list = append(*list, d)
	(*byName)[name] = d
}

// freeze closes the registry and numbers ops and phases in name order
// (once); it returns their counts.
func freeze() (nops, nphases int) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if !registry.frozen {
		registry.frozen = true
		sort.Slice(registry.ops, func(i, j int) bool { return registry.ops[i].info.Name < registry.ops[j].info.Name })
		for i, d := range registry.ops {
			d.idx = i
		}
		sort.Slice(registry.phases, func(i, j int) bool { return registry.phases[i].info.Name < registry.phases[j].info.Name })
		for i, d := range registry.phases {
			d.idx = i
		}
	}
	return len(registry.ops), len(registry.phases)
}

// Ops returns every registered operation in name order, indexed by
// Op.Index. It freezes the registry.
func Ops() []OpInfo {
	ops, _ := handles()
	out := make([]OpInfo, len(ops))
	for i, d := range ops {
		out[i] = d.info
	}
	return out
}

// Phases returns every registered phase in name order, indexed by
// Phase.Index. It freezes the registry. Reports list phases in their own
// declared order, not this one.
func Phases() []PhaseInfo {
	_, phs := handles()
	out := make([]PhaseInfo, len(phs))
	for i, d := range phs {
		out[i] = d.info
	}
	return out
}

// OpAt returns the op of index i (0 <= i < len(Ops())).
func OpAt(i int) Op { ops, _ := handles(); return Op{ops[i]} }

// PhaseAt returns the phase of index i (0 <= i < len(Phases())).
func PhaseAt(i int) Phase { _, phs := handles(); return Phase{phs[i]} }

// handles returns the frozen registry's ops and phases in index order.
func handles() ([]*opDesc, []*phaseDesc) {
	freeze()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.ops, registry.phases
}

// LookupOp finds an op by name.
func LookupOp(name string) (Op, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	d, ok := registry.opIdx[name]
	return Op{d}, ok
}

// LookupPhase finds a phase by name.
func LookupPhase(name string) (Phase, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	d, ok := registry.phIdx[name]
	return Phase{d}, ok
}

// Name returns the op's registered name.
func (o Op) Name() string { return o.d.info.Name }

// Info returns the op's registration.
func (o Op) Info() OpInfo { return o.d.info }

// Index returns the op's dense index, its position in name order among the
// registered ops. It freezes the registry.
func (o Op) Index() int {
	if o.d.idx < 0 {
		freeze()
	}
	return o.d.idx
}

// Name returns the phase's registered name.
func (p Phase) Name() string { return p.d.info.Name }

// Index returns the phase's dense index (name order). It freezes the
// registry.
func (p Phase) Index() int {
	if p.d.idx < 0 {
		freeze()
	}
	return p.d.idx
}

// Counters accumulates operation counts per phase for one simulated run. It
// is not safe for concurrent use: a run is a sequence of kernel calls made
// under kprobe_mutex, and so is its counting.
//
// A nil *Counters is valid and counts nothing, so simulator-side calls of
// kernel models (a CLI listing, a test oracle) can pass nil.
type Counters struct {
	nops  int
	v     []uint64 // [phase*nops + op]
	base  int      // current phase * nops
	phase Phase

	timing   bool
	wall     []time.Duration
	epoch    time.Time     // monotonic origin of the wall readings
	since    time.Duration // start of the current phase's interval, from epoch
	bytes    map[string]int64
	bytesOrd []string
}

// NewCounters returns an empty counter matrix. With timing set, Enter also
// attributes wall-clock time to phases.
func NewCounters(timing bool) *Counters {
	nops, nph := freeze()
	c := &Counters{nops: nops, v: make([]uint64, nops*nph), timing: timing}
	c.phase, c.base = PhaseOther, PhaseOther.d.idx*nops
	if timing {
		c.wall = make([]time.Duration, nph)
		c.epoch = time.Now()
	}
	return c
}

// Add counts n occurrences of op in the current phase.
func (c *Counters) Add(op Op, n uint64) {
	if c == nil {
		return
	}
	c.v[c.base+op.d.idx] += n
}

// Inc counts one occurrence of op in the current phase.
func (c *Counters) Inc(op Op) {
	if c == nil {
		return
	}
	c.v[c.base+op.d.idx]++
}

// Enter makes ph the current phase and returns the previous one, so a caller
// can restore it: defer c.Enter(c.Enter(ph)) would be wrong (it evaluates
// both at once); write prev := c.Enter(ph); defer c.Enter(prev).
func (c *Counters) Enter(ph Phase) Phase {
	if c == nil {
		return PhaseOther
	}
	prev := c.phase
	if prev == ph {
		return prev
	}
	if c.timing {
		// time.Since reads only the monotonic clock: half of time.Now,
		// and Enter runs at every phase change of every registration.
		now := time.Since(c.epoch)
		c.wall[prev.d.idx] += now - c.since
		c.since = now
	}
	c.phase = ph
	c.base = ph.d.idx * c.nops
	return prev
}

// Current returns the current phase.
func (c *Counters) Current() Phase {
	if c == nil {
		return PhaseOther
	}
	return c.phase
}

// Get returns the count of op in phase ph.
func (c *Counters) Get(ph Phase, op Op) uint64 {
	if c == nil {
		return 0
	}
	return c.v[ph.d.idx*c.nops+op.d.idx]
}

// Total returns the count of op summed over all phases.
func (c *Counters) Total(op Op) uint64 {
	if c == nil {
		return 0
	}
	var t uint64
	for i := op.d.idx; i < len(c.v); i += c.nops {
		t += c.v[i]
	}
	return t
}

// PhaseTotal returns the sum of all op counts in phase ph.
func (c *Counters) PhaseTotal(ph Phase) uint64 {
	if c == nil {
		return 0
	}
	var t uint64
	for _, n := range c.v[ph.d.idx*c.nops : (ph.d.idx+1)*c.nops] {
		t += n
	}
	return t
}

// Sum returns every count added so far.
func (c *Counters) Sum() uint64 {
	if c == nil {
		return 0
	}
	var t uint64
	for _, n := range c.v {
		t += n
	}
	return t
}

// Wall returns the wall time attributed to phase ph (zero without timing).
// The current phase's running interval is included.
func (c *Counters) Wall(ph Phase) time.Duration {
	if c == nil || !c.timing {
		return 0
	}
	d := c.wall[ph.d.idx]
	if ph == c.phase {
		d += time.Since(c.epoch) - c.since
	}
	return d
}

// SetBytes records a memory figure of the modelled kernel (an index's size,
// a table's footprint) under a name such as "jump_label.index.bytes".
func (c *Counters) SetBytes(name string, n int64) {
	if c == nil {
		return
	}
	if c.bytes == nil {
		c.bytes = map[string]int64{}
	}
	if _, ok := c.bytes[name]; !ok {
		c.bytesOrd = append(c.bytesOrd, name)
	}
	c.bytes[name] = n
}

// Bytes returns the recorded memory figures, sorted by name.
func (c *Counters) Bytes() []NamedBytes {
	if c == nil {
		return nil
	}
	out := make([]NamedBytes, 0, len(c.bytes))
	for _, k := range c.bytesOrd {
		out = append(out, NamedBytes{k, c.bytes[k]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NamedBytes is one memory figure.
type NamedBytes struct {
	Name  string
	Bytes int64
}

// Count is one non-zero cell of the matrix.
type Count struct {
	Phase Phase
	Op    Op
	N     uint64
}

// NonZero lists every non-zero (phase, op) count in phase, then op order.
func (c *Counters) NonZero() []Count {
	if c == nil {
		return nil
	}
	ops, phs := handles()
	var out []Count
	for i, n := range c.v {
		if n != 0 {
			out = append(out, Count{Phase{phs[i/c.nops]}, Op{ops[i%c.nops]}, n})
		}
	}
	return out
}

// Snapshot copies the counts so a caller can diff before/after one call.
func (c *Counters) Snapshot() []uint64 {
	if c == nil {
		return nil
	}
	return append([]uint64(nil), c.v...)
}

// Since returns, per op, how much was counted since the snapshot s (all phases).
func (c *Counters) Since(s []uint64) map[Op]uint64 {
	out := map[Op]uint64{}
	if c == nil {
		return out
	}
	ops, _ := handles()
	for i, n := range c.v {
		var before uint64
		if i < len(s) {
			before = s[i]
		}
		if d := n - before; d != 0 {
			out[Op{ops[i%c.nops]}] += d
		}
	}
	return out
}

// Reset zeroes every count and memory figure; the phase goes back to other.
func (c *Counters) Reset() {
	if c == nil {
		return
	}
	clear(c.v)
	c.bytes = nil
	c.bytesOrd = nil
	c.phase, c.base = PhaseOther, PhaseOther.d.idx*c.nops
	if c.timing {
		clear(c.wall)
		c.epoch, c.since = time.Now(), 0
	}
}

// String renders the non-zero counts, for debugging.
func (c *Counters) String() string {
	s := ""
	for _, nz := range c.NonZero() {
		s += fmt.Sprintf("%s/%s=%d\n", nz.Phase.Name(), nz.Op.Name(), nz.N)
	}
	return s
}
