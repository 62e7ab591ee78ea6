package kprobes

import (
	"fmt"

	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

// rhtTable is kprobe-rhashtable's replacement of kprobe_table: a
// lib/rhashtable.c table keyed by p->addr.
type rhtTable struct{ t *rhashtable.Table[*Kprobe] }

// rhtSeed seeds the rhashtable's hash_rnd stream: fixed, so runs repeat.
const rhtSeed = 0x6b70726f6265 // "kprobe"

func newRhtTable() rhtTable {
	return rhtTable{t: rhashtable.New(rhashtable.KprobeParams, func(p *Kprobe) uint64 { return p.Addr }, nil, rhtSeed, nil)}
}

// getKprobe models get_kprobe as rhashtable_lookup_fast.
func (t rhtTable) getKprobe(addr uint64, c *sim.Counters) *Kprobe {
	p, _ := t.t.Lookup(addr, c)
	return p
}

func (t rhtTable) find(addr uint64) *Kprobe { return t.getKprobe(addr, nil) }

func (t rhtTable) add(p *Kprobe, f *sim.Faults, c *sim.Counters) error {
	t.t.Faults = f
	return t.t.Insert(p, c)
}

func (t rhtTable) replace(old, ap *Kprobe, c *sim.Counters) error {
	return t.t.Replace(old.Addr, ap, c)
}

func (t rhtTable) del(p *Kprobe, f *sim.Faults, c *sim.Counters) error {
	t.t.Faults = f
	return t.t.Remove(p.Addr, c)
}

func (t rhtTable) hashBits() uint      { return 0 }
func (t rhtTable) chainLen(b int) int  { return t.t.ChainLen(b) }
func (t rhtTable) chain(int) []*Kprobe { return nil }
func (t rhtTable) entries() []*Kprobe  { return t.t.Entries() }

func (t rhtTable) check() error {
	if n, m := t.t.Len(), len(t.t.Entries()); n != m {
		return fmt.Errorf("registry: rhashtable nelems %d, %d entries", n, m)
	}
	return nil
}

func (t rhtTable) bytes() []sim.NamedBytes {
	return []sim.NamedBytes{{Name: "kprobe.rhashtable.bytes", Bytes: t.t.Bytes()},
		{Name: "kprobe.rhashtable.peak_bytes", Bytes: t.t.PeakBytes()}}
}
