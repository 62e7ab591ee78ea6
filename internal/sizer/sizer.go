// Package sizer measures the memory a simulation run retains: the bytes
// of the object graph reachable from the run's roots, shared values
// excluded (kpsim run many's sim_retained_bytes).
package sizer

import (
	"cmp"
	"math/bits"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Sizer reports a run's memory as the bytes of the simulator structures
// it retains, not as the process heap: runs overlap (--jobs), and the heap
// then holds every running run's state and whatever the collector has
// not yet freed. A Sizer walks the object graph reachable from a
// run's roots (its machine: registry, trees, slot caches, indexes,
// counters; its tracing layer; its per-probe state) and adds up
//
//   - the union of the memory of every object reached through a pointer
//     (its type's size) and every slice's backing array (capacity ×
//     element size), so an array counts once however many subslices and
//     interior pointers reach it;
//   - each map: entries × (key size + value size);
//   - each boxed interface value: its dynamic type's size.
//
// String contents (mostly the image's symbol names, shared), closures and
// channels are not counted, and neither is anything reached through the
// shared values: the image (image.Kernel, its modules and regions), the
// kallsyms tables built for it, the setup, the cost table and
// time.Location (a process global that fills itself in lazily). The figure
// depends only on what the run built, never on the collector, other runs
// or the order a map is walked in, so --jobs 1 and --jobs N give the same
// number (scenarios.TestRunManyParallelMatchesSerial).
//
// The walk's functions are //go:norace: a run's sizer reads only what its
// own goroutine built (and the read-only shared values), so there is
// nothing for the race detector to find, and instrumenting every read made
// a sample ten times slower under -race, a large share of the race-enabled
// test time.
type Sizer struct {
	seen        addrSet
	spans       []span  // every object and array reached
	extra       uint64  // maps and boxed values (no address)
	shared      []int32 // pointer types, by typeInfo id (a handful)
	sharedSpans []span
}

// seenAs is what was counted of an object: for a slice's array the
// largest capacity counted and the elements walked.
type seenAs struct{ cap, walked int }

// addrSet maps (address, type id) to what was counted there: an
// open-addressing table on one uint64 key (heap addresses fit in 48 bits,
// the type id takes the top 16), several times cheaper than a Go map with
// a struct key on the 10^5 objects of a 20k-probe run.
type addrSet struct {
	keys  []uint64
	vals  []seenAs
	n     int
	shift uint
}

func sizeKey(p uintptr, id int32) uint64 { return uint64(p) ^ uint64(id)<<48 }

//go:norace
func (s *addrSet) slot(k uint64) int {
	mask := len(s.keys) - 1
	for i := int((k * 0x9E3779B97F4A7C15) >> s.shift); ; i = (i + 1) & mask {
		if s.keys[i] == k || s.keys[i] == 0 {
			return i
		}
	}
}

// get returns the entry for k and whether there is one.
//
//go:norace
func (s *addrSet) get(k uint64) (seenAs, bool) {
	if len(s.keys) == 0 {
		return seenAs{}, false
	}
	i := s.slot(k)
	if s.keys[i] != k {
		return seenAs{}, false // the slot's value is a stale one's
	}
	return s.vals[i], true
}

// add enters k (with a zero entry) unless it is there, and reports
// whether it was not: one probe where get and put take two.
//
//go:norace
func (s *addrSet) add(k uint64) bool {
	if 2*(s.n+1) > len(s.keys) {
		s.grow()
	}
	i := s.slot(k)
	if s.keys[i] == k {
		return false
	}
	s.keys[i] = k // its value is zero: reset and grow clear them
	s.n++
	return true
}

//go:norace
func (s *addrSet) put(k uint64, v seenAs) {
	if 2*(s.n+1) > len(s.keys) {
		s.grow()
	}
	i := s.slot(k)
	if s.keys[i] == 0 {
		s.keys[i] = k
		s.n++
	}
	s.vals[i] = v
}

//go:norace
func (s *addrSet) grow() {
	old, oldv := s.keys, s.vals
	size := max(1024, 2*len(old))
	if len(old) == 0 {
		// A new sizer's first table: the size the last sizer's grew to
		// (runs are alike), not a dozen doublings and rehashes to reach it.
		size = max(size, int(lastTableSize.Load()))
	}
	s.keys, s.vals, s.n = make([]uint64, size), make([]seenAs, size), 0
	s.shift = uint(64 - bits.Len(uint(size-1)))
	for i, k := range old {
		if k != 0 {
			s.put(k, oldv[i])
		}
	}
}

// lastTableSize is the size the last Measure's table reached (a power of
// two): where the next sizer's starts. It changes no figure.
var lastTableSize atomic.Int64

// reset empties the set, keeping its room.
//
//go:norace
func (s *addrSet) reset() {
	clear(s.keys)
	clear(s.vals) // add leaves a new key's value as it finds it
	s.n = 0
}

// typeInfo is what the walk needs of a type, computed once.
type typeInfo struct {
	t     reflect.Type
	id    int32
	alen  int // arrays: length
	size  uintptr
	walk  bool // holds something the walk follows (pointer, slice, map, interface)
	kind  reflect.Kind
	elem  *typeInfo   // pointer, slice, array, map value
	key   *typeInfo   // map key
	field []fieldInfo // struct fields that need walking
}

type fieldInfo struct {
	index  int
	offset uintptr
	t      *typeInfo
}

var typeInfos struct {
	sync.Mutex
	m    map[reflect.Type]*typeInfo
	next int32
	done sync.Map // reflect.Type -> *typeInfo, complete ones (lock-free reads)
}

func infoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.done.Load(t); ok {
		return ti.(*typeInfo)
	}
	typeInfos.Lock()
	defer typeInfos.Unlock()
	if typeInfos.m == nil {
		typeInfos.m = map[reflect.Type]*typeInfo{}
	}
	ti := infoLocked(t)
	typeInfos.done.Store(t, ti)
	return ti
}

