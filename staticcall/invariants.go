package staticcall

import "fmt"

// CheckIndex: with the late-init index built, static_call_text_reserved
// answers every probe point around every core site (addr-1 … addr+5) as
// the linear __static_call_text_reserved walk does. Nothing to compare
// without an index. At most checkSites sites are checked, spread over the table (each
// check is a linear walk). Uncounted, simulator-side.
func (t *Table) CheckIndex() error {
	x := t.idx.Built()
	if x == nil {
		return nil
	}
	if x.Len() != len(t.core) {
		return fmt.Errorf("static_call: index holds %d sites, the core table %d", x.Len(), len(t.core))
	}
	init := t.state().InitSitesCount()
	for i := 0; i < len(t.core); i += max(1, len(t.core)/checkSites) {
		for d := int64(-1); d <= CallInsnSize; d++ {
			a := uint64(int64(t.core[i].addr) + d)
			if x, y := t.staticCallTextReservedIndexed(nil, a, a, init), staticCallTextReservedRange(nil, t.core, a, a, init); x != y {
				return fmt.Errorf("static_call: at %#x the index answers %v, the linear walk %v", a, x, y)
			}
		}
	}
	return nil
}

// checkSites bounds CheckIndex's work: each probe point costs a linear walk.
const checkSites = 128
