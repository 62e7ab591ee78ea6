package lib

import (
	"errors"
	"fmt"
	"testing"
)

// TestTableError: a table's wording of a shared reason matches both, keeps
// its own message, and survives wrapping.
func TestTableError(t *testing.T) {
	for _, kind := range []error{ErrNotLateInit, ErrIndexOff, ErrIndexAlloc, ErrBadTable} {
		own := TableError(kind, "tbl: "+kind.Error())
		wrapped := fmt.Errorf("%w: detail", own)
		if !errors.Is(own, kind) || !errors.Is(wrapped, kind) || !errors.Is(wrapped, own) {
			t.Errorf("%v: errors.Is does not see through the table's wording", kind)
		}
		if own.Error() != "tbl: "+kind.Error() {
			t.Errorf("message %q", own.Error())
		}
		for _, other := range []error{ErrNotLateInit, ErrIndexOff, ErrIndexAlloc, ErrBadTable} {
			if other != kind && errors.Is(own, other) {
				t.Errorf("%v matches %v", own, other)
			}
		}
	}
}
