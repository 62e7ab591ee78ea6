package main

import (
	"strings"
	"testing"
)

func TestSoakBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--steps", "0"},
		{"--steps", "x"},
		{"--sets", "0"},
		{"--sets", "2", "--patches", "series"},
		{"--patches", "iter-get-optimized"},
		{"--patches", "none"},
		{"--index-faults", "101"},
		{"--replay", "testdata/nope.txt"},
		{"--replay", "f.txt", "--steps", "10"},
		{"extra"},
	} {
		_, errs, code := runKpsim(append([]string{"soak"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "kpsim soak: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func TestSoakSmall(t *testing.T) {
	out := mustKpsim(t, "soak", "--steps", "300", "--campaign-steps", "150", "--patches", "series", "--patches", "kprobe-rhashtable")
	for _, want := range []string{"seed 1,", "steps run:        300", "divergences:      0", "wall time:", "kprobe-rhashtable", "steps by kind", "accepted"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSoakReplay(t *testing.T) {
	out, errs, code := runKpsim("soak", "--replay", "../../scenarios/soak/testdata/soak/mutant-tree-range-query.txt")
	if code != 0 || !strings.Contains(out, "no divergence") {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
}
