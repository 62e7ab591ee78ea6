package sim

// Adder receives counts: *Counters (nil counts nothing), a Tally, or a
// package's own tally of one call.
type Adder interface {
	Add(op Op, n uint64)
}

// OpCount is N occurrences of Op.
type OpCount struct {
	Op Op
	N  uint64
}

// tallyInline is how many distinct ops a Tally holds without allocating:
// the memoized walks count two to six.
const tallyInline = 6

// Tally is the counts one walk added, as a short list of (op, amount):
// what a Memo stores and replays. The zero value is empty.
type Tally struct {
	n    int
	more []OpCount // before c: a replay reads n, more's length and c's first counts from one or two cache lines
	c    [tallyInline]OpCount
}

// Add counts n occurrences of op.
func (t *Tally) Add(op Op, n uint64) {
	if n == 0 {
		return
	}
	for i := range t.n {
		if t.c[i].Op == op {
			t.c[i].N += n
			return
		}
	}
	if t.n < len(t.c) {
		t.c[t.n] = OpCount{op, n}
		t.n++
		return
	}
	for i := range t.more {
		if t.more[i].Op == op {
			t.more[i].N += n
			return
		}
	}
	t.more = append(t.more, OpCount{op, n})
}

// Inc counts one occurrence of op.
func (t *Tally) Inc(op Op) { t.Add(op, 1) }

// AddToCounters is AddTo for Counters (nil: counted nowhere), without an
// interface call per count: a memo hit's replay.
func (t *Tally) AddToCounters(c *Counters) {
	if c == nil {
		return
	}
	for _, x := range t.c[:t.n] {
		c.Add(x.Op, x.N)
	}
	if len(t.more) != 0 {
		t.addMore(c)
	}
}

func (t *Tally) addMore(c *Counters) {
	for _, x := range t.more {
		c.Add(x.Op, x.N)
	}
}

// AddTo adds every count of t to dst.
func (t *Tally) AddTo(dst Adder) {
	if dst == nil {
		return
	}
	for _, x := range t.c[:t.n] {
		dst.Add(x.Op, x.N)
	}
	for _, x := range t.more {
		dst.Add(x.Op, x.N)
	}
}

// Parts returns t's counts, in the order their ops were first added, as
// two slices (the first few, then the rest) into t's own storage, valid
// until t changes: a replay without copying or a call per count.
func (t *Tally) Parts() (first, rest []OpCount) { return t.c[:t.n], t.more }

// Len is the number of distinct ops t holds.
func (t *Tally) Len() int { return t.n + len(t.more) }

// At returns t's i-th count (0 <= i < Len), in the order ops were first
// added.
func (t *Tally) At(i int) OpCount {
	if i < t.n {
		return t.c[i]
	}
	return t.more[i-t.n]
}

// Counts returns t's counts in the order their ops were first added.
func (t *Tally) Counts() []OpCount {
	return append(append([]OpCount(nil), t.c[:t.n]...), t.more...)
}

// Reset empties t, keeping its storage.
func (t *Tally) Reset() {
	t.n = 0
	t.more = t.more[:0]
}

// Memo remembers the answers of a simulator walk whose answer and counts
// are a pure function of its question and of data that changes only with
// a version number (a record list that module load and init free rebuild;
// an immutable table has one version). A miss runs the walk, which counts
// into a Tally; the memo stores the answer and the Tally and adds the
// Tally to the caller. A hit adds the stored Tally to the caller — the
// same ops and amounts, in the caller's current phase — and returns the
// stored answer (Get hands the stored counts to a caller that keeps a
// tally of its own). Either way the caller sees exactly the walk's counts.
//
// The table is direct-mapped: each key has one entry (its slot), and a
// new answer evicts the old. A span memo (NewSpanMemo) has one entry whose
// answer holds for every key it covers.
//
// The walks memoized run millions of times a run, mostly as hits, so the
// hit path is small enough to inline: Find (Held for a span memo whose
// caller checks coverage itself) in the caller, which calls GetAt only
// on a miss; Do, DoAt and GetAt run it inline and call out on a miss.
//
// A Memo is not safe for concurrent use; it belongs to one simulated
// kernel, like the Counters it adds to.
type Memo[K comparable, V any] struct {
	e      []memoEntry[K, V]
	mask   uint64
	slot   func(K) uint64
	covers func(V, K) bool
}

type memoEntry[K comparable, V any] struct {
	tag uint64 // the version the entry holds an answer at, plus one; 0: none (version 2^64-1 is never held)
	key K
	v   V
	t   Tally
}

