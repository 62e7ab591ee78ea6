package scenarios

import (
	"cmp"
	"reflect"
	"slices"
	"sync"
	"unsafe"
)

// A run's memory is reported as the bytes of the simulator structures it
// retains, not as the process heap: runs overlap (--jobs), and the heap
// then holds every running run's state and whatever the collector has
// not yet freed. retainedSizer walks the object graph reachable from a
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
// number (TestRunManyParallelMatchesSerial).
type retainedSizer struct {
	seen        map[sizeKey]seenAs
	spans       []span // every object and array reached
	extra       uint64 // maps and boxed values (no address)
	shared      map[reflect.Type]bool
	sharedSpans []span
}

// seenAs is what was counted of an object: for a slice's array the
// largest capacity counted and the elements walked.
type seenAs struct{ cap, walked int }

type sizeKey struct {
	p  uintptr
	id int32
}

// typeInfo is what the walk needs of a type, computed once.
type typeInfo struct {
	id    int32
	size  uintptr
	walk  bool // holds something the walk follows (pointer, slice, map, interface)
	kind  reflect.Kind
	elem  *typeInfo   // pointer, slice, array, map value
	key   *typeInfo   // map key
	field []fieldInfo // struct fields that need walking
}

type fieldInfo struct {
	index int
	t     *typeInfo
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
	ti := &typeInfo{id: typeInfos.next, size: t.Size(), kind: t.Kind()}
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
		ti.elem = infoLocked(t.Elem())
		ti.walk = t.Len() > 0 && needsWalk(t.Elem(), map[reflect.Type]bool{})
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if needsWalk(t.Field(i).Type, map[reflect.Type]bool{}) {
				ti.field = append(ti.field, fieldInfo{index: i, t: infoLocked(t.Field(i).Type)})
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

// newRetainedSizer returns a sizer that counts nothing the shared values
// reach: their types stop the walk, and memory inside what they reach (the
// image's text, symbol and table arrays) is subtracted from the union.
// Each shared value is a pointer that stays live while the sizer is used
// (a freed one's memory could be reused by the run); a typed nil names a
// shared type without walking anything.
func newRetainedSizer(shared ...any) *retainedSizer {
	z := &retainedSizer{seen: map[sizeKey]seenAs{}, shared: map[reflect.Type]bool{}}
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
		z.shared[reflect.TypeOf(s)] = true
	}
	return z
}

// Measure returns the bytes reachable from the roots, counted afresh.
func (z *retainedSizer) Measure(roots ...any) uint64 {
	clear(z.seen) // keeps the map's room: later samples do not regrow it
	z.spans, z.extra = z.spans[:0], 0
	for _, r := range roots {
		v := reflect.ValueOf(r)
		if v.IsValid() {
			z.value(v, infoOf(v.Type()))
		}
	}
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
func mergeSpans(sp []span) []span {
	out := slices.Clone(sp)
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.start, b.start) })
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

// overlap is the length of the intersection of two merged span lists.
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

// inShared reports whether p lies in memory the shared values reach.
func (z *retainedSizer) inShared(p uint64) bool {
	i, _ := slices.BinarySearchFunc(z.sharedSpans, p, func(s span, p uint64) int {
		switch {
		case s.end <= p:
			return -1
		case s.start > p:
			return 1
		}
		return 0
	})
	return i < len(z.sharedSpans) && z.sharedSpans[i].start <= p && p < z.sharedSpans[i].end
}

func (z *retainedSizer) value(v reflect.Value, ti *typeInfo) {
	if !ti.walk {
		return
	}
	switch ti.kind {
	case reflect.Pointer:
		if v.IsNil() || z.shared[v.Type()] || ti.elem.size == 0 {
			return
		}
		p := uint64(uintptr(v.UnsafePointer()))
		k := sizeKey{uintptr(p), ti.elem.id}
		if _, ok := z.seen[k]; ok || z.inShared(p) {
			return
		}
		z.seen[k] = seenAs{}
		z.spans = append(z.spans, span{p, p + uint64(ti.elem.size)})
		z.value(v.Elem(), ti.elem)
	case reflect.Slice:
		if v.IsNil() || v.Cap() == 0 || ti.elem.size == 0 {
			return
		}
		p := uint64(uintptr(v.UnsafePointer()))
		k := sizeKey{uintptr(p), ti.elem.id}
		if z.inShared(p) {
			return
		}
		was := z.seen[k]
		now := was
		if c := v.Cap(); c > was.cap {
			z.spans = append(z.spans, span{p, p + uint64(c)*uint64(ti.elem.size)})
			now.cap = c
		}
		n := v.Len()
		if !ti.elem.walk || n <= was.walked {
			if now != was {
				z.seen[k] = now
			}
			return
		}
		now.walked = n
		z.seen[k] = now
		for i := was.walked; i < n; i++ {
			z.value(v.Index(i), ti.elem)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		k := sizeKey{uintptr(v.UnsafePointer()), ti.id}
		if _, ok := z.seen[k]; ok {
			return
		}
		z.seen[k] = seenAs{}
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
