package image

import (
	"fmt"
	"sort"
)

// Validate checks the invariants the kernel guarantees and the models rely
// on: regions do not overlap, symbols are sorted by address, every table
// entry points into text, the jump table is in jump_label_init order, the
// static-call sites in static_call_init order, __mcount_loc and the
// exception table sorted. A loader calls it so that a malformed input is a
// clear error here, not a wrong answer later.
func (k *Kernel) Validate() error {
	var regs []*Region
	regs = append(regs, k.Regions...)
	for _, m := range k.Modules {
		if m.Text != nil {
			regs = append(regs, m.Text)
		}
		if m.Init != nil {
			regs = append(regs, m.Init)
		}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].Start < regs[j].Start })
	for i := 1; i < len(regs); i++ {
		if regs[i].Start < regs[i-1].End() {
			return fmt.Errorf("image %s: text regions %s and %s overlap", k.Name, regs[i-1].Name, regs[i].Name)
		}
	}
	if !sort.SliceIsSorted(k.Symbols, func(i, j int) bool { return k.Symbols[i].Addr < k.Symbols[j].Addr }) {
		return fmt.Errorf("image %s: symbols are not sorted by address", k.Name)
	}
	if err := checkJumpTable(k, "vmlinux", k.JumpEntries, false); err != nil {
		return err
	}
	if err := checkStaticCalls(k, "vmlinux", k.StaticCallSites, false); err != nil {
		return err
	}
	for i, b := range k.BugEntries {
		if k.RegionAt(b.Addr) == nil {
			return fmt.Errorf("image %s: bug entry %d at %#x is outside any text", k.Name, i, b.Addr)
		}
	}
	if err := checkSorted(k, "__mcount_loc", k.McountLocs); err != nil {
		return err
	}
	for i := 1; i < len(k.ExTable); i++ {
		if k.ExTable[i].Insn < k.ExTable[i-1].Insn {
			return fmt.Errorf("image %s: exception table entry %d (%#x) is below its predecessor: the table must be sorted", k.Name, i, k.ExTable[i].Insn)
		}
	}
	for _, m := range k.Modules {
		// A LIVE module's init text is freed; its init sites stay in the
		// tables (marked init, never patched again) and point at nothing.
		freed := m.Init == nil
		if err := checkJumpTable(k, "module "+m.Name, m.JumpEntries, freed); err != nil {
			return err
		}
		if err := checkStaticCalls(k, "module "+m.Name, m.StaticCallSites, freed); err != nil {
			return err
		}
		for i, j := range m.JumpEntries {
			if !m.Contains(j.Code) && !(freed && j.Init) {
				return fmt.Errorf("image %s: module %s jump entry %d at %#x is outside the module", k.Name, m.Name, i, j.Code)
			}
		}
	}
	return nil
}

// checkJumpTable: ordered by (key, code) as jump_label_sort_entries leaves
// it, codes inside text, no two sites overlapping (a site is at most 5 bytes).
func checkJumpTable(k *Kernel, owner string, e []JumpEntry, freedInit bool) error {
	for i := range e {
		if k.RegionAt(e[i].Code) == nil && !(freedInit && e[i].Init) {
			return fmt.Errorf("image %s: %s jump entry %d at %#x is outside any text", k.Name, owner, i, e[i].Code)
		}
		if i > 0 {
			a, b := e[i-1], e[i]
			if a.Key > b.Key || (a.Key == b.Key && a.Code >= b.Code) {
				return fmt.Errorf("image %s: %s jump table not in (key, code) order at entry %d (jump_label_sort_entries guarantees it)", k.Name, owner, i)
			}
		}
	}
	codes := make([]uint64, len(e))
	for i := range e {
		codes[i] = e[i].Code
	}
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	for i := 1; i < len(codes); i++ {
		if codes[i]-codes[i-1] < 2 {
			return fmt.Errorf("image %s: %s jump sites at %#x and %#x overlap", k.Name, owner, codes[i-1], codes[i])
		}
	}
	return nil
}

func checkStaticCalls(k *Kernel, owner string, s []StaticCallSite, freedInit bool) error {
	for i := range s {
		if k.RegionAt(s[i].Addr) == nil && !(freedInit && s[i].Init) {
			return fmt.Errorf("image %s: %s static-call site %d at %#x is outside any text", k.Name, owner, i, s[i].Addr)
		}
		if i > 0 && s[i-1].Key > s[i].Key {
			return fmt.Errorf("image %s: %s static-call sites not in key order at site %d (static_call_sort_entries guarantees it)", k.Name, owner, i)
		}
	}
	return nil
}

func checkSorted(k *Kernel, what string, a []uint64) error {
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] {
			return fmt.Errorf("image %s: %s entry %d (%#x) is below its predecessor: the table must be sorted", k.Name, what, i, a[i])
		}
	}
	return nil
}
