package kprobes

// addrTable maps a probe address to its hashed entry: the simulator's own
// index behind fastTable (not a kernel structure; it replaces a Go map,
// whose hashing and growth dominated get_kprobe misses). Open addressing
// with linear probing over the keys alone (0 marks an empty slot; address
// 0 is kept aside), backward-shift deletion so there are no tombstones,
// doubling at 1/2 load. A miss, the common get_kprobe answer, reads only
// the keys.
type addrTable struct {
	keys  []uint64
	vals  []fastEntry
	n     int
	shift uint // 64 - log2(len(keys))
	zero  fastEntry
}

func newAddrTable() *addrTable {
	const bits = 10
	return &addrTable{keys: make([]uint64, 1<<bits), vals: make([]fastEntry, 1<<bits), shift: 64 - bits}
}

func (t *addrTable) slot(addr uint64) int { return int(addr * GoldenRatio64 >> t.shift) }

// get returns the entry at addr (ok false if none).
func (t *addrTable) get(addr uint64) (fastEntry, bool) {
	if addr == 0 {
		return t.zero, t.zero.p != nil
	}
	mask := len(t.keys) - 1
	for i := t.slot(addr); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case addr:
			return t.vals[i], true
		case 0:
			return fastEntry{}, false
		}
	}
}

// put sets the entry at addr (e.p must not be nil).
func (t *addrTable) put(addr uint64, e fastEntry) {
	if addr == 0 {
		t.zero = e
		return
	}
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(addr); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case addr:
			t.vals[i] = e
			return
		case 0:
			t.keys[i], t.vals[i] = addr, e
			t.n++
			return
		}
	}
}

// del removes addr's entry, if any.
func (t *addrTable) del(addr uint64) {
	if addr == 0 {
		t.zero = fastEntry{}
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(addr)
	for ; t.keys[i] != addr; i = (i + 1) & mask {
		if t.keys[i] == 0 {
			return
		}
	}
	// Backward shift: move later members of the probe run into the hole
	// when their home slot does not lie cyclically in (hole, j].
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		if home := t.slot(t.keys[j]); (j-home)&mask >= (j-i)&mask {
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
	for i, k := range keys {
		if k != 0 {
			t.put(k, vals[i])
		}
	}
}

// each calls f for every entry (in no particular order).
func (t *addrTable) each(f func(fastEntry)) {
	if t.zero.p != nil {
		f(t.zero)
	}
	for i, k := range t.keys {
		if k != 0 {
			f(t.vals[i])
		}
	}
}
