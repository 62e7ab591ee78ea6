package bug

import "github.com/kpsim/kpsim/sim"

// fastScan answers find_bug's linear walks for an address that is no bug
// address anywhere (every probe address but a refused one), with exactly
// the walks' counts: the whole core table, then every module and every
// module entry. A bug address takes the real walks. Simulator work only;
// TestFastScanCountsMatchWalk proves it.
type fastScan struct {
	all        map[uint64]struct{}
	core       uint64
	modules    uint64
	modEntries uint64
}

// EnableFastScan turns on the fast path. The caller promises the tables
// (and the module list) no longer change.
func (t *Table) EnableFastScan() {
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
	t.fast = f
}

// has reports whether addr is a bug address anywhere.
func (f *fastScan) has(addr uint64) bool {
	_, hit := f.all[addr]
	return hit
}

// miss counts the walks for an address with no bug entry: the core walk
// (unless the index answered it) and module_find_bug's.
func (f *fastScan) miss(c *sim.Counters, addr uint64, core bool) bool {
	if _, hit := f.all[addr]; hit {
		return false
	}
	if core {
		c.Add(OpScanEntry, f.core)
	}
	c.Add(OpModuleVisit, f.modules)
	c.Add(OpScanEntry, f.modEntries)
	return true
}
