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
