package kprobes

import (
	"fmt"
	"slices"

	"github.com/kpsim/kpsim/sim"
)

// fastTable is the simulator's accelerated kprobe_table (the default;
// kprobeTable is the walk it stands for, kept for SimOptions.Walk). The
// kernel answers get_kprobe by walking a chain; what it finds, and how
// many nodes it compares, follow from two facts the simulator can keep
// without walking: which entry is hashed at an address (one per address:
// the kernel aggregates instead of hashing a second node), and each
// entry's position from its chain's head. New nodes join at the head
// (hlist_add_head_rcu) and hlist_replace_rcu keeps a node's place, so a
// node's position is the number of live nodes of its bucket that joined
// no earlier than it: seqCount answers that in O(log n). A miss compares
// every node of the chain: its length. So every count is the walk's,
// proved by TestRegistryFastMatchesWalk and the scenario differentials.
type fastTable struct {
	bits   uint
	at     *addrTable // hashed entry by address
	chains []seqCount // per bucket: join order of the chain's nodes
}

type fastEntry struct {
	p   *Kprobe
	seq int // the node's join number in its bucket's chain
}

func newFastTable(bits uint) *fastTable {
	return &fastTable{bits: bits, at: newAddrTable(), chains: make([]seqCount, 1<<bits)}
}

// getKprobe answers get_kprobe as kprobeTable.getKprobe's walk would,
// adding the nodes the walk compares: a hit's chain position, a miss's
// chain length.
func (t *fastTable) getKprobe(addr uint64, c *sim.Counters) *Kprobe {
	ch := &t.chains[HashPtr(addr, t.bits)]
	c.Inc(opHashLookup)
	headCost(t.bits, c)
	if e, ok := t.at.get(addr); ok {
		c.Add(opHashVisit, uint64(ch.position(e.seq)))
		return e.p
	}
	c.Add(opHashVisit, uint64(ch.n))
	return nil
}

func (t *fastTable) find(addr uint64) *Kprobe {
	e, _ := t.at.get(addr)
	return e.p
}

func (t *fastTable) add(p *Kprobe, _ *sim.Faults, c *sim.Counters) error {
	t.at.put(p.Addr, fastEntry{p: p, seq: t.chains[HashPtr(p.Addr, t.bits)].join()})
	c.Inc(opHashAdd)
	headCost(t.bits, c)
	return nil
}

func (t *fastTable) replace(old, ap *Kprobe, c *sim.Counters) error {
	e, _ := t.at.get(old.Addr)
	e.p = ap // same chain position: hlist_replace_rcu
	t.at.put(old.Addr, e)
	c.Inc(opHashReplace)
	return nil
}

// del is O(1) as hlist_del_rcu is through pprev.
func (t *fastTable) del(p *Kprobe, _ *sim.Faults, c *sim.Counters) error {
	e, _ := t.at.get(p.Addr)
	t.chains[HashPtr(p.Addr, t.bits)].leave(e.seq)
	t.at.del(p.Addr)
	c.Inc(opHashDel)
	return nil
}

func (t *fastTable) hashBits() uint     { return t.bits }
func (t *fastTable) chainLen(b int) int { return t.chains[b].n }

func (t *fastTable) chain(b int) []*Kprobe {
	var es []fastEntry
	t.at.each(func(e fastEntry) {
		if int(HashPtr(e.p.Addr, t.bits)) == b {
			es = append(es, e)
		}
	})
	slices.SortFunc(es, func(x, y fastEntry) int { return y.seq - x.seq })
	ps := make([]*Kprobe, len(es))
	for i, e := range es {
		ps[i] = e.p
	}
	return ps
}

func (t *fastTable) entries() []*Kprobe {
	out := make([]*Kprobe, 0, t.at.n+1)
	t.at.each(func(e fastEntry) { out = append(out, e.p) })
	return sortByAddr(out)
}

// check: every entry's chain holds it (its join number is live), and each
// chain's length is the entries hashed there.
func (t *fastTable) check() error {
	perBucket := make([]int, len(t.chains))
	var bad error
	t.at.each(func(e fastEntry) {
		h := HashPtr(e.p.Addr, t.bits)
		perBucket[h]++
		if bad == nil && !t.chains[h].has(e.seq) {
			bad = fmt.Errorf("registry: entry %#x's join number %d is not on bucket %d's chain", e.p.Addr, e.seq, h)
		}
	})
	if bad != nil {
		return bad
	}
	for i, n := range perBucket {
		if t.chains[i].n != n {
			return fmt.Errorf("registry: bucket %d's chain holds %d nodes, %d entries hash there", i, t.chains[i].n, n)
		}
	}
	return nil
}

func (t *fastTable) bytes() []sim.NamedBytes {
	return []sim.NamedBytes{{Name: "kprobe.table.bytes", Bytes: int64(len(t.chains)) * 8}}
}
