package kallsyms

import (
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

// ensureDynamic builds the dynamic32 table on first use in a batch: one
// sequential pass over kallsyms_names (N hops, N u32 stores). After a
// failed allocation (FaultDynamic32Alloc) it keeps reporting false, so the
// lookups walk the markers, until Release.
func (c *Compressed) ensureDynamic(tl *tally) bool {
	if c.dyn != nil {
		return true
	}
	if c.dynFailed {
		return false
	}
	if c.faults.Fail(FaultDynamic32Alloc) {
		c.dynFailed = true
		return false
	}
	dyn, hops, err := ktab.BuildOffsets32(c.t.Names, c.n, 1)
	if err != nil {
		// NewCompressed validated the records; treat as a failed build.
		c.dynFailed = true
		return false
	}
	tl.hop += uint64(hops)
	tl.bytes += uint64(len(c.t.Names)) + 4*uint64(c.n) // the pass + the stores
	c.dyn = dyn
	c.dynBuilds++
	return true
}

// PrepareBatch builds the dynamic32 table now (counted in cn's current
// phase) instead of on the first lookup, and reports whether the table
// exists afterwards. For the other variants it does nothing and reports
// false.
func (c *Compressed) PrepareBatch(cn *sim.Counters) bool {
	if c.v.Index != IndexDynamic32 {
		return false
	}
	var tl tally
	ok := c.ensureDynamic(&tl)
	tl.flush(cn)
	return ok
}

// Release frees the dynamic32 table (and forgets a failed allocation, so
// the next batch tries again). Lookups keep working through the markers
// until the table is rebuilt. No-op for the other variants.
func (c *Compressed) Release() {
	c.dyn = nil
	c.dynFailed = false
}

// DynamicBuilt reports whether the dynamic32 table exists now, and how many
// times it has been built.
func (c *Compressed) DynamicBuilt() (present bool, builds int) { return c.dyn != nil, c.dynBuilds }

// Memory is a variant's memory over the tables every variant shares
// (kallsyms_names, token table and index, kallsyms_offsets,
// kallsyms_seqs_of_names), in bytes.
type Memory struct {
	// Markers is kallsyms_markers as the variant keeps it: 4·ceil(N/256)
	// for baseline, token-cmp and dynamic32 (its fallback), 0 when an
	// offset index replaces it.
	Markers int64
	// Index is the variant's .rodata offset index: 3·N for offset-index,
	// 3·ceil(N/2) for stride2, else 0.
	Index int64
	// Heap is the dynamic32 table while it exists (4·N), else 0.
	Heap int64
	// HeapPeak is what dynamic32 allocates when it builds its table (4·N).
	HeapPeak int64
	// ExtraRodata is .rodata over the baseline: Index + Markers − baseline
	// markers (negative parts are the dropped markers).
	ExtraRodata int64
}

// Memory returns the variant's memory figures for this table.
func (c *Compressed) Memory() Memory {
	base := 4 * int64((c.n+255)/256)
	m := Memory{Markers: base}
	switch c.v.Index {
	case IndexOffsets3:
		m.Markers, m.Index = 0, int64(len(c.idx3))
	case IndexStride2:
		m.Markers, m.Index = 0, int64(len(c.half3))
	case IndexDynamic32:
		m.HeapPeak = 4 * int64(c.n)
		m.Heap = 4 * int64(len(c.dyn))
	}
	m.ExtraRodata = m.Index + m.Markers - base
	return m
}

// RecordMemory stores the memory figures in cn as
// "kallsyms.<variant>.{markers,index,heap_peak,extra_rodata}.bytes".
func (c *Compressed) RecordMemory(cn *sim.Counters) {
	m := c.Memory()
	p := "kallsyms." + c.v.String() + "."
	cn.SetBytes(p+"markers.bytes", m.Markers)
	cn.SetBytes(p+"index.bytes", m.Index)
	cn.SetBytes(p+"heap_peak.bytes", m.HeapPeak)
	cn.SetBytes(p+"extra_rodata.bytes", m.ExtraRodata)
}
