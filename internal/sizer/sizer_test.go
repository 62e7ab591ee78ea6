package sizer

import (
	"testing"
	"unsafe"
)

type node struct {
	next *node
	vals []uint64
	m    map[uint32]uint32
}

type holder struct {
	a, b *node
	s    []uint64
	t    *table
}

// table is the shared type: a value of it is never walked.
type table struct{ vals []uint64 }

// TestMeasure: objects count once however many pointers reach them, a
// slice's array counts at its capacity once however many subslices reach
// it, maps count entries, and shared values (their type, and memory they
// reach) are excluded.
func TestMeasure(t *testing.T) {
	nodeSize := uint64(unsafe.Sizeof(node{}))
	holderSize := uint64(unsafe.Sizeof(holder{}))
	shared := &table{vals: make([]uint64, 100)}
	arr := make([]uint64, 4, 10)
	one := &node{vals: arr}
	cases := []struct {
		name  string
		roots []any
		want  uint64
	}{
		{"nil", []any{(*node)(nil)}, 0},
		{"one node", []any{&node{}}, nodeSize},
		{"node with array", []any{&node{vals: make([]uint64, 3, 5)}}, nodeSize + 5*8},
		{"shared pointer twice", []any{&holder{a: one, b: one}}, holderSize + nodeSize + 10*8},
		{"subslices of one array", []any{&holder{a: one, s: arr[1:2]}}, holderSize + nodeSize + 10*8},
		{"map entries", []any{&node{m: map[uint32]uint32{1: 1, 2: 2}}}, nodeSize + 2*8},
		{"cycle", func() []any { n := &node{}; n.next = n; return []any{n} }(), nodeSize},
		{"shared excluded", []any{&holder{t: shared}}, holderSize},
		{"shared type excluded", []any{&holder{t: &table{vals: make([]uint64, 3)}}}, holderSize},
		{"array inside shared excluded", []any{&holder{s: shared.vals[10:20]}}, holderSize},
	}
	z := New(shared)
	for _, c := range cases {
		if got := z.Measure(c.roots...); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}

// TestMeasureRepeats: a second Measure of the same roots counts afresh.
func TestMeasureRepeats(t *testing.T) {
	z := New()
	n := &node{vals: make([]uint64, 7)}
	a, b := z.Measure(n), z.Measure(n)
	if a == 0 || a != b {
		t.Fatalf("measures %d then %d", a, b)
	}
}
