package jumplabel

import "fmt"

// CheckIndex is the index-vs-table invariant the fault tests and the soak
// assert: with the late-init index built, jump_label_text_reserved answers
// every probe point around every core site (code-1 … code+5) exactly as
// the linear __jump_label_text_reserved walk of the core table does; with
// no index (switch off, allocation failed) there is nothing to compare and
// the linear walk is what runs. At most checkSites sites are checked, spread over the table (each
// check is a linear walk). Uncounted, simulator-side.
func (t *Table) CheckIndex() error {
	x := t.idx.Built()
	if x == nil {
		return nil
	}
	if x.Len() != len(t.core) {
		return fmt.Errorf("jump_label: index holds %d entries, the core table %d", x.Len(), len(t.core))
	}
	init := t.state().InitSitesCount()
	for i := 0; i < len(t.core); i += max(1, len(t.core)/checkSites) {
		for d := int64(-1); d <= 5; d++ {
			a := uint64(int64(t.core[i].code) + d)
			x, xerr := t.jumpLabelTextReservedIndexed(nil, a, a, init)
			y, yerr := t.jumpLabelTextReservedRange(nil, t.core, a, a, init)
			if x != y || (xerr == nil) != (yerr == nil) {
				return fmt.Errorf("jump_label: at %#x the index answers %v (%v), the linear walk %v (%v)", a, x, xerr, y, yerr)
			}
		}
	}
	return nil
}

// checkSites bounds CheckIndex's work: each probe point costs a linear walk.
const checkSites = 128
