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
