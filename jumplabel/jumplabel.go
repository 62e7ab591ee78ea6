package jumplabel

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// FaultIndexAlloc makes the late-init allocation of the P2 index fail; the
// check then keeps using the linear scan, as the (inferred) patch does.
var FaultIndexAlloc = sim.NewFaultPoint("jump_label.index.alloc",
	"late-init allocation of the jump-label address index (P2) fails: jump_label_text_reserved stays linear")

// JumpLabelMaxSize is the largest jump-label site on x86-64 (JMP32_INSN_SIZE
// / NOP5): an entry can only overlap [start, end] if code >= start-(5-1).
const JumpLabelMaxSize = x86.JMP32InsnSize

// JumpEntryBytes is sizeof(struct jump_entry) on x86-64 with
// CONFIG_HAVE_ARCH_JUMP_LABEL_RELATIVE: s32 code, s32 target, long key.
const JumpEntryBytes = 16

// Index entry layouts (bytes per indexed entry). The patch was not
// available; both plausible layouts are modelled and charge the same counts.
const (
	// IndexPointer: an array of struct jump_entry pointers (kvmalloc_array
	// of J pointers), the simplest kernel code. The default.
	IndexPointer = lib.IndexPointer
	// IndexOffset: an array of u32 positions in __jump_table.
	IndexOffset = lib.IndexOffset
)

// Errors a caller can test with errors.Is (each also matches lib's shared
// reason: lib.ErrNotLateInit, lib.ErrIndexOff, lib.ErrIndexAlloc,
// lib.ErrBadTable).
var (
	// ErrNotLateInit: the index was asked for before LateInit ran.
	ErrNotLateInit = lib.TableError(lib.ErrNotLateInit, "jump_label: index asked for before late init (jump_label_text_reserved is linear until then)")
	// ErrIndexOff: the jump-label-index switch (P2) is off, upstream has no index.
	ErrIndexOff = lib.TableError(lib.ErrIndexOff, "jump_label: no index: the jump-label-index switch (P2) is off")
	// ErrIndexAlloc: the late-init allocation failed (fault point jump_label.index.alloc).
	ErrIndexAlloc = lib.TableError(lib.ErrIndexAlloc, "jump_label: no index: its late-init allocation failed (fault jump_label.index.alloc)")
	// ErrBadTable: the core table breaks an order the kernel guarantees.
	ErrBadTable = lib.TableError(lib.ErrBadTable, "jump_label: malformed jump table")
)

// indexSpec is the P2 index's place in the generic late-init index.
var indexSpec = lib.IndexSpec{
	Name: "jump_label", TableBytes: "jump_label.table.bytes",
	Switch: sim.JumpLabelIndex, Fault: FaultIndexAlloc,
	Fill: OpIndexFill, SortCmp: OpIndexSortCmp, Probe: OpIndexProbe,
	NotLateInit: ErrNotLateInit, Off: ErrIndexOff, Alloc: ErrIndexAlloc,
}

func siteCode(s *site) uint64 { return s.code }

// TextReserver is the one interface through which the registration
// pipeline asks whether [start, end] (inclusive) overlaps a jump-label site,
// whatever form (linear, indexed, decoded or opcode sizes) is active.
type TextReserver interface {
	TextReserved(c *sim.Counters, start, end uint64) (bool, error)
}

var _ TextReserver = (*Table)(nil)

// site is the simulator's view of one struct jump_entry: its code address,
// init flag, the live text bytes at the site (an alias of the region's
// bytes, so text changes are seen) and, for the fast path's memo
// (fastscan.go), its size computations.
type site struct {
	code  uint64
	key   uint64
	init  bool
	text  []byte
	cache [2]sizeCache // [0] decode (upstream), [1] opcode (P3)
}

// Table models the kernel's jump-label tables as seen by
// jump_label_text_reserved: the core __jump_table and each module's
// jump_entries, plus (with P2) the late-init address index.
type Table struct {
	k     *image.Kernel
	sw    sim.Switches
	f     *sim.Faults
	state func() boot.State

	core []site
	mods map[*image.Module]*modSites

	idx lib.LateIndex[*site] // P2, built by LateInit
	// insn is the image generation's instruction decoder.
	insn *x86.Decoder
	scan coreScanner // the core walk, or its fast scan (EnableFastScan)
	// sizeSite sizes one site as jumpEntrySize says, behind the
	// simulator's counted memo (memoSize, fastscan.go); EnableFastScan
	// swaps its decoder for the byte-reading one.
	sizeSite func(c *sim.Counters, s *site, opcode bool) (int, error)
}

// coreScanner answers the linear walk of the core table: the walk itself
// (coreWalk), or the simulator's fast scan with the walk's counts
// (fastscan.go), chosen once by EnableFastScan.
type coreScanner interface {
	scanCore(c *sim.Counters, start, end uint64, init bool) (bool, error)
}

// coreWalk is __jump_label_text_reserved over the core table.
type coreWalk struct{ t *Table }

func (w coreWalk) scanCore(c *sim.Counters, start, end uint64, init bool) (bool, error) {
	return w.t.jumpLabelTextReservedRange(c, w.t.core, start, end, init)
}

