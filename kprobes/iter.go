package kprobes

import (
	"github.com/kpsim/kpsim/sim"
)

// RangeIter iterates over the registry entries (plain probes and
// aggregators, never aggregator children) whose address lies in a range, in
// address order (ascending, or descending for the *Desc constructors). It
// models the P5 range iterator.
//
// Use:
//
//	it := r.Range(start, end, c)
//	for it.Next() {
//		p := it.Probe()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
//
// Cost: the first Next does one descent of the tree (one kprobe.tree.search
// and at most the tree height in kprobe.tree.visit, O(log N)); every later
// Next does one in-order step (kprobe.tree.step), including the final one
// that finds the end. A range holding k entries therefore costs one descent
// plus exactly k steps. An empty range (end <= start) costs nothing.
//
// Validity: an iterator is valid only while the registry does not change
// (the kernel holds kprobe_mutex across the walk). If the registry was
// mutated after the iterator was created, Next returns false and Err
// returns ErrStaleCursor; the iterator never returns an entry from the
// changed registry. Without the tree, Next returns false and Err returns
// ErrNoTree. A zero RangeIter is an empty, valid iterator.
//
// Iteration does not allocate.
type RangeIter struct {
	r      *Registry
	c      *sim.Counters
	gen    uint64
	lo, hi uint64 // closed bounds [lo, hi]
	node   Cursor
	cur    *Kprobe
	state  uint8 // iterUnstarted, iterRunning, iterDone
	desc   bool
	err    error
}

const (
	iterUnstarted = iota
	iterRunning
	iterDone
)

func (r *Registry) newRange(lo, hi uint64, empty, desc bool, c *sim.Counters) RangeIter {
	it := RangeIter{r: r, c: c, gen: r.gen, lo: lo, hi: hi, desc: desc}
	switch {
	case !r.HasTree():
		it.err, it.state = ErrNoTree, iterDone
	case empty || lo > hi:
		it.state = iterDone
	}
	return it
}

// Range returns an iterator over the entries with start <= addr < end
// (start included, end excluded), lowest address first. end <= start gives
// an empty range.
func (r *Registry) Range(start, end uint64, c *sim.Counters) RangeIter {
	return r.newRange(start, end-1, end <= start, false, c)
}

// RangeDesc is Range (start <= addr < end) visited highest address first.
func (r *Registry) RangeDesc(start, end uint64, c *sim.Counters) RangeIter {
	return r.newRange(start, end-1, end <= start, true, c)
}

// RangeClosed returns an iterator over the entries with first <= addr <=
// last (both included), lowest address first; for the kernel's inclusive
// [start, end] reservation ranges and ranges reaching the top of the address
// space. last < first gives an empty range.
func (r *Registry) RangeClosed(first, last uint64, c *sim.Counters) RangeIter {
	return r.newRange(first, last, last < first, false, c)
}

// RangeClosedDesc is RangeClosed (first <= addr <= last) visited highest
// address first.
func (r *Registry) RangeClosedDesc(first, last uint64, c *sim.Counters) RangeIter {
	return r.newRange(first, last, last < first, true, c)
}

// OptimizedWindow returns the candidates of get_optimized_kprobe(addr) (P7):
// the entries with addr-18 <= a <= addr-1 (MAX_OPTIMIZED_LENGTH-1 = 18 bytes
// strictly below addr; i == 0 is the breakpoint case and is excluded),
// highest address first, the order in which the kernel's loop meets them.
// The window is clipped at address 0.
func (r *Registry) OptimizedWindow(addr uint64, c *sim.Counters) RangeIter {
	if addr == 0 {
		return r.newRange(0, 0, true, true, c)
	}
	return r.newRange(subClamp(addr, MaxOptimizedLength-1), addr-1, false, true, c)
}

// RecoverWindow returns the candidates of __recover_optprobed_insn(buf,
// addr) (P8, one-off use; a walk should use AddrIter): the entries with
// addr-4 <= a <= addr (JMP32_INSN_SIZE addresses, addr itself included),
// highest address first, the kernel loop's order (i = 0..4).
func (r *Registry) RecoverWindow(addr uint64, c *sim.Counters) RangeIter {
	return r.newRange(subClamp(addr, Jmp32InsnSize-1), addr, false, true, c)
}

// CheckOptimizedRange returns the candidates of arch_check_optimized_kprobe
// for an optprobe at addr covering size bytes (P9): the entries with addr <
// a < addr+size (both ends excluded: addr is the probe itself, addr+size is
// past its region), lowest address first, the kernel loop's order (i =
// 1..size-1). size <= 1 gives an empty range.
func (r *Registry) CheckOptimizedRange(addr uint64, size int, c *sim.Counters) RangeIter {
	if size <= 1 || addr == ^uint64(0) {
		return r.newRange(0, 0, true, false, c)
	}
	last := addr + uint64(size) - 1
	if last < addr { // wrapped
		last = ^uint64(0)
	}
	return r.newRange(addr+1, last, false, false, c)
}