func infoLocked(t reflect.Type) *typeInfo {
	if ti := typeInfos.m[t]; ti != nil {
		return ti
	}
	typeInfos.next++
	ti := &typeInfo{t: t, id: typeInfos.next, size: t.Size(), kind: t.Kind()}
	typeInfos.m[t] = ti // before the elements: recursive types
	switch t.Kind() {
	case reflect.Pointer:
		ti.walk, ti.elem = true, infoLocked(t.Elem())
	case reflect.Slice:
		ti.walk, ti.elem = true, infoLocked(t.Elem())
	case reflect.Map:
		ti.walk, ti.key, ti.elem = true, infoLocked(t.Key()), infoLocked(t.Elem())
	case reflect.Interface:
		ti.walk = true
	case reflect.Array:
		ti.elem, ti.alen = infoLocked(t.Elem()), t.Len()
		ti.walk = t.Len() > 0 && needsWalk(t.Elem(), map[reflect.Type]bool{})
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if needsWalk(t.Field(i).Type, map[reflect.Type]bool{}) {
				ti.field = append(ti.field, fieldInfo{index: i, offset: t.Field(i).Offset, t: infoLocked(t.Field(i).Type)})
			}
		}
		ti.walk = len(ti.field) > 0
	}
	return ti
}

// needsWalk reports whether a value of type t can reach counted memory.
func needsWalk(t reflect.Type, visiting map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	case reflect.Array:
		return t.Len() > 0 && needsWalk(t.Elem(), visiting)
	case reflect.Struct:
		if visiting[t] {
			return false
		}
		visiting[t] = true
		for i := 0; i < t.NumField(); i++ {
			if needsWalk(t.Field(i).Type, visiting) {
				return true
			}
		}
	}
	return false
}

// New returns a sizer that counts nothing the shared values
// reach: their types stop the walk, and memory inside what they reach (the
// image's text, symbol and table arrays) is subtracted from the union.
// Each shared value is a pointer that stays live while the sizer is used
// (a freed one's memory could be reused by the run); a typed nil names a
// shared type without walking anything.
func New(shared ...any) *Sizer {
	z := &Sizer{}
	for _, s := range shared {
		v := reflect.ValueOf(s)
		if !v.IsValid() || v.Kind() != reflect.Pointer {
			continue
		}
		if !v.IsNil() {
			z.value(v, infoOf(v.Type()))
		}
	}
	z.sharedSpans = mergeSpans(z.spans)
	for _, s := range shared {
		z.shared = append(z.shared, infoOf(reflect.TypeOf(s)).id)
	}
	return z
}

// Measure returns the bytes reachable from the roots, counted afresh.
//
//go:norace
func (z *Sizer) Measure(roots ...any) uint64 {
	z.seen.reset() // keeps the table's room: later samples do not regrow it
	z.spans, z.extra = z.spans[:0], 0
	for _, r := range roots {
		v := reflect.ValueOf(r)
		if v.IsValid() {
			z.value(v, infoOf(v.Type()))
		}
	}
	lastTableSize.Store(int64(len(z.seen.keys)))
	own := mergeSpans(z.spans)
	total := z.extra
	for _, sp := range own {
		total += sp.end - sp.start
	}
	return total - overlap(own, z.sharedSpans)
}

// span is one object's memory [start, end).
type span struct{ start, end uint64 }

// mergeSpans sorts the spans and merges the overlapping ones: the union
// counts an array once however many subslices and interior pointers
// reach it.
//
//go:norace
func mergeSpans(sp []span) []span {
	out := radixSort(slices.Clone(sp))
	n := 0
	for _, s := range out {
		if n > 0 && s.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out[n] = s
		n++
	}
	return out[:n]
}

// radixSort sorts spans by start: an LSD radix sort on 16-bit digits,
// skipping digits every start shares (heap addresses differ in few bits),
// several times faster than a comparison sort on 10^5 spans.
//
//go:norace
func radixSort(a []span) []span {
	if len(a) < 256 {
		slices.SortFunc(a, func(x, y span) int { return cmp.Compare(x.start, y.start) })
		return a
	}
	var or, and uint64 = 0, ^uint64(0)
	for _, s := range a {
		or, and = or|s.start, and&s.start
	}
	buf := make([]span, len(a))
	var count [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		if (or^and)>>shift&0xffff == 0 {
			continue // every start has this digit
		}
		clear(count[:])
		for _, s := range a {
			count[s.start>>shift&0xffff]++
		}
		pos := 0
		for i, c := range count {
			count[i], pos = pos, pos+c
		}
		for _, s := range a {
			d := s.start >> shift & 0xffff
			buf[count[d]] = s
			count[d]++
		}
		a, buf = buf, a
	}
	return a
}

