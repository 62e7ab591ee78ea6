package sim

import (
	"strings"
	"testing"
)

func TestParseDesignSwitches(t *testing.T) {
	for _, tc := range []struct {
		in, err  string
		names    string
		hashBits uint
	}{
		{"kprobe-hash-bits=12", "", "kprobe-hash-bits=12", 12},
		{"kprobe-hash-bits=6", "", "kprobe-hash-bits=6", 6},
		{"kprobe-hash-bits=20", "", "kprobe-hash-bits=20", 20},
		{"series,kprobe-hash-bits=16", "", "series+kprobe-hash-bits=16", 16},
		{"kprobe-hash-bits=8,kprobe-hash-bits=9", "", "kprobe-hash-bits=9", 9},
		{"kprobe-hash-bits=5", "B must be an integer in 6..20", "", 0},
		{"kprobe-hash-bits=21", "B must be an integer in 6..20", "", 0},
		{"kprobe-hash-bits=x", "B must be an integer in 6..20", "", 0},
		{"kprobe-hash-bits=", "B must be an integer in 6..20", "", 0},
		{"kprobe-hash-bits", "needs a value: kprobe-hash-bits=B", "", 0},
		{"bug-index=3", "takes no value", "", 0},
		{"kprobe-rhashtable", "", "kprobe-rhashtable", 6},
		{"kprobe-rhashtable,kprobe-hash-bits=10", "alternatives to each other", "", 0},
		{"kprobe-btree", "kprobe-btree requires kprobe-tree", "", 0},
		{"series,kprobe-btree", "", "series+kprobe-btree", 6},
		{"reservation-btree", "needs one of static-call-index", "", 0},
		{"series,reservation-btree", "", "series+reservation-btree", 6},
		{"bug-index,reservation-btree", "", "bug-index+reservation-btree", 6},
	} {
		ss, err := ParseSwitches(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSwitches(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseSwitches(%q): error is more than one line", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSwitches(%q): %v", tc.in, err)
			continue
		}
		if got := ss.Name(); got != tc.names {
			t.Errorf("ParseSwitches(%q).Name() = %q, want %q", tc.in, got, tc.names)
		}
		if got := ss.HashBits(); got != tc.hashBits {
			t.Errorf("ParseSwitches(%q).HashBits() = %d, want %d", tc.in, got, tc.hashBits)
		}
	}
}

func TestDesignSwitchesOutsidePresets(t *testing.T) {
	for _, s := range DesignSwitches() {
		for _, p := range Presets() {
			if p.Set.Has(s) {
				t.Errorf("preset %s holds the alternative design %s", p.Name, s)
			}
		}
	}
	if len(DesignSwitches()) != 4 {
		t.Errorf("%d design switches, want 4", len(DesignSwitches()))
	}
	// With gives the documented default B; Without drops the value too.
	ss := Switches(0).With(KprobeHashBits)
	if ss.HashBits() != DefaultHashBits || ss.Validate() != nil {
		t.Errorf("With(kprobe-hash-bits): B = %d, %v", ss.HashBits(), ss.Validate())
	}
	if back := ss.Without(KprobeHashBits); back != 0 || back.HashBits() != MinHashBits {
		t.Errorf("Without(kprobe-hash-bits) = %#x, B %d", uint64(back), back.HashBits())
	}
	// A value is kept by With and replaced by WithHashBits.
	ss = Switches(0).WithHashBits(14).With(KprobeHashBits).With(BugIndex)
	if ss.HashBits() != 14 || !ss.Has(BugIndex) {
		t.Errorf("With after WithHashBits: B = %d", ss.HashBits())
	}
	if Switches(0).WithHashBits(30).Validate() == nil {
		t.Error("B = 30 validated")
	}
	// reservation-btree alone closes over every index it can change.
	cl := ReservationBtree.Closure()
	for _, s := range []Switch{StaticCallIndex, JumpLabelIndex, BugIndex, BlacklistIndex, ReservationBtree} {
		if !cl.Has(s) {
			t.Errorf("closure of reservation-btree lacks %s", s)
		}
	}
	if cl.Validate() != nil || KprobeBtree.Closure() != setOf(KprobeTree, KprobeBtree) {
		t.Errorf("closures: %v, %v", cl.Validate(), KprobeBtree.Closure().Names())
	}
}
