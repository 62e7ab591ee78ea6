package staticcall

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// FaultIndexAlloc makes the late-init allocation of the P1 index fail; the
// check then keeps using the linear scan.
var FaultIndexAlloc = sim.NewFaultPoint("static_call.index.alloc",
	"late-init allocation of the static-call address index (P1) fails: static_call_text_reserved stays linear")

// CallInsnSize is CALL_INSN_SIZE: every static-call site is a 5-byte call
// or (tail) jmp, so no decoding is needed to size it.
const CallInsnSize = x86.CALLInsnSize

// StaticCallSiteBytes is sizeof(struct static_call_site): s32 addr, s32 key.
const StaticCallSiteBytes = 8

// Index entry layouts (bytes per indexed site); counts are the same.
const (
	IndexPointer = 8 // struct static_call_site * array (the default)
	IndexOffset  = 4 // u32 positions in .static_call_sites
)

// Errors a caller can test with errors.Is.
var (
	ErrNotLateInit = errors.New("static_call: index asked for before late init (static_call_text_reserved is linear until then)")
	ErrIndexOff    = errors.New("static_call: no index: the static-call-index switch (P1) is off")
	ErrIndexAlloc  = errors.New("static_call: no index: its late-init allocation failed (fault static_call.index.alloc)")
	ErrBadTable    = errors.New("static_call: malformed static-call site table")
)

// TextReserver is the one interface through which the registration
// pipeline asks whether [start, end] (inclusive) overlaps a static-call
// site, whatever form is active. The static-call check never fails; the
// error is there so every reservation check has the same shape.
type TextReserver interface {
	TextReserved(c *sim.Counters, start, end uint64) (bool, error)
}

var _ TextReserver = (*Table)(nil)

type site struct {
	addr uint64
	key  uint64
	init bool
}

// Table models the static-call site tables read by
// static_call_text_reserved, plus (with P1) the late-init address index.
// Not safe for concurrent use (the kernel holds jump_label_mutex, and
// text_mutex around static-call updates).
type Table struct {
	k     *image.Kernel
	sw    sim.Switches
	f     *sim.Faults
	state func() boot.State

	core       []site
	entryBytes int
	lateInit   bool
	idx        *Index
	idxErr     error
	fast       *fastScan // simulator fast path (EnableFastScan); nil: walk
}

// New returns the static-call model of image k under switches sw. Faults f
// (nil: none) may make the late-init index allocation fail. state reads the
// pipeline's current system_state; nil means SYSTEM_RUNNING throughout.
func New(k *image.Kernel, sw sim.Switches, f *sim.Faults, state func() boot.State) (*Table, error) {
	if k == nil {
		return nil, errors.New("static_call: nil kernel image")
	}
	if state == nil {
		state = func() boot.State { return boot.Running }
	}
	t := &Table{k: k, sw: sw, f: f, state: state, entryBytes: IndexPointer}
	t.core = makeSites(k.StaticCallSites)
	return t, nil
}

func makeSites(ss []image.StaticCallSite) []site {
	out := make([]site, len(ss))
	for i, s := range ss {
		out[i] = site{addr: s.Addr, key: s.Key, init: s.Init}
	}
	return out
}

// SetIndexEntryBytes chooses the index layout charged by LateInit:
// IndexPointer (8, default) or IndexOffset (4). Call it before LateInit.
func (t *Table) SetIndexEntryBytes(n int) error {
	if n != IndexPointer && n != IndexOffset {
		return fmt.Errorf("static_call: index entry size %d: want %d (pointer) or %d (u32 offset)", n, IndexPointer, IndexOffset)
	}
	if t.lateInit {
		return errors.New("static_call: index layout must be chosen before late init")
	}
	t.entryBytes = n
	return nil
}

// TextReserved reports whether [start, end] (inclusive) overlaps a live
// static-call site: the core sites (linear, or the P1 index once built),
// then the one module whose text holds start. The error is always nil.
//
// Models kernel/static_call_inline.c:static_call_text_reserved.
func (t *Table) TextReserved(c *sim.Counters, start, end uint64) (bool, error) {
	init := t.state().InitSitesCount()
	var ret bool
	if t.idx != nil {
		ret = t.staticCallTextReservedIndexed(c, start, end, init)
	} else if t.fast == nil || !t.fast.scan(c, len(t.core), start, end, init) {
		ret = staticCallTextReservedRange(c, t.core, start, end, init)
	}
	if ret {
		return true, nil
	}
	return t.staticCallModTextReserved(c, start, end), nil
}

// staticCallTextReservedRange is the linear walk over one site table in
// its run-time order; every site visited is one OpScanSite.
//
// Models kernel/static_call_inline.c:__static_call_text_reserved.
func staticCallTextReservedRange(c *sim.Counters, sites []site, start, end uint64, init bool) bool {
	for i := range sites {
		c.Inc(OpScanSite)
		if (init || !sites[i].init) && addrConflict(sites[i].addr, start, end) {
			return true
		}
	}
	return false
}

// addrConflict: addr <= end && addr + CALL_INSN_SIZE > start.
//
// Models kernel/static_call_inline.c:addr_conflict.
func addrConflict(addr, start, end uint64) bool {
	return addr <= end && addr+CallInsnSize > start
}