type modSites struct {
	src   *image.JumpEntry // &m.JumpEntries[0] when built, to notice a replaced table
	n     int
	sites []site
}

// New returns the jump-label model of image k under switches sw. Faults f
// (nil: none) may make the late-init index allocation fail. state reads the
// pipeline's current system_state; nil means SYSTEM_RUNNING throughout.
// Until LateInit the linear scan is used whatever the switches say.
func New(k *image.Kernel, sw sim.Switches, f *sim.Faults, state func() boot.State) (*Table, error) {
	if k == nil {
		return nil, errors.New("jump_label: nil kernel image")
	}
	if state == nil {
		state = func() boot.State { return boot.Running }
	}
	t := &Table{k: k, sw: sw, f: f, state: state, mods: map[*image.Module]*modSites{}}
	t.core = makeSites(k, k.JumpEntries)
	t.idx = lib.NewLateIndex(&indexSpec, siteCode, IndexPointer)
	t.scan = coreWalk{t}
	// arch_jump_entry_size decodes with the image generation's decoder.
	t.insn = x86.For(k.Config.Gen)
	t.sizeSite = memoSize(t.insn.JumpEntrySizeDecode)
	return t, nil
}

func makeSites(k *image.Kernel, es []image.JumpEntry) []site {
	out := make([]site, len(es))
	for i := range es {
		e := &es[i]
		out[i] = site{code: e.Code, key: e.Key, init: e.Init, text: k.Text(e.Code, 15)}
	}
	return out
}

// SetIndexEntryBytes chooses the index layout charged by LateInit:
// IndexPointer (8, the default) or IndexOffset (4). Counts do not depend on
// it, only the reported memory. It must be called before LateInit.
func (t *Table) SetIndexEntryBytes(n int) error { return t.idx.SetEntryBytes(n) }

// TextReserved reports whether [start, end] (inclusive) overlaps a live
// jump-label site: the core table (linear, or the P2 index once built),
// then the one module whose text holds start. init sites count while
// system_state < SYSTEM_RUNNING (core) or while their module is COMING.
// An error is the kernel's BUG(): a candidate site that is not a 2- or
// 5-byte jump or NOP.
//
// Models kernel/jump_label.c:jump_label_text_reserved.
func (t *Table) TextReserved(c *sim.Counters, start, end uint64) (bool, error) {
	init := t.state().InitSitesCount()
	var ret bool
	var err error
	if t.idx.Built() != nil {
		ret, err = t.jumpLabelTextReservedIndexed(c, start, end, init)
	} else {
		ret, err = t.scan.scanCore(c, start, end, init)
	}
	if ret || err != nil {
		return ret, err
	}
	return t.jumpLabelModTextReserved(c, start, end)
}

// jumpLabelTextReservedRange is the linear walk over one table in its
// run-time order; every entry visited is one OpScanEntry.
//
// Models kernel/jump_label.c:__jump_label_text_reserved.
func (t *Table) jumpLabelTextReservedRange(c *sim.Counters, sites []site, start, end uint64, init bool) (bool, error) {
	for i := range sites {
		s := &sites[i]
		c.Inc(OpScanEntry)
		if init || !s.init {
			hit, err := t.addrConflict(c, s, start, end)
			if hit || err != nil {
				return hit, err
			}
		}
	}
	return false, nil
}

// addrConflict: code <= end && code + size > start, the size computed only
// when the first test holds (the && short circuit).
//
// Models kernel/jump_label.c:addr_conflict.
func (t *Table) addrConflict(c *sim.Counters, s *site, start, end uint64) (bool, error) {
	if s.code > end {
		return false, nil
	}
	n, err := t.jumpEntrySize(c, s)
	if err != nil {
		return false, err
	}
	return s.code+uint64(n) > start, nil
}

// jumpEntrySize sizes a site: arch_jump_entry_size decodes the
// instruction (upstream), or under sim.JumpSizeOpcode (P3) reads its
// opcode byte.
//
// Models include/linux/jump_label.h:jump_entry_size (x86: arch_jump_entry_size).
func (t *Table) jumpEntrySize(c *sim.Counters, s *site) (int, error) {
	n, err := t.sizeSite(c, s, t.sw.Has(sim.JumpSizeOpcode))
	if err != nil {
		return 0, fmt.Errorf("jump_label: jump entry at %#x (key %#x): %w", s.code, s.key, err)
	}
	return n, nil
}

