package bug

import (
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// fastScan answers find_bug's linear walks for an address that is no bug
// address anywhere (every probe address but a refused one), with exactly
// the walks' counts: every entry of the table walked. A bug address takes
// the real walks. Simulator work only; TestFastScanCountsMatchWalk proves
// it.
type fastScan struct {
	all    map[uint64]struct{}
	filter []uint64 // one bit per hash of a bug address: a clear bit is a sure miss
}

// EnableFastScan turns on the fast path. The caller promises the tables
// (and the module list) no longer change.
func (t *Table) EnableFastScan() {
	t.scan = &fastScanner{f: sharedFastScan(t.k)}
}

// fastScanner is the tableScanner EnableFastScan chooses: a table walk
// for an address with no bug entry anywhere is counted, not walked. It
// remembers the last address asked (find_bug asks once per table, the
// core and every module, for one address).
type fastScanner struct {
	f       *fastScan
	last    uint64
	lastHas bool
	asked   bool
}

func (s *fastScanner) scanTable(c *sim.Counters, es []image.BugEntry, addr uint64) *image.BugEntry {
	if !s.asked || s.last != addr {
		s.last, s.lastHas, s.asked = addr, s.f.has(addr), true
	}
	if !s.lastHas {
		c.Add(OpScanEntry, uint64(len(es)))
		return nil
	}
	return tableWalk{}.scanTable(c, es, addr)
}

// newFastScan builds the fast scan of k's bug addresses, core and modules.
func newFastScan(k *image.Kernel) *fastScan {
	f := &fastScan{all: map[uint64]struct{}{}}
	for _, b := range k.BugEntries {
		f.all[b.Addr] = struct{}{}
	}
	for _, m := range k.Modules {
		for _, b := range m.BugEntries {
			f.all[b.Addr] = struct{}{}
		}
	}
	// Nearly every question is a miss: a clear bit in a filter that fits
	// the cache answers it without the map (whose probes were most of a
	// registration's bug check).
	f.filter = make([]uint64, 1<<(filterBits-6))
	for a := range f.all {
		h := filterHash(a)
		f.filter[h>>6] |= 1 << (h & 63)
	}
	return f
}

const filterBits = 20 // 2^20 bits, 128 KiB

func filterHash(addr uint64) uint64 { return addr * 0x9E3779B97F4A7C15 >> (64 - filterBits) }

// has reports whether addr is a bug address anywhere.
func (f *fastScan) has(addr uint64) bool {
	if h := filterHash(addr); f.filter[h>>6]&(1<<(h&63)) == 0 {
		return false
	}
	_, hit := f.all[addr]
	return hit
}