// staticCallModTextReserved scans the one module whose text holds start,
// with init = (module COMING); a GOING module fails try_module_get and is
// not scanned, an UNFORMED one is not found.
//
// Models kernel/static_call_inline.c:__static_call_mod_text_reserved.
func (t *Table) staticCallModTextReserved(c *sim.Counters, start, end uint64) bool {
	c.Inc(OpModuleLookup)
	mod := t.k.ModuleTextAddress(start)
	// WARN_ON_ONCE(__module_text_address(end) != mod) evaluates its
	// condition on every call: a second lookup, whose answer changes
	// nothing returned.
	c.Inc(OpModuleLookup)
	if mod == nil {
		return false
	}
	c.Inc(OpModuleGet)
	if mod.State == image.ModuleGoing { // !try_module_get(mod)
		return false
	}
	init := mod.State == image.ModuleComing
	for i := range mod.StaticCallSites {
		s := &mod.StaticCallSites[i]
		c.Inc(OpScanSite)
		if (init || !s.Init) && addrConflict(s.Addr, start, end) {
			return true
		}
	}
	return false
}

// Index is the P1 address index: the core static-call sites sorted by
// address, built once at late init.
type Index struct {
	lib.SortedIndex[*site]
}

// Addr returns the address of the i-th indexed site (address order).
func (x *Index) Addr(i int) uint64 { return x.Sorted[i].addr }

// LateInit is the late_initcall of the (inferred) P1 patch: with
// sim.StaticCallIndex on it allocates and fills the index of core sites
// and sorts it by address (OpIndexFill per site, OpIndexSortCmp per
// comparison), recording "static_call.index.bytes" and
// "static_call.index.bytes_per_entry". With the switch off it does nothing;
// if the allocation fault fires it builds nothing and returns nil (linear
// scan). Sites out of key order (static_call_sort_entries guarantees it) or
// overlapping are an error wrapping ErrBadTable. Only the first call acts.
func (t *Table) LateInit(c *sim.Counters) error {
	if t.lateInit {
		return nil
	}
	t.lateInit = true
	c.SetBytes("static_call.sites.bytes", int64(len(t.core))*StaticCallSiteBytes)
	if !t.sw.Has(sim.StaticCallIndex) {
		t.idxErr = ErrIndexOff
		return nil
	}
	if t.f.Fail(FaultIndexAlloc) {
		t.idxErr = ErrIndexAlloc
		return nil
	}
	for i := 1; i < len(t.core); i++ {
		if t.core[i-1].key > t.core[i].key {
			t.idxErr = fmt.Errorf("%w: core site %d (%#x, key %#x) out of key order: static_call_sort_entries guarantees it", ErrBadTable, i, t.core[i].addr, t.core[i].key)
			return t.idxErr
		}
	}
	sorted := make([]*site, len(t.core))
	for i := range t.core {
		c.Inc(OpIndexFill)
		sorted[i] = &t.core[i]
	}
	lib.SortByKey(sorted, func(s **site) uint64 { return (*s).addr }, func() { c.Inc(OpIndexSortCmp) })
	for i := 1; i < len(sorted); i++ {
		if a, b := sorted[i-1].addr, sorted[i].addr; b < a+CallInsnSize {
			t.idxErr = fmt.Errorf("%w: static-call sites at %#x and %#x overlap (each is %d bytes)", ErrBadTable, a, b, CallInsnSize)
			return t.idxErr
		}
	}
	t.idx = &Index{lib.NewSortedIndex(sorted, t.entryBytes)}
	perEntry := int64(t.entryBytes)
	if t.sw.Has(sim.ReservationBtree) {
		// reservation-btree: the same keys in a maple-like B-tree.
		t.idx.UseTree(func(s *site) uint64 { return s.addr }, c)
		perEntry = t.idx.Bytes() / int64(max(1, t.idx.Len()))
	}
	c.SetBytes("static_call.index.bytes", t.idx.Bytes())
	c.SetBytes("static_call.index.bytes_per_entry", perEntry)
	return nil
}

// Index returns the late-init index, or why there is none (ErrNotLateInit,
// ErrIndexOff, ErrIndexAlloc, or the ErrBadTable LateInit returned).
func (t *Table) Index() (*Index, error) {
	if !t.lateInit {
		return nil, ErrNotLateInit
	}
	if t.idx == nil {
		return nil, t.idxErr
	}
	return t.idx, nil
}

// Indexed reports whether TextReserved currently uses the index.
func (t *Table) Indexed() bool { return t.idx != nil }

// staticCallTextReservedIndexed: binary search for the first site >=
// start-(CALL_INSN_SIZE-1) (OpIndexProbe per step), then a walk while
// site <= end (OpIndexSite per site loaded, the one ending the walk
// included), same init and conflict rules as the linear scan.
//
// Models the core part of kernel/static_call_inline.c:static_call_text_reserved
// with patch P1 (inferred from the series' cover letter).
func (t *Table) staticCallTextReservedIndexed(c *sim.Counters, start, end uint64, init bool) bool {
	var low uint64
	if start >= CallInsnSize-1 {
		low = start - (CallInsnSize - 1)
	}
	x := t.idx.Sorted
	lo := t.idx.Seek(low, func(s *site) uint64 { return s.addr }, func() { c.Inc(OpIndexProbe) }, c)
	for i := lo; i < len(x); i++ {
		c.Inc(OpIndexSite)
		s := x[i]
		if s.addr > end {
			break
		}
		if (init || !s.init) && addrConflict(s.addr, start, end) {
			return true
		}
	}
	return false
}
