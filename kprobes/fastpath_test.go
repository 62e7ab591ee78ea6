package kprobes

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

// newPair builds the same structure twice: once in the straightforward
// form (SimOptions.Walk) and once in the fast form.
func newPair[T any](build func(walk bool) T) (walk, fast T) {
	return build(true), build(false)
}

// sameCounts compares the given ops (every op when none are given).
func sameCounts(t *rapid.T, step string, a, b *sim.Counters, ops ...sim.Op) {
	t.Helper()
	if len(ops) == 0 {
		for i := range sim.Ops() {
			ops = append(ops, sim.OpAt(i))
		}
	}
	for _, op := range ops {
		if x, y := a.Total(op), b.Total(op); x != y {
			t.Fatalf("%s: %s: walk counts %d, fast %d", step, op.Name(), x, y)
		}
	}
}

// The ops the registry and the slot cache count (checked after every
// step; every op is checked at the end).
var (
	registryOps = []sim.Op{opHashLookup, opHashVisit, opHashAdd, opHashDel, opHashReplace, opHashHeadL2, opHashHeadL3}
	slotOps     = []sim.Op{opSlotPage, opSlotScan, opSlotAlloc, opKmalloc, opSyncRCU, opPerfPoke}
)

// TestRegistryFastMatchesWalk: random insert, replace, delete and lookup
// sequences give the same answers and exactly the same counts (including
// kprobe.hash.visit: a hit's chain position, a miss's chain length) on the
// fast table as on the walked bucket slices, for several table sizes.
func TestRegistryFastMatchesWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bits := rapid.SampledFrom([]uint{1, 2, 6, 10}).Draw(t, "bits")
		var ss sim.Switches
		if bits != KprobeHashBits {
			ss = ss.WithHashBits(bits)
		}
		if rapid.Bool().Draw(t, "tree") {
			ss = ss.With(sim.KprobeTree)
		}
		rw, rf := newPair(func(walk bool) *Registry { return NewRegistryWith(ss, SimOptions{Walk: walk}) })
		cw, cf := sim.NewCounters(false), sim.NewCounters(false)
		// A small address space, so chains are long and hits frequent.
		addr := rapid.Custom(func(t *rapid.T) uint64 { return base + uint64(rapid.IntRange(0, 200).Draw(t, "off")) })
		live := map[uint64][2]*Kprobe{} // addr -> walk's and fast's entry
		for i := rapid.IntRange(1, 300).Draw(t, "steps"); i > 0; i-- {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0: // insert
				a := addr.Draw(t, "addr")
				pw, pf := &Kprobe{Addr: a}, &Kprobe{Addr: a}
				ew, ef := rw.Insert(pw, cw), rf.Insert(pf, cf)
				if ew != ef {
					t.Fatalf("insert %#x: walk %v, fast %v", a, ew, ef)
				}
				if ew == nil {
					live[a] = [2]*Kprobe{pw, pf}
				}
			case 1: // delete a live entry
				if len(live) == 0 {
					continue
				}
				keys := slices.Sorted(mapsKeys(live))
				a := rapid.SampledFrom(keys).Draw(t, "victim")
				if ew, ef := rw.Delete(live[a][0], cw), rf.Delete(live[a][1], cf); ew != nil || ef != nil {
					t.Fatalf("delete %#x: walk %v, fast %v", a, ew, ef)
				}
				delete(live, a)
			case 2: // replace (init_aggr_kprobe keeps the chain position)
				if len(live) == 0 {
					continue
				}
				keys := slices.Sorted(mapsKeys(live))
				a := rapid.SampledFrom(keys).Draw(t, "old")
				aw, af := &Kprobe{Addr: a}, &Kprobe{Addr: a}
				if ew, ef := rw.Replace(live[a][0], aw, cw), rf.Replace(live[a][1], af, cf); ew != nil || ef != nil {
					t.Fatalf("replace %#x: walk %v, fast %v", a, ew, ef)
				}
				live[a] = [2]*Kprobe{aw, af}
			case 3: // get_kprobe, hit or miss
				a := addr.Draw(t, "lookup")
				pw, pf := rw.GetKprobe(a, cw), rf.GetKprobe(a, cf)
				if (pw == nil) != (pf == nil) || (pw != nil && (pw != live[a][0] || pf != live[a][1])) {
					t.Fatalf("get_kprobe %#x: walk %v, fast %v", a, pw, pf)
				}
			}
			sameCounts(t, "registry", cw, cf, registryOps...)
			if rw.Len() != rf.Len() {
				t.Fatalf("len: walk %d, fast %d", rw.Len(), rf.Len())
			}
		}
		sameCounts(t, "registry", cw, cf)
		for b := 0; b < 1<<bits; b++ {
			if rw.ChainLen(b) != rf.ChainLen(b) {
				t.Fatalf("bucket %d: walk chain %d, fast %d", b, rw.ChainLen(b), rf.ChainLen(b))
			}
			cwb, cfb := rw.Chain(b), rf.Chain(b)
			for i := range cwb {
				if cwb[i].Addr != cfb[i].Addr {
					t.Fatalf("bucket %d position %d: walk %#x, fast %#x", b, i, cwb[i].Addr, cfb[i].Addr)
				}
			}
		}
		ew, ef := rw.Entries(), rf.Entries()
		if len(ew) != len(ef) {
			t.Fatalf("entries: walk %d, fast %d", len(ew), len(ef))
		}
		for i := range ew {
			if ew[i].Addr != ef[i].Addr {
				t.Fatalf("entry %d: walk %#x, fast %#x", i, ew[i].Addr, ef[i].Addr)
			}
		}
	})
}

