package sim

import "sync"

// Derived holds simulator data derived from one owner (a kernel image, a
// set of kallsyms tables): sorted copies, fast-scan indexes, booted
// records. Each value is built once, on first use, by whichever run asks
// first, and shared read-only by every later run over the same owner; it
// goes when its owner goes. It replaces process-wide caches keyed by the
// owner's pointer, which never emptied.
//
// The zero value is ready to use. It is safe for concurrent use: two runs
// asking for the same key at once build it once. A Derived must not be
// copied after first use.
type Derived struct {
	mu sync.Mutex
	m  map[any]*derivedEntry
}

type derivedEntry struct {
	once sync.Once
	v    any
}

// DerivedValue returns the value d holds under key, calling build to make
// it the first time. key is any comparable value; by convention an
// unexported type of the package that owns the data (type fastScanKey
// struct{}), so packages cannot collide. build must not call DerivedValue
// on the same d and key. A value is never rebuilt: a caller whose inputs
// can change under the same owner stores them beside the value and checks
// them (see jumplabel's fast scan).
func DerivedValue[T any](d *Derived, key any, build func() T) T {
	d.mu.Lock()
	if d.m == nil {
		d.m = map[any]*derivedEntry{}
	}
	e := d.m[key]
	if e == nil {
		e = &derivedEntry{}
		d.m[key] = e
	}
	d.mu.Unlock()
	e.once.Do(func() { e.v = build() })
	return e.v.(T)
}

// DerivedSlot is the field of an owner that holds its Derived store. The
// zero value is empty. A copy of the owner struct (a test editing an
// image) copies the slot, and For then gives the copy a store of its own.
type DerivedSlot struct {
	d  *Derived
	of any // the owner the store was made for
}

// derivedSlotMu guards every DerivedSlot (taken once per run wiring or
// resolver set-up, never on a model path).
var derivedSlotMu sync.Mutex

// For returns the store of owner, the struct holding s: made on first
// use, and made afresh when owner is a copy of the struct it was made for.
func (s *DerivedSlot) For(owner any) *Derived {
	derivedSlotMu.Lock()
	defer derivedSlotMu.Unlock()
	if s.d == nil || s.of != owner {
		s.d, s.of = &Derived{}, owner
	}
	return s.d
}