// overlap is the length of the intersection of two merged span lists.
//
//go:norace
func overlap(a, b []span) uint64 {
	var n uint64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].start, b[j].start), min(a[i].end, b[j].end)
		if lo < hi {
			n += hi - lo
		}
		if a[i].end < b[j].end {
			i++
		} else {
			j++
		}
	}
	return n
}

// inShared reports whether p lies in memory the shared values reach: a
// bisection for the first span ending above p (by hand: it runs for every
// object the walk reaches).
//
//go:norace
func (z *Sizer) inShared(p uint64) bool {
	sp := z.sharedSpans
	lo, hi := 0, len(sp)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if sp[mid].end <= p {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo < len(sp) && sp[lo].start <= p
}

// sliceHeader is a slice's runtime layout.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// raw walks the value of type ti at p. The walk reads memory directly
// (reflect.Value's per-field bookkeeping was most of a sample's cost) and
// falls back to reflect for maps and interfaces.
//
//go:norace
func (z *Sizer) raw(p unsafe.Pointer, ti *typeInfo) {
	if !ti.walk {
		return
	}
	switch ti.kind {
	case reflect.Pointer:
		z.pointee(*(*unsafe.Pointer)(p), ti)
	case reflect.Slice:
		h := (*sliceHeader)(p)
		z.array(h.data, h.len, h.cap, ti)
	case reflect.Map, reflect.Interface:
		z.value(reflect.NewAt(ti.t, p).Elem(), ti)
	case reflect.Array:
		for i := 0; i < ti.alen; i++ {
			z.raw(unsafe.Add(p, uintptr(i)*ti.elem.size), ti.elem)
		}
	case reflect.Struct:
		for _, f := range ti.field {
			z.raw(unsafe.Add(p, f.offset), f.t)
		}
	}
}

// pointee counts and walks what q (of pointer type ti) points to.
//
//go:norace
func (z *Sizer) pointee(q unsafe.Pointer, ti *typeInfo) {
	if q == nil || ti.elem.size == 0 {
		return
	}
	for _, id := range z.shared {
		if id == ti.id {
			return
		}
	}
	p := uint64(uintptr(q))
	k := sizeKey(uintptr(q), ti.elem.id)
	if !z.seen.add(k) || z.inShared(p) {
		return
	}
	z.spans = append(z.spans, span{p, p + uint64(ti.elem.size)})
	z.raw(q, ti.elem)
}

// array counts and walks a slice's backing array (ti is the slice type).
//
//go:norace
func (z *Sizer) array(data unsafe.Pointer, n, c int, ti *typeInfo) {
	if data == nil || c == 0 || ti.elem.size == 0 {
		return
	}
	p := uint64(uintptr(data))
	if z.inShared(p) {
		return
	}
	k := sizeKey(uintptr(data), ti.elem.id)
	was, _ := z.seen.get(k)
	now := was
	if c > was.cap {
		z.spans = append(z.spans, span{p, p + uint64(c)*uint64(ti.elem.size)})
		now.cap = c
	}
	if !ti.elem.walk || n <= was.walked {
		if now != was {
			z.seen.put(k, now)
		}
		return
	}
	now.walked = n
	z.seen.put(k, now)
	for i := was.walked; i < n; i++ {
		z.raw(unsafe.Add(data, uintptr(i)*ti.elem.size), ti.elem)
	}
}

// value walks a value reflect holds (roots, map entries, interfaces'
// dynamic values, which need not be addressable).
//
//go:norace
func (z *Sizer) value(v reflect.Value, ti *typeInfo) {
	if !ti.walk {
		return
	}
	switch ti.kind {
	case reflect.Pointer:
		z.pointee(v.UnsafePointer(), ti)
	case reflect.Slice:
		z.array(v.UnsafePointer(), v.Len(), v.Cap(), ti)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		k := sizeKey(uintptr(v.UnsafePointer()), ti.id)
		if _, ok := z.seen.get(k); ok {
			return
		}
		z.seen.put(k, seenAs{})
		z.extra += uint64(v.Len()) * uint64(ti.key.size+ti.elem.size)
		if !ti.key.walk && !ti.elem.walk {
			return
		}
		it := v.MapRange()
		for it.Next() {
			z.value(it.Key(), ti.key)
			z.value(it.Value(), ti.elem)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		ei := infoOf(e.Type())
		if ei.kind != reflect.Pointer && ei.kind != reflect.Map && ei.size > unsafe.Sizeof(uintptr(0)) {
			z.extra += uint64(ei.size) // a boxed value
		}
		z.value(e, ei)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			z.value(v.Index(i), ti.elem)
		}
	case reflect.Struct:
		for _, f := range ti.field {
			z.value(v.Field(f.index), f.t)
		}
	}
}
