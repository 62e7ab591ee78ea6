package bug

import "github.com/kpsim/kpsim/sim"

// fastScan answers find_bug's linear walks for an address that is no bug
// address anywhere (every probe address but a refused one), with exactly
// the walks' counts: the whole core table, then every module and every
// module entry. A bug address takes the real walks. Simulator work only;
// TestFastScanCountsMatchWalk proves it.
type fastScan struct {
	all    map[uint64]struct{}
	filter []uint64 // one bit per hash of a bug address: a clear bit is a sure miss

	core       uint64
	modules    uint64
	modEntries uint64
}

// EnableFastScan turns on the fast path. The caller promises the tables
// (and the module list) no longer change.
func (t *Table) EnableFastScan() {
	if f := sharedFastScan(t.k); f != nil {
		t.fast = f
		return
	}
	f := &fastScan{all: map[uint64]struct{}{}, core: uint64(len(t.k.BugEntries)), modules: uint64(len(t.k.Modules))}
	for _, b := range t.k.BugEntries {
		f.all[b.Addr] = struct{}{}
	}
	for _, m := range t.k.Modules {
		f.modEntries += uint64(len(m.BugEntries))
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
	t.fast = f
	shareFastScan(t.k, f)
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

// miss counts the walks for an address with no bug entry: the core walk
// (unless the index answered it) and module_find_bug's.
func (f *fastScan) miss(c *sim.Counters, addr uint64, core bool) bool {
	if f.has(addr) {
		return false
	}
	if core {
		c.Add(OpScanEntry, f.core)
	}
	c.Add(OpModuleVisit, f.modules)
	c.Add(OpScanEntry, f.modEntries)
	return true
}
