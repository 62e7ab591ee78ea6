package kprobes

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestStorageChosenOnce: the switches and SimOptions pick kprobe_table's
// storage and the P4 tree once, when the registry is built; WrapTree
// wraps whichever tree was picked.
func TestStorageChosenOnce(t *testing.T) {
	tree := sim.Switches(0).With(sim.KprobeTree)
	type wrapped struct{ AddrTree }
	cases := []struct {
		name        string
		ss          sim.Switches
		o           SimOptions
		table, addr string
		hasTree     bool
	}{
		{"upstream", 0, SimOptions{}, "*kprobes.fastTable", "kprobes.noTree", false},
		{"upstream/walk", 0, SimOptions{Walk: true}, "*kprobes.kprobeTable", "kprobes.noTree", false},
		{"rbtree", tree, SimOptions{}, "*kprobes.fastTable", "*kprobes.rbIndex", true},
		{"btree/walk", tree.With(sim.KprobeBtree), SimOptions{Walk: true}, "*kprobes.kprobeTable", "kprobes.btIndex", true},
		{"rhashtable", tree.With(sim.KprobeRhashtable), SimOptions{Walk: true}, "kprobes.rhtTable", "*kprobes.rbIndex", true},
		{"wrapped", tree, SimOptions{WrapTree: func(t AddrTree) AddrTree { return wrapped{t} }}, "*kprobes.fastTable", "kprobes.wrapped", true},
		{"wrapped/none", 0, SimOptions{WrapTree: func(t AddrTree) AddrTree { return wrapped{t} }}, "*kprobes.fastTable", "kprobes.wrapped", false},
	}
	for _, tc := range cases {
		r := NewRegistryWith(tc.ss, tc.o)
		if got := fmt.Sprintf("%T", r.table); got != tc.table {
			t.Errorf("%s: table %s, want %s", tc.name, got, tc.table)
		}
		if got := fmt.Sprintf("%T", r.tree); got != tc.addr {
			t.Errorf("%s: tree %s, want %s", tc.name, got, tc.addr)
		}
		if r.HasTree() != tc.hasTree {
			t.Errorf("%s: HasTree %v, want %v", tc.name, r.HasTree(), tc.hasTree)
		}
	}
}

// TestIteratorsDoNotAllocate: the range and address iterators reach the
// tree through AddrTree and still hold their cursor without allocating,
// whichever tree the registry was built with; so does get_kprobe.
func TestIteratorsDoNotAllocate(t *testing.T) {
	tree := sim.Switches(0).With(sim.KprobeTree)
	for _, ss := range []sim.Switches{tree, tree.With(sim.KprobeBtree)} {
		r := NewRegistryFor(ss)
		for i := uint64(0); i < 1000; i++ {
			if err := r.Insert(&Kprobe{Addr: base + i*7}, nil); err != nil {
				t.Fatal(err)
			}
		}
		c := sim.NewCounters(false)
		seen := 0
		n := testing.AllocsPerRun(50, func() {
			it := r.OptimizedWindow(base+500, c)
			for it.Next() {
				seen++
			}
			ai := r.AddrIter(Jmp32InsnSize-1, c)
			for a := uint64(base); a < base+200; a++ {
				if _, err := ai.Query(a); err != nil {
					t.Fatal(err)
				}
			}
			_ = r.GetKprobe(base+14, c)
		})
		if n != 0 || seen == 0 {
			t.Errorf("%s: %v allocations a round (%d entries seen)", ss.Name(), n, seen)
		}
	}
}
