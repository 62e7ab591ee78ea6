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
	IndexPointer = lib.IndexPointer // struct static_call_site * array (the default)
	IndexOffset  = lib.IndexOffset  // u32 positions in .static_call_sites
)

// Errors a caller can test with errors.Is (each also matches lib's shared
// reason: lib.ErrNotLateInit, lib.ErrIndexOff, lib.ErrIndexAlloc,
// lib.ErrBadTable).
var (
	ErrNotLateInit = lib.TableError(lib.ErrNotLateInit, "static_call: index asked for before late init (static_call_text_reserved is linear until then)")
	ErrIndexOff    = lib.TableError(lib.ErrIndexOff, "static_call: no index: the static-call-index switch (P1) is off")
	ErrIndexAlloc  = lib.TableError(lib.ErrIndexAlloc, "static_call: no index: its late-init allocation failed (fault static_call.index.alloc)")
	ErrBadTable    = lib.TableError(lib.ErrBadTable, "static_call: malformed static-call site table")
)

// indexSpec is the P1 index's place in the generic late-init index.
var indexSpec = lib.IndexSpec{
	Name: "static_call", TableBytes: "static_call.sites.bytes",
	Switch: sim.StaticCallIndex, Fault: FaultIndexAlloc,
	Fill: OpIndexFill, SortCmp: OpIndexSortCmp, Probe: OpIndexProbe,
	NotLateInit: ErrNotLateInit, Off: ErrIndexOff, Alloc: ErrIndexAlloc,
}

func siteAddr(s *site) uint64 { return s.addr }

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

	core []site
	idx  lib.LateIndex[*site] // P1, built by LateInit
	scan coreScanner          // the core walk, or its fast scan (EnableFastScan)
}

// coreScanner answers the linear walk of the core sites: the walk itself
// (coreWalk), or the simulator's fast scan with the walk's counts
// (fastscan.go), chosen once by EnableFastScan.
type coreScanner interface {
	scanCore(c *sim.Counters, start, end uint64, init bool) bool
}

// coreWalk is __static_call_text_reserved over the core sites.
type coreWalk struct{ t *Table }

func (w coreWalk) scanCore(c *sim.Counters, start, end uint64, init bool) bool {
	return staticCallTextReservedRange(c, w.t.core, start, end, init)
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
	t := &Table{k: k, sw: sw, f: f, state: state}
	t.core = makeSites(k.StaticCallSites)
	t.idx = lib.NewLateIndex(&indexSpec, siteAddr, IndexPointer)
	t.scan = coreWalk{t}
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
func (t *Table) SetIndexEntryBytes(n int) error { return t.idx.SetEntryBytes(n) }

// TextReserved reports whether [start, end] (inclusive) overlaps a live
// static-call site: the core sites (linear, or the P1 index once built),
// then the one module whose text holds start. The error is always nil.
//
// Models kernel/static_call_inline.c:static_call_text_reserved.
func (t *Table) TextReserved(c *sim.Counters, start, end uint64) (bool, error) {
	init := t.state().InitSitesCount()
	var ret bool
	if t.idx.Built() != nil {
		ret = t.staticCallTextReservedIndexed(c, start, end, init)
	} else {
		ret = t.scan.scanCore(c, start, end, init)
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
	*lib.SortedIndex[*site]
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
	return t.idx.LateInit(c, lib.Build[*site]{
		Switches: t.sw, Faults: t.f,
		TableBytes: int64(len(t.core)) * StaticCallSiteBytes,
		N:          len(t.core),
		Entry:      func(i int) *site { return &t.core[i] },
		Check:      t.checkSortedSites,
		Finish:     checkNoOverlap,
	})
}

// checkSortedSites: the core sites are in key order.
func (t *Table) checkSortedSites() error {
	for i := 1; i < len(t.core); i++ {
		if t.core[i-1].key > t.core[i].key {
			return fmt.Errorf("%w: core site %d (%#x, key %#x) out of key order: static_call_sort_entries guarantees it", ErrBadTable, i, t.core[i].addr, t.core[i].key)
		}
	}
	return nil
}

// checkNoOverlap: no two sites, in address order, overlap.
func checkNoOverlap(sorted []*site) ([]*site, error) {
	for i := 1; i < len(sorted); i++ {
		if a, b := sorted[i-1].addr, sorted[i].addr; b < a+CallInsnSize {
			return nil, fmt.Errorf("%w: static-call sites at %#x and %#x overlap (each is %d bytes)", ErrBadTable, a, b, CallInsnSize)
		}
	}
	return sorted, nil
}

// Index returns the late-init index, or why there is none (ErrNotLateInit,
// ErrIndexOff, ErrIndexAlloc, or the ErrBadTable LateInit returned).
func (t *Table) Index() (*Index, error) {
	x, err := t.idx.Get()
	if err != nil {
		return nil, err
	}
	return &Index{x}, nil
}

// Indexed reports whether TextReserved currently uses the index.
func (t *Table) Indexed() bool { return t.idx.Built() != nil }

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
	x := t.idx.Built().Sorted
	lo := t.idx.Seek(c, low)
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
