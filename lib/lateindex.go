package lib

import (
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/sim"
)

// The index layouts a late-init index may charge (bytes per entry); the
// counts are the same either way, only the reported memory differs.
const (
	IndexPointer = 8 // an array of pointers to the table's entries (the default)
	IndexOffset  = 4 // an array of u32 positions in the table
)

// The reasons a reservation table has no late-init index. Each table words
// them its own way (TableError); errors.Is matches both its wording and
// these.
var (
	// ErrNotLateInit: the index was asked for before its late_initcall ran.
	ErrNotLateInit = errors.New("index asked for before late init")
	// ErrIndexOff: the table's index switch is off (upstream has no index).
	ErrIndexOff = errors.New("no index: its switch is off")
	// ErrIndexAlloc: the late-init allocation failed (the table's fault point).
	ErrIndexAlloc = errors.New("no index: its late-init allocation failed")
	// ErrBadTable: the table breaks an order or a rule the kernel guarantees.
	ErrBadTable = errors.New("malformed table")
)

// TableError returns one table's wording msg of the shared reason kind:
// its Error is msg, and errors.Is matches it and kind.
func TableError(kind error, msg string) error { return &tableError{msg: msg, kind: kind} }

type tableError struct {
	msg  string
	kind error
}

func (e *tableError) Error() string { return e.msg }
func (e *tableError) Unwrap() error { return e.kind }

// IndexSpec is what one reservation table's late-init index is made of:
// its switch, its allocation fault point, its memory figures, the ops its
// build and search count, and its own wording of the reasons for none.
type IndexSpec struct {
	// Name prefixes the memory figures: Name+".index.bytes" and
	// Name+".index.bytes_per_entry".
	Name string
	// TableBytes names the figure of the table's own memory, recorded at
	// late init whatever the switches ("": none).
	TableBytes string

	Switch sim.Switch
	Fault  sim.FaultPoint

	Fill    sim.Op // one entry stored into the index
	SortCmp sim.Op // one comparison of the late-init sort()
	Probe   sim.Op // one halving step of the search

	NotLateInit, Off, Alloc error // wrapping ErrNotLateInit, ErrIndexOff, ErrIndexAlloc
}

// LateIndex is one reservation table's late-init address index: nothing
// before late init, then the table's entries sorted by key (a sorted array,
// or under sim.ReservationBtree a maple-like B-tree over it), or the reason
// there is none, after which the table's check stays linear.
// Not safe for concurrent use (the kernel builds it once, at late init).
type LateIndex[T any] struct {
	spec       *IndexSpec
	key        func(T) uint64
	entryBytes int

	ran bool
	x   *SortedIndex[T]
	err error
}

// NewLateIndex returns the index described by spec over entries keyed by
// key, charging entryBytes per entry (a pointer or a u32 offset).
func NewLateIndex[T any](spec *IndexSpec, key func(T) uint64, entryBytes int) LateIndex[T] {
	return LateIndex[T]{spec: spec, key: key, entryBytes: entryBytes}
}

// SetEntryBytes chooses the layout LateInit charges: IndexPointer or
// IndexOffset. It must be called before LateInit.
func (l *LateIndex[T]) SetEntryBytes(n int) error {
	if n != IndexPointer && n != IndexOffset {
		return fmt.Errorf("%s: index entry size %d: want %d (pointer) or %d (u32 offset)", l.spec.Name, n, IndexPointer, IndexOffset)
	}
	if l.ran {
		return fmt.Errorf("%s: index layout must be chosen before late init", l.spec.Name)
	}
	l.entryBytes = n
	return nil
}

// EntryBytes returns the bytes charged per entry.
func (l *LateIndex[T]) EntryBytes() int { return l.entryBytes }

// Build is what one table's late_initcall indexes.
type Build[T any] struct {
	Switches sim.Switches
	Faults   *sim.Faults
	// TableBytes is the table's own memory (IndexSpec.TableBytes).
	TableBytes int64
	// N entries are stored, Entry(i) the i-th, one IndexSpec.Fill each.
	N     int
	Entry func(i int) T
	// Check (nil: none) tests the table before the allocation is filled;
	// an error (wrapping ErrBadTable) leaves no index.
	Check func() error
	// Finish (nil: none) tests the sorted entries, and may merge them; an
	// error (wrapping ErrBadTable) leaves no index.
	Finish func(sorted []T) ([]T, error)
}

// LateInit is the common part of the tables' late_initcalls: the table's
// memory figure; with the switch off or the allocation fault firing,
// nothing (nil: the check stays linear); else the table checked, the
// entries stored (Fill each) and sorted by the kernel's sort() (SortCmp per
// comparison), the result checked, and under sim.ReservationBtree the keys
// put in a B-tree; then the index's memory figures. Only the first call
// acts, like an initcall.
func (l *LateIndex[T]) LateInit(c *sim.Counters, b Build[T]) error {
	if l.ran {
		return nil
	}
	l.ran = true
	if l.spec.TableBytes != "" {
		c.SetBytes(l.spec.TableBytes, b.TableBytes)
	}
	if !b.Switches.Has(l.spec.Switch) {
		l.err = l.spec.Off
		return nil
	}
	if b.Faults.Fail(l.spec.Fault) {
		l.err = l.spec.Alloc
		return nil
	}
	if b.Check != nil {
		if err := b.Check(); err != nil {
			l.err = err
			return err
		}
	}
	sorted := make([]T, b.N)
	fill, cmp := l.spec.Fill, l.spec.SortCmp
	for i := range sorted {
		c.Inc(fill)
		sorted[i] = b.Entry(i)
	}
	SortByKey(sorted, l.key, func() { c.Inc(cmp) })
	if b.Finish != nil {
		var err error
		if sorted, err = b.Finish(sorted); err != nil {
			l.err = err
			return err
		}
	}
	x := NewSortedIndex(sorted, l.entryBytes)
	perEntry := int64(l.entryBytes)
	if b.Switches.Has(sim.ReservationBtree) {
		// reservation-btree: the same keys in a maple-like B-tree.
		x.UseTree(l.key, c)
		perEntry = x.Bytes() / int64(max(1, x.Len()))
	}
	l.x = &x
	c.SetBytes(l.spec.Name+".index.bytes", x.Bytes())
	c.SetBytes(l.spec.Name+".index.bytes_per_entry", perEntry)
	return nil
}

// Ran reports whether LateInit has run.
func (l *LateIndex[T]) Ran() bool { return l.ran }

// Built returns the index the check searches, or nil: the check is linear.
func (l *LateIndex[T]) Built() *SortedIndex[T] { return l.x }

// Get returns the index, or why there is none: the table's NotLateInit
// before LateInit, its Off or Alloc, or the ErrBadTable error LateInit
// returned.
func (l *LateIndex[T]) Get() (*SortedIndex[T], error) {
	if !l.ran {
		return nil, l.spec.NotLateInit
	}
	if l.x == nil {
		return nil, l.err
	}
	return l.x, nil
}

// Seek returns the first position of the built index whose key is >= v:
// a halving search of the array (IndexSpec.Probe per step) or, with the
// B-tree, one counted walk of it.
func (l *LateIndex[T]) Seek(c *sim.Counters, v uint64) int {
	probe := l.spec.Probe
	return l.x.Seek(v, l.key, func() { c.Inc(probe) }, c)
}