func mapsKeys[V any](m map[uint64]V) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestSlotCacheFastMatchesWalk: random __get_insn_slot / __free_insn_slot
// sequences (clean and dirty frees, so collect_garbage_slots and page
// frees happen, injected page-allocation failures) give the same slots and
// exactly the same counts on the slot index as on the walked page list,
// for the insn-slot (256 per page) and optinsn-slot (34 per page) sizes
// and a tiny one.
func TestSlotCacheFastMatchesWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.SampledFrom([]int{16, 120, 1024, 4096}).Draw(t, "slot size")
		iw, ifast := newPair(func(walk bool) *insnCache { return newInsnCache("test", size, walk) })
		cw, cf := sim.NewCounters(false), sim.NewCounters(false)
		var held []uint64
		for i := rapid.IntRange(1, 700).Draw(t, "steps"); i > 0; i-- {
			if len(held) == 0 || rapid.IntRange(0, 9).Draw(t, "op") < 6 {
				var fw, ff *sim.Faults
				if rapid.IntRange(0, 30).Draw(t, "fail") == 0 {
					fw, ff = &sim.Faults{}, &sim.Faults{}
					fw.Set(FaultInsnSlot, 0)
					ff.Set(FaultInsnSlot, 0)
				}
				sw, okw := iw.getInsnSlot(cw, fw, FaultInsnSlot)
				sf, okf := ifast.getInsnSlot(cf, ff, FaultInsnSlot)
				if sw != sf || okw != okf {
					t.Fatalf("get: walk %#x,%v fast %#x,%v", sw, okw, sf, okf)
				}
				if okw {
					held = append(held, sw)
				}
			} else {
				j := rapid.IntRange(0, len(held)-1).Draw(t, "which")
				dirty := rapid.Bool().Draw(t, "dirty")
				iw.freeInsnSlot(cw, held[j], dirty)
				ifast.freeInsnSlot(cf, held[j], dirty)
				held = slices.Delete(held, j, j+1)
			}
			sameCounts(t, "slots", cw, cf, slotOps...)
			if iw.npages() != ifast.npages() || iw.nrGarbage != ifast.nrGarbage {
				t.Fatalf("pages walk %d fast %d, garbage walk %d fast %d", iw.npages(), ifast.npages(), iw.nrGarbage, ifast.nrGarbage)
			}
		}
		sameCounts(t, "slots", cw, cf)
	})
}

// TestSeqCount checks the Fenwick bookkeeping against a plain list.
func TestSeqCount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f seqCount
		var list []int // live seqs, oldest first
		for i := rapid.IntRange(1, 400).Draw(t, "steps"); i > 0; i-- {
			if len(list) == 0 || rapid.Bool().Draw(t, "join") {
				list = append(list, f.join())
			} else {
				j := rapid.IntRange(0, len(list)-1).Draw(t, "leave")
				f.leave(list[j])
				list = slices.Delete(list, j, j+1)
			}
			if f.n != len(list) {
				t.Fatalf("n %d, want %d", f.n, len(list))
			}
			want := 0
			if len(list) > 0 {
				want = list[len(list)-1]
			}
			if got := f.newest(); got != want {
				t.Fatalf("newest %d, want %d", got, want)
			}
			for j, s := range list {
				if got := f.position(s); got != len(list)-j {
					t.Fatalf("position of %d: %d, want %d", s, got, len(list)-j)
				}
			}
		}
	})
}

// TestAddrTable checks the open-addressing table against a Go map, with
// enough entries to grow it several times and address 0 among them.
func TestAddrTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tab, ref := newAddrTable(), map[uint64]fastEntry{}
		space := rapid.SampledFrom([]uint64{64, 5000, 1 << 40}).Draw(t, "space")
		for i := rapid.IntRange(1, 5000).Draw(t, "steps"); i > 0; i-- {
			a := rapid.Uint64Range(0, space).Draw(t, "addr") * 0x10
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				e := fastEntry{p: &Kprobe{Addr: a}, seq: i}
				tab.put(a, e)
				ref[a] = e
			case 1:
				tab.del(a)
				delete(ref, a)
			}
			got, ok := tab.get(a)
			want, wok := ref[a]
			if ok != wok || got != want {
				t.Fatalf("get %#x: %v,%v want %v,%v", a, got, ok, want, wok)
			}
		}
		n := 0
		tab.each(func(e fastEntry) {
			n++
			if ref[e.p.Addr] != e {
				t.Fatalf("each: stray entry %#x", e.p.Addr)
			}
		})
		if n != len(ref) {
			t.Fatalf("each: %d entries, want %d", n, len(ref))
		}
	})
}

// TestSlotGarbageOrder: collect_garbage_slots frees emptied pages head
// first and keeps the last page; which one survives decides the next
// slot's address. One slot per page makes it visible.
func TestSlotGarbageOrder(t *testing.T) {
	iw, ifast := newPair(func(walk bool) *insnCache { return newInsnCache("test", 4096, walk) })
	for _, ic := range []*insnCache{iw, ifast} {
		a, _ := ic.getInsnSlot(nil, nil, FaultInsnSlot)
		b, _ := ic.getInsnSlot(nil, nil, FaultInsnSlot)
		ic.freeInsnSlot(nil, a, true)
		ic.freeInsnSlot(nil, b, true) // more garbage than a page holds: collect
		if ic.npages() != 1 {
			t.Fatalf("%d pages after collecting, want 1", ic.npages())
		}
	}
	sw, _ := iw.getInsnSlot(nil, nil, FaultInsnSlot)
	sf, _ := ifast.getInsnSlot(nil, nil, FaultInsnSlot)
	if sw != insnPageBase || sf != sw {
		t.Fatalf("next slot: walk %#x, fast %#x; want the first page %#x (the head was freed)", sw, sf, uint64(insnPageBase))
	}
}
