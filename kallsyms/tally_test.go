package kallsyms

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/kpsim/kpsim/sim"
)

// TestTallyFieldsMatchOps: each tally field flushes to its own op, and a
// walk's tally stored in a sim.Tally (toTally) replays (addTally) to the
// same fields, in any order.
func TestTallyFieldsMatchOps(t *testing.T) {
	want := map[string]sim.Op{
		"hop": OpHop, "tok": OpTok, "chrOut": OpChrOut, "chrCmp": OpChrCmp, "ld3": OpLd3, "ld4": OpLd4,
		"addr": OpAddr, "cmp": OpCmp, "visit": OpVisit, "bytes": OpBytes, "addrProbe": OpAddrProbe,
		"aliasStep": OpAliasStep, "modSym": OpModSym, "modLookup": OpModLookup, "streamTok": OpStreamTok,
	}
	rt := reflect.TypeOf(tally{})
	if rt.NumField() != len(want) {
		t.Fatalf("tally has %d fields, the test knows %d", rt.NumField(), len(want))
	}
	var tl tally
	for i := range rt.NumField() {
		*(*uint64)(unsafe.Add(unsafe.Pointer(&tl), rt.Field(i).Offset)) = uint64(i + 1)
	}
	c := sim.NewCounters(false)
	tl.flush(c)
	for i := range rt.NumField() {
		op, ok := want[rt.Field(i).Name]
		if !ok {
			t.Fatalf("field %s unknown to the test", rt.Field(i).Name)
		}
		if got := c.Total(op); got != uint64(i+1) {
			t.Errorf("field %s: %s counted %d, want %d", rt.Field(i).Name, op.Name(), got, i+1)
		}
	}

	var st sim.Tally
	tl.toTally(&st)
	var back tally
	back.addTally(&st)
	if back != tl {
		t.Fatalf("replay %+v, want %+v", back, tl)
	}
	// Out of field order (and spilled past the inline counts).
	var rev sim.Tally
	for i := len(tallyOps) - 1; i >= 0; i-- {
		rev.Add(tallyOps[i], tl.counts()[i])
	}
	back = tally{}
	back.addTally(&rev)
	if back != tl {
		t.Fatalf("reversed replay %+v, want %+v", back, tl)
	}
}
