package main

import (
	"strings"
	"testing"
)

func TestCompareDesigns(t *testing.T) {
	out := mustKpsim(t, append([]string{"run", "many", "--compare-designs", "--patches", "series,kprobe-hash-bits=12"}, smallRun...)...)
	for _, want := range []string{"design", "kprobe-hash-bits=10", "kprobe-hash-bits=16", "kprobe-rhashtable", "series+kprobe-btree", "series+reservation-btree", "series+kprobe-hash-bits=12", "probe index B", "rhashtable.rehash.move", "maple.node"} {
		if !strings.Contains(out, want) {
			t.Errorf("--compare-designs output lacks %q", want)
		}
	}
	if strings.Contains(out, "DIFFERENT") {
		t.Errorf("a design changed a decision:\n%s", out)
	}
}

func TestDesignSwitchErrors(t *testing.T) {
	for _, spec := range []string{"kprobe-hash-bits=5", "kprobe-hash-bits=21", "kprobe-hash-bits=ten", "kprobe-hash-bits", "kprobe-btree", "reservation-btree", "kprobe-rhashtable,kprobe-hash-bits=8", "bug-index=2"} {
		_, errs, code := runKpsim(append([]string{"run", "many", "--patches", spec}, smallRun...)...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, spec) {
			t.Errorf("--patches %s: exit %d, stderr %q; want one line naming it, exit 2", spec, code, errs)
		}
	}
}
