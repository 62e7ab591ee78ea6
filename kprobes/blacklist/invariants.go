package blacklist

import "fmt"

// CheckIndex: with the late-init index built, the binary search over the
// merged vmlinux ranges answers at every entry's start-1, start, end-1 and
// end exactly as the walk of those vmlinux entries on the list does, and
// the index covers exactly the leading vmlinux entries (module entries
// stay on the list, walked after the search). At most checkEntries entries are checked, spread over
// the list. Uncounted, simulator-side.
func (l *List) CheckIndex() error {
	if l.idx.Built() == nil {
		return nil
	}
	n := 0
	for n < len(l.entries) && l.entries[n].Module == nil {
		n++
	}
	if l.covered != n {
		return fmt.Errorf("kprobe_blacklist: the index covers %d entries, the list starts with %d vmlinux ones", l.covered, n)
	}
	core := l.entries[:n]
	walk := func(a uint64) bool {
		for _, e := range core {
			if a >= e.Start && a < e.End {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(core); i += max(1, len(core)/checkEntries) {
		e := core[i]
		for _, a := range []uint64{e.Start - 1, e.Start, e.End - 1, e.End} {
			if got, want := l.searchIndex(nil, a), walk(a); got != want {
				return fmt.Errorf("kprobe_blacklist: at %#x the index answers %v, the list walk %v", a, got, want)
			}
		}
	}
	return nil
}

// checkEntries bounds CheckIndex's work: each probe point costs a list walk.
const checkEntries = 256
