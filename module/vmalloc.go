package module

import "slices"

// PMDSize is the x86-64 PMD size: a huge vmalloc mapping's size and
// alignment.
const PMDSize = 2 << 20

// span is [start, end).
type span struct{ start, end uint64 }

// vmapSpace is the module area's vmap space as the loader sees it: the
// busy ranges, sorted and disjoint. Nothing is ever returned to it: vfree
// frees lazily (purge_vmap_area_lazy runs only past lazy_max_pages), so
// a freed area stays unusable for the loads kpsim models.
type vmapSpace struct{ busy []span }

// alloc finds the lowest address in [vstart, vend) aligned to align
// where size bytes fit between the busy ranges, and marks it busy.
//
// Models mm/vmalloc.c:alloc_vmap_area → __alloc_vmap_area →
// find_vmap_lowest_match (the lowest fitting free block, its start
// aligned up).
func (v *vmapSpace) alloc(size, align, vstart, vend uint64) (uint64, bool) {
	if size == 0 || vstart >= vend || size > vend-vstart {
		return 0, false
	}
	try := func(lo, hi uint64) (uint64, bool) { // the free gap [lo, hi)
		a := alignUp(max(lo, vstart), align)
		if a < lo || a >= hi || size > hi-a || a+size > vend {
			return 0, false
		}
		return a, true
	}
	lo := uint64(0)
	for i, b := range v.busy {
		if a, ok := try(lo, b.start); ok {
			v.busy = slices.Insert(v.busy, i, span{a, a + size})
			return a, true
		}
		lo = b.end
	}
	if a, ok := try(lo, ^uint64(0)); ok {
		v.busy = append(v.busy, span{a, a + size})
		return a, true
	}
	return 0, false
}

// reserve marks [start, end) busy (modules already in the image).
func (v *vmapSpace) reserve(start, end uint64) {
	v.busy = append(v.busy, span{start, end})
	slices.SortFunc(v.busy, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	out := v.busy[:0]
	for _, s := range v.busy {
		if n := len(out); n > 0 && s.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, s.end)
			continue
		}
		out = append(out, s)
	}
	v.busy = out
}

// vmalloc allocates size bytes (page aligned) in the module area with its
// guard page: the area is size + PAGE_SIZE unless VM_NO_GUARD, aligned to
// align. It returns the block's address.
//
// Models mm/vmalloc.c:__vmalloc_node_range → __get_vm_area_node.
func (v *vmapSpace) vmalloc(size, align, vstart, vend uint64) (uint64, bool) {
	return v.alloc(pageAlign(size)+PageSize, align, vstart, vend)
}

// execmemCache is the ROX cache module text comes from when the
// EXECMEM_MODULE_TEXT range has EXECMEM_ROX_CACHE: PMD-sized huge
// vmallocs carved up first fit by address (free_areas), never with guard
// pages between the pieces (busy_areas).
type execmemCache struct {
	free []span // free_areas, sorted, merged
	busy map[uint64]uint64
}

// alloc takes size bytes from the first free area (by address) that
// holds them inside [vstart, vend).
//
// Models mm/execmem.c:execmem_cache_alloc_locked (within_range:
// addr + size < range->end).
func (c *execmemCache) alloc(size, vstart, vend uint64) (uint64, bool) {
	for i, f := range c.free {
		if f.end-f.start < size || f.start < vstart || f.start+size >= vend {
			continue
		}
		a := f.start
		if f.end-f.start == size {
			c.free = slices.Delete(c.free, i, i+1)
		} else {
			c.free[i].start += size
		}
		if c.busy == nil {
			c.busy = map[uint64]uint64{}
		}
		c.busy[a] = size
		return a, true
	}
	return 0, false
}

// add returns [a, a+size) to the free areas, merged with its neighbours.
//
// Models mm/execmem.c:execmem_cache_add_locked.
func (c *execmemCache) add(a, size uint64) {
	i, _ := slices.BinarySearchFunc(c.free, a, func(s span, a uint64) int {
		switch {
		case s.start < a:
			return -1
		case s.start > a:
			return 1
		}
		return 0
	})
	c.free = slices.Insert(c.free, i, span{a, a + size})
	if i+1 < len(c.free) && c.free[i].end == c.free[i+1].start {
		c.free[i].end = c.free[i+1].end
		c.free = slices.Delete(c.free, i+1, i+2)
	}
	if i > 0 && c.free[i-1].end == c.free[i].start {
		c.free[i-1].end = c.free[i].end
		c.free = slices.Delete(c.free, i, i+1)
	}
}

// populateAlloc vmallocs a new piece of the cache for a request of size
// bytes: size rounded up to PMD_SIZE, PMD-aligned (VM_ALLOW_HUGE_VMAP),
// and takes the request from it.
//
// Models mm/execmem.c:execmem_cache_populate_alloc (the fallback to a
// size-byte vmalloc when the huge one fails is kept).
func (c *execmemCache) populateAlloc(v *vmapSpace, size, vstart, vend uint64) (uint64, bool) {
	allocSize := alignUp(size, PMDSize)
	p, ok := v.alloc(allocSize+PageSize, PMDSize, vstart, vend)
	if !ok {
		allocSize = size
		if p, ok = v.vmalloc(size, PageSize, vstart, vend); !ok {
			return 0, false
		}
	}
	c.add(p, allocSize)
	return c.alloc(size, vstart, vend)
}

// free returns an allocation to the cache and then drops every free area
// that is whole PMDs, PMD-aligned (execmem_cache_clean, whose vfree is
// lazy: the vmap range stays busy). It reports whether ptr came from the
// cache.
//
// Models mm/execmem.c:execmem_cache_free → __execmem_cache_free, and the
// execmem_cache_clean work it schedules.
func (c *execmemCache) freeArea(ptr uint64) bool {
	size, ok := c.busy[ptr]
	if !ok {
		return false
	}
	delete(c.busy, ptr)
	c.add(ptr, size)
	out := c.free[:0]
	for _, f := range c.free {
		if (f.end-f.start)%PMDSize == 0 && f.start%PMDSize == 0 {
			continue
		}
		out = append(out, f)
	}
	c.free = out
	return true
}