func subClamp(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Next advances to the next entry in the range and reports whether there is
// one.
func (it *RangeIter) Next() bool {
	if it.state == iterDone || it.r == nil {
		it.cur = nil
		return false
	}
	if it.r.gen != it.gen {
		it.err, it.state, it.cur = ErrStaleCursor, iterDone, nil
		it.node.drop()
		return false
	}
	if it.state == iterUnstarted {
		it.state = iterRunning
		if it.desc {
			it.node = it.r.tree.SeekLE(it.hi, it.c)
		} else {
			it.node = it.r.tree.SeekGE(it.lo, it.c)
		}
	} else if it.desc {
		it.node.prev(it.c)
	} else {
		it.node.next(it.c)
	}
	n := &it.node
	if !n.ok() || (it.desc && n.key() < it.lo) || (!it.desc && n.key() > it.hi) {
		it.state, it.cur = iterDone, nil
		it.node.drop()
		return false
	}
	it.cur = n.probe()
	return true
}

// Probe returns the entry Next moved to (nil before the first Next and
// after the end).
func (it *RangeIter) Probe() *Kprobe { return it.cur }

// Err returns ErrStaleCursor if the registry changed under the iterator,
// ErrNoTree if the registry has no tree, else nil.
func (it *RangeIter) Err() error { return it.err }

// AddrIter is the P6 monotonic address cursor: it is fed a non-decreasing
// sequence of query addresses (an instruction walk over a function) and,
// for each, reports the entry exactly at the query address and the entries
// in a look-back window below it, moving forward through the tree instead
// of searching from the root each time.
//
// Contract:
//
//   - Window. Created with look-back b (0..MaxLookBack), a query at q sees
//     the entries with q-b <= a <= q (both ends included; q-b clipped at 0),
//     in ascending address order (Window), and the entry at exactly q (At).
//     b = 4 (Jmp32InsnSize-1) is __recover_optprobed_insn's window [q-4, q];
//     b = 0 answers only "is there a probe here" (can_probe's and
//     copy_optimized_instructions' __recover_probed_insn lookups).
//   - Monotonicity. Queries must satisfy q_i >= q_{i-1}; repeating an address
//     is allowed and gives the same answer. A query below the previous one is
//     a caller bug (a real kernel cursor would silently miss probes): it
//     returns ErrNotMonotonic and the cursor stays dead: every later query
//     returns the same error.
//   - Validity. The cursor is valid only while the registry does not change
//     (the kernel holds kprobe_mutex for the whole walk). Any mutation
//     (Insert, Replace, Delete, aggregator list change, unregistration),
//     including removal of the entry the cursor sits on, is detected on the
//     next query, which returns ErrStaleCursor; the cursor stays dead. It
//     never returns an answer from a changed registry.
//   - Cost. The first query does one descent to the first entry >= q_0-b
//     (kprobe.tree.search plus at most the tree height in kprobe.tree.visit,
//     O(log N)). Every query counts one kprobe.iter.query, and the cursor
//     counts one kprobe.tree.step per entry it moves past: exactly the
//     entries with q_0-b <= a <= q_last, each once. A walk with Q queries
//     passing P entries costs O(log N + Q + P).
//
// A look-back outside 0..MaxLookBack, or a registry without the tree, gives
// a dead cursor whose queries return ErrLookBack or ErrNoTree. Queries do
// not allocate; Window returns a slice into the cursor, valid until the next
// query.
type AddrIter struct {
	r       *Registry
	c       *sim.Counters
	gen     uint64
	back    uint64
	started bool
	last    uint64
	hi      Cursor // first entry not yet taken (address > last), invalid at end
	win     [MaxLookBack + 1]*Kprobe
	wn      int
	at      *Kprobe
	err     error
}

// AddrIter returns a monotonic address cursor with the given look-back (see
// the type's contract). No tree work happens until the first Query.
func (r *Registry) AddrIter(lookBack int, c *sim.Counters) AddrIter {
	it := AddrIter{r: r, c: c, gen: r.gen}
	switch {
	case !r.HasTree():
		it.err = ErrNoTree
	case lookBack < 0 || lookBack > MaxLookBack:
		it.err = ErrLookBack
	default:
		it.back = uint64(lookBack)
	}
	return it
}

// Query moves the cursor to addr and returns the entry exactly at addr (nil
// if none). On error it returns nil and the error; see the contract.
func (it *AddrIter) Query(addr uint64) (*Kprobe, error) {
	if it.err != nil {
		return nil, it.err
	}
	if it.r.gen != it.gen {
		return nil, it.fail(ErrStaleCursor)
	}
	if it.started && addr < it.last {
		return nil, it.fail(ErrNotMonotonic)
	}
	it.c.Inc(opIterQuery)
	lo := subClamp(addr, it.back)
	if !it.started {
		it.started = true
		it.hi = it.r.tree.SeekGE(lo, it.c)
	}
	// Drop window entries that fell below the new window.
	k := 0
	for k < it.wn && it.win[k].Addr < lo {
		k++
	}
	if k > 0 {
		copy(it.win[:], it.win[k:it.wn])
		for i := it.wn - k; i < it.wn; i++ {
			it.win[i] = nil
		}
		it.wn -= k
	}
	// Move past every entry up to addr; keep those inside the window.
	for it.hi.ok() {
		a := it.hi.key()
		if a > addr {
			break
		}
		if a >= lo {
			it.win[it.wn] = it.hi.probe()
			it.wn++
		}
		it.hi.next(it.c)
	}
	it.last = addr
	it.at = nil
	if it.wn > 0 && it.win[it.wn-1].Addr == addr {
		it.at = it.win[it.wn-1]
	}
	return it.at, nil
}

func (it *AddrIter) fail(err error) error {
	it.err = err
	it.hi.drop()
	it.at = nil
	for i := range it.win {
		it.win[i] = nil
	}
	it.wn = 0
	return err
}

// At returns the entry exactly at the last query address (nil if none, or
// after an error).
func (it *AddrIter) At() *Kprobe { return it.at }

// Window returns the entries with last-b <= a <= last, lowest address first
// (the entry at the query address, if any, is last). The slice aliases the
// cursor and is valid until the next Query. Empty after an error.
func (it *AddrIter) Window() []*Kprobe { return it.win[:it.wn] }

// LastQuery returns the last accepted query address (0 before the first).
func (it *AddrIter) LastQuery() uint64 { return it.last }

// Err returns the error that killed the cursor, or nil.
func (it *AddrIter) Err() error { return it.err }