// NewMemo returns a memo of size entries (a power of two); slot maps a key
// to its entry (only its low bits are used). An entry answers the key it
// was stored for, at the version it was stored at. slot may be nil when
// every caller names the entry itself (DoAt, GetAt).
func NewMemo[K comparable, V any](size int, slot func(K) uint64) *Memo[K, V] {
	if size <= 0 || size&(size-1) != 0 {
		panic("sim: memo size must be a power of two")
	}
	return &Memo[K, V]{e: make([]memoEntry[K, V], size), mask: uint64(size - 1), slot: slot}
}

// NewSpanMemo returns a one-entry memo for a walk whose answer holds for
// a span of keys (every address between two symbols): the entry answers
// key when covers(answer, key). An answer that does not cover its own key
// is not stored.
func NewSpanMemo[K comparable, V any](covers func(answer V, key K) bool) *Memo[K, V] {
	return &Memo[K, V]{e: make([]memoEntry[K, V], 1), covers: covers}
}

// Do returns walk's answer to key at version ver and adds its counts to
// c (nil: counted nowhere), running walk only when no entry holds the
// answer. walk must count everything it counts into t, must not change
// phase, and must not call the same memo.
func (m *Memo[K, V]) Do(c *Counters, ver uint64, key K, walk func(t *Tally) V) V {
	h := m.hash(key)
	v, t, ok := m.Find(h, ver, key)
	if !ok {
		v, t = m.miss(&m.e[h&m.mask], ver, key, walk)
	}
	t.AddToCounters(c)
	return *v
}

// Get is Do for a caller with a tally of its own: it returns the answer
// and the counts the walk added (read them with Len and At before the
// memo's next call), adding them nowhere.
func (m *Memo[K, V]) Get(ver uint64, key K, walk func(t *Tally) V) (V, *Tally) {
	v, t := m.GetAt(m.hash(key), ver, key, walk)
	return *v, t
}

// DoAt is Do with key's slot given by the caller (h, of which only the low
// bits are used; ignored by a span memo), and the answer returned in
// place: *V is the stored answer, to be read before the memo's next call.
// Its hit path is Find's, inlined: a hit costs this one call. (A caller
// that inlines the hit itself runs Find, then GetAt on a miss.)
func (m *Memo[K, V]) DoAt(c *Counters, h, ver uint64, key K, walk func(t *Tally) V) *V {
	v, t, ok := m.Find(h, ver, key)
	if !ok {
		v, t = m.miss(&m.e[h&m.mask], ver, key, walk)
	}
	t.AddToCounters(c)
	return v
}

// GetAt is Get with key's slot given by the caller, as DoAt.
func (m *Memo[K, V]) GetAt(h, ver uint64, key K, walk func(t *Tally) V) (*V, *Tally) {
	if v, t, ok := m.Find(h, ver, key); ok {
		return v, t
	}
	return m.miss(&m.e[h&m.mask], ver, key, walk)
}

// Find is the hit path alone, for a caller that runs GetAt (and its walk
// closure) only when Find finds nothing: the answer and counts stored for
// key at ver in slot h (as GetAt), or ok false. It inlines. In a span
// memo it finds only the key the answer was stored for (see Held).
func (m *Memo[K, V]) Find(h, ver uint64, key K) (v *V, t *Tally, ok bool) {
	e := &m.e[h&m.mask]
	// An entry holds only an answer that covers its own key, so an
	// equal key is a hit in a span memo too.
	if e.tag == ver+1 && e.key == key {
		return &e.v, &e.t, true
	}
	return nil, nil, false
}

// Held returns the answer and counts slot h holds at version ver,
// whatever key they were stored for (ok false: none). A span memo's
// caller that checks coverage itself, inline, as covers would, answers
// its hits without a call.
func (m *Memo[K, V]) Held(h, ver uint64) (v *V, t *Tally, ok bool) {
	e := &m.e[h&m.mask]
	if e.tag == ver+1 {
		return &e.v, &e.t, true
	}
	return nil, nil, false
}

func (m *Memo[K, V]) hash(key K) uint64 {
	if m.slot == nil {
		return 0
	}
	return m.slot(key)
}

// miss answers key from a span memo's entry e when it covers key, and
// otherwise runs walk and stores its answer and counts in e.
func (m *Memo[K, V]) miss(e *memoEntry[K, V], ver uint64, key K, walk func(t *Tally) V) (*V, *Tally) {
	if m.covers != nil && e.tag == ver+1 && m.covers(e.v, key) {
		return &e.v, &e.t
	}
	e.tag = 0
	e.t.Reset()
	v := walk(&e.t)
	e.key, e.v = key, v
	if m.covers == nil || m.covers(v, key) {
		e.tag = ver + 1
	}
	return &e.v, &e.t
}
