package kallsyms

import "github.com/kpsim/kpsim/sim"

// Replay is simulator-side memoisation of a whole-file read whose text and
// counts cannot change between calls (a seq_file over tables that stay put):
// the first call runs the model and records its lines and the counts it
// added; later calls hand out the same lines and add the same counts.
// TestReplayCountsMatch proves the counts identical.
type Replay struct {
	key   any
	text  []byte
	ends  []int
	delta []opCount
}

type opCount struct {
	op sim.Op
	n  uint64
}

// Run calls fn(emit) the first time (or when key changed) and records what
// it emits and counts on c (every count must land in c's current phase);
// otherwise it replays. A nil c records nothing: the model always runs.
func (r *Replay) Run(c *sim.Counters, key any, out func(line []byte), fn func(emit func(line []byte))) {
	if r.delta != nil && r.key == key && c != nil {
		start := 0
		if out != nil {
			for _, e := range r.ends {
				out(r.text[start:e])
				start = e
			}
		}
		for _, d := range r.delta {
			c.Add(d.op, d.n)
		}
		return
	}
	if c == nil {
		fn(func(l []byte) {
			if out != nil {
				out(l)
			}
		})
		return
	}
	before := c.Snapshot()
	r.text, r.ends, r.key = r.text[:0], r.ends[:0], key
	fn(func(l []byte) {
		r.text = append(r.text, l...)
		r.ends = append(r.ends, len(r.text))
		if out != nil {
			out(l)
		}
	})
	r.delta = r.delta[:0]
	for op, n := range c.Since(before) {
		r.delta = append(r.delta, opCount{op, n})
	}
	if r.delta == nil {
		r.delta = []opCount{}
	}
}

// Stateless reports whether the resolver's lookups count the same every
// time: false for dynamic32 (its table is built by the first lookup) and
// while Stats are collected.
func (c *Compressed) Stateless() bool { return c.v.Index != IndexDynamic32 && c.Stats == nil }