// jumpLabelModTextReserved scans the one module whose text holds start
// (none for a core address), with init = (module state == COMING). A
// module that is going away fails try_module_get and is not scanned; an
// unformed one is not found. The kernel's WARN_ON_ONCE for an end in a
// different module is counted (its lookup), not reported.
//
// Models kernel/jump_label.c:__jump_label_mod_text_reserved.
func (t *Table) jumpLabelModTextReserved(c *sim.Counters, start, end uint64) (bool, error) {
	c.Inc(OpModuleLookup)
	mod := t.k.ModuleTextAddress(start)
	// WARN_ON_ONCE(__module_text_address(end) != mod) evaluates its
	// condition on every call: a second lookup, whose answer changes
	// nothing returned.
	c.Inc(OpModuleLookup)
	if mod == nil {
		return false, nil
	}
	c.Inc(OpModuleGet)
	if mod.State == image.ModuleGoing { // !try_module_get(mod)
		return false, nil
	}
	ms := t.mods[mod]
	if ms == nil || ms.n != len(mod.JumpEntries) || (ms.n > 0 && ms.src != &mod.JumpEntries[0]) {
		ms = &modSites{n: len(mod.JumpEntries), sites: makeSites(t.k, mod.JumpEntries)}
		if ms.n > 0 {
			ms.src = &mod.JumpEntries[0]
		}
		t.mods[mod] = ms
	}
	return t.jumpLabelTextReservedRange(c, ms.sites, start, end, mod.State == image.ModuleComing)
}

// Index is the P2 address index: the core jump entries sorted by code
// address, built once at late init and never changed (core code addresses
// are fixed; init entries stay and are skipped by their flag).
type Index struct {
	*lib.SortedIndex[*site]
}

// Code returns the code address of the i-th indexed entry (address order).
func (x *Index) Code(i int) uint64 { return x.Sorted[i].code }

// LateInit is the late_initcall of the (inferred) P2 patch: with
// sim.JumpLabelIndex on it allocates and fills the index of core entries
// and sorts it by code address (OpIndexFill per entry, OpIndexSortCmp per
// comparison of the kernel's sort()), and records its memory as
// "jump_label.index.bytes" and "jump_label.index.bytes_per_entry". With the
// switch off it does nothing. If the allocation fault fires, no index is
// built and nil is returned: the kernel carries on with the linear scan. A
// core table that breaks the order jump_label_sort_entries guarantees, or
// with overlapping sites, is an error wrapping ErrBadTable (and the check
// stays linear). Only the first call does anything, like an initcall.
func (t *Table) LateInit(c *sim.Counters) error {
	return t.idx.LateInit(c, lib.Build[*site]{
		Switches: t.sw, Faults: t.f,
		TableBytes: int64(len(t.core)) * JumpEntryBytes,
		N:          len(t.core),
		Entry:      func(i int) *site { return &t.core[i] },
		Check:      t.checkSortedEntries,
		Finish:     t.checkNoOverlap,
	})
}

// checkSortedEntries: the core table is in (key, code) order.
func (t *Table) checkSortedEntries() error {
	for i := 1; i < len(t.core); i++ {
		a, b := &t.core[i-1], &t.core[i]
		if a.key > b.key || (a.key == b.key && a.code >= b.code) {
			return fmt.Errorf("%w: core entry %d (code %#x, key %#x) out of (key, code) order: jump_label_sort_entries guarantees it", ErrBadTable, i, b.code, b.key)
		}
	}
	return nil
}

// checkNoOverlap: no two sites, in code order, overlap.
func (t *Table) checkNoOverlap(sorted []*site) ([]*site, error) {
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		// Simulator-side size (not counted); an unsizable site counts as the
		// smallest (2 bytes) here and is reported by TextReserved instead.
		n, err := t.sizeSite(nil, a, false)
		if err != nil {
			n = x86.JMP8InsnSize
		}
		if b.code < a.code+uint64(n) {
			return nil, fmt.Errorf("%w: jump sites at %#x (%d bytes) and %#x overlap", ErrBadTable, a.code, n, b.code)
		}
	}
	return sorted, nil
}

// Index returns the late-init index, or an error saying why there is none:
// ErrNotLateInit before LateInit, ErrIndexOff with P2 off, ErrIndexAlloc
// when the allocation failed, or the ErrBadTable LateInit returned.
func (t *Table) Index() (*Index, error) {
	x, err := t.idx.Get()
	if err != nil {
		return nil, err
	}
	return &Index{x}, nil
}

// Indexed reports whether TextReserved currently uses the index.
func (t *Table) Indexed() bool { return t.idx.Built() != nil }

// jumpLabelTextReservedIndexed: binary search for the first entry with
// code >= start-(JumpLabelMaxSize-1) (OpIndexProbe per step), then a walk
// while code <= end (OpIndexEntry per entry loaded, the one that ends the
// walk included), each candidate tested like the linear scan does.
//
// Models the core part of kernel/jump_label.c:jump_label_text_reserved
// with patch P2 (inferred from the series' cover letter).
func (t *Table) jumpLabelTextReservedIndexed(c *sim.Counters, start, end uint64, init bool) (bool, error) {
	var low uint64
	if start >= JumpLabelMaxSize-1 {
		low = start - (JumpLabelMaxSize - 1)
	}
	x := t.idx.Built().Sorted
	i := t.idx.Seek(c, low)
	for ; i < len(x); i++ {
		c.Inc(OpIndexEntry)
		s := x[i]
		if s.code > end {
			break
		}
		if !init && s.init {
			continue
		}
		hit, err := t.addrConflict(c, s, start, end)
		if hit || err != nil {
			return hit, err
		}
	}
	return false, nil
}
