package kprobes

// addrTable maps a probe address to its hashed entry: the simulator's own
// index behind fastTable (not a kernel structure; it replaces a Go map,
// whose hashing and growth dominated get_kprobe misses). Open addressing
// with linear probing and backward-shift deletion, so there are no
// tombstones; it doubles at 1/2 load.
type addrTable struct {
	keys  []uint64
	vals  []fastEntry // vals[i].p == nil: slot i is empty
	n     int
	shift uint // 64 - log2(len(keys))
}

func newAddrTable() *addrTable {
	const bits = 10
	return &addrTable{keys: make([]uint64, 1<<bits), vals: make([]fastEntry, 1<<bits), shift: 64 - bits}
}

func (t *addrTable) slot(addr uint64) int { return int(addr * GoldenRatio64 >> t.shift) }

// get returns the entry at addr (ok false if none).
func (t *addrTable) get(addr uint64) (fastEntry, bool) {
	mask := len(t.keys) - 1
	for i := t.slot(addr); ; i = (i + 1) & mask {
		if t.vals[i].p == nil {
			return fastEntry{}, false
		}
		if t.keys[i] == addr {
			return t.vals[i], true
		}
	}
}

// put sets the entry at addr (e.p must not be nil).
func (t *addrTable) put(addr uint64, e fastEntry) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(addr); ; i = (i + 1) & mask {
		if t.vals[i].p == nil {
			t.keys[i], t.vals[i] = addr, e
			t.n++
			return
		}
		if t.keys[i] == addr {
			t.vals[i] = e
			return
		}
	}
}

// del removes addr's entry, if any.
func (t *addrTable) del(addr uint64) {
	mask := len(t.keys) - 1
	i := t.slot(addr)
	for ; ; i = (i + 1) & mask {
		if t.vals[i].p == nil {
			return
		}
		if t.keys[i] == addr {
			break
		}
	}
	// Backward-shift: move later members of the probe run into the hole
	// when their home slot does not lie cyclically in (hole, j].
	for j := (i + 1) & mask; t.vals[j].p != nil; j = (j + 1) & mask {
		home := t.slot(t.keys[j])
		if (j-home)&mask >= (j-i)&mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i], t.vals[i] = 0, fastEntry{}
	t.n--
}

func (t *addrTable) grow() {
	keys, vals := t.keys, t.vals
	t.keys, t.vals = make([]uint64, 2*len(keys)), make([]fastEntry, 2*len(keys))
	t.shift--
	t.n = 0
	for i, e := range vals {
		if e.p != nil {
			t.put(keys[i], e)
		}
	}
}

// each calls f for every entry (in no particular order).
func (t *addrTable) each(f func(fastEntry)) {
	for _, e := range t.vals {
		if e.p != nil {
			f(e)
		}
	}
}
