package kprobes

import (
	"bytes"
	"cmp"
	"slices"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// This file looks up what the wording of reasons and trail steps
// (trail_text.go) names: the symbol holding an address, the jump-label
// entries, the blacklist source. It is simulator work: it reads the image
// model directly (never the kernel services the pipeline counts through,
// and never with a counter), so a Reason costs no count and reads the
// same under every switch set.

// symbolOf returns the symbol holding addr as the reasons name it: the
// vmlinux or module text symbol whose [start, next symbol) contains addr,
// preferring a sized function among aliases.
func (kp *Kprobes) symbolOf(addr uint64) (string, uint64, bool) {
	k := kp.Image
	syms := k.Symbols
	if m := k.ModuleAt(addr); m != nil {
		syms = kp.moduleSymbols(m)
	}
	i := sort.Search(len(syms), func(i int) bool { return syms[i].Addr > addr }) - 1
	if i < 0 {
		return "", 0, false
	}
	at := syms[i].Addr
	best := i
	for j := i; j >= 0 && syms[j].Addr == at; j-- {
		if syms[j].IsText() && syms[j].Size > 0 {
			best = j
		}
	}
	return syms[best].Name, at, true
}

// moduleSymbols returns m's symbols in address order (cached).
func (kp *Kprobes) moduleSymbols(m *image.Module) []image.Symbol {
	if kp.whyCache.modSyms == nil {
		kp.whyCache.modSyms = map[*image.Module][]image.Symbol{}
	}
	s, ok := kp.whyCache.modSyms[m]
	if !ok {
		s = slices.Clone(m.Symbols)
		slices.SortStableFunc(s, func(a, b image.Symbol) int { return cmp.Compare(a.Addr, b.Addr) })
		kp.whyCache.modSyms[m] = s
	}
	return s
}

// fnOf returns the start of the symbol holding addr (addr itself if none).
func (kp *Kprobes) fnOf(addr uint64) uint64 {
	if _, start, ok := kp.symbolOf(addr); ok {
		return start
	}
	return addr
}

// whyCache holds the simulator's sorted views of the tables reasons name.
type whyCache struct {
	modSyms map[*image.Module][]image.Symbol
	jumps   map[*image.Module][]image.JumpEntry // nil key: vmlinux
}

// jumpSiteKind names a jump-label site by its bytes.
func jumpSiteKind(code []byte) (string, int) {
	switch {
	case len(code) >= 5 && bytes.Equal(code[:5], x86.NOP5[:]):
		return "NOP5", 5
	case len(code) >= 2 && bytes.Equal(code[:2], x86.NOP2[:]):
		return "NOP2", 2
	case len(code) >= 1 && code[0] == x86.JMP32InsnOpcode:
		return "JMP32", 5
	case len(code) >= 1 && code[0] == x86.JMP8InsnOpcode:
		return "JMP8", 2
	}
	return "unsized", 1
}

// jumpEntries returns the jump entries of vmlinux (m nil) or m, sorted by
// code address (cached).
func (kp *Kprobes) jumpEntries(m *image.Module) []image.JumpEntry {
	if kp.whyCache.jumps == nil {
		kp.whyCache.jumps = map[*image.Module][]image.JumpEntry{}
	}
	s, ok := kp.whyCache.jumps[m]
	if !ok {
		src := kp.Image.JumpEntries
		if m != nil {
			src = m.JumpEntries
		}
		s = slices.Clone(src)
		slices.SortStableFunc(s, func(a, b image.JumpEntry) int { return cmp.Compare(a.Code, b.Code) })
		kp.whyCache.jumps[m] = s
	}
	return s
}

// dataName names a data address by its vmlinux symbol, or "".
func (kp *Kprobes) dataName(addr uint64) string {
	syms := kp.Image.Symbols
	i := sort.Search(len(syms), func(i int) bool { return syms[i].Addr > addr }) - 1
	if i >= 0 && syms[i].Addr == addr {
		return syms[i].Name
	}
	return ""
}

// firstByName is kallsyms_lookup_name's answer for name (the lowest
// vmlinux address, then modules in load order), read from the image.
func (kp *Kprobes) firstByName(name string) (uint64, bool) {
	for _, s := range kp.Image.Symbols {
		if s.Name == name {
			return s.Addr, true
		}
	}
	for _, m := range kp.Image.Modules {
		for _, s := range m.Symbols {
			if s.Name == name {
				return s.Addr, true
			}
		}
	}
	return 0, false
}

// BlacklistDetail words which part of populate_kprobe_blacklist covers
// addr, as a refusal's reason does ("blacklisted (entry text)"); the
// decision itself is the blacklist's WithinKprobeBlacklist. Simulator
// work: no count (kpsim targets prints it).
//
// A module's .kprobes.text and .noinstr.text (add_module_kprobe_blacklist)
// are named here too; a refusal's reason still says only "blacklisted"
// for them, so that the reasons (and their digests) stay as they were.
func (kp *Kprobes) BlacklistDetail(addr uint64) string {
	d := kp.blacklistDetail(addr)
	if m := kp.Image.ModuleAt(addr); m != nil && d == "blacklisted" {
		for _, a := range []struct{ rng, section string }{{image.RangeKprobesText, ".kprobes.text"}, {image.RangeNoinstrText, ".noinstr.text"}} {
			if r, ok := m.Range(a.rng); ok && r.Start != 0 && r.Contains(addr) {
				return "blacklisted (" + a.section + " of module " + m.Name + ")"
			}
		}
	}
	return d
}

// blacklistClass is the first populate_kprobe_blacklist source covering
// addr, in the kernel's order ("" if none): arch_within_kprobe_blacklist's
// .kprobes.text, then the list's NOKPROBE_SYMBOL entries, the .kprobes.text
// and .noinstr.text symbols, the entry text, and module entries.
func (kp *Kprobes) blacklistClass(addr uint64) string {
	k := kp.Image
	if r, ok := k.Range(image.RangeKprobesText); ok && r.Contains(addr) {
		return ".kprobes.text"
	}
	_, start, ok := kp.symbolOf(addr)
	if m := k.ModuleAt(addr); m != nil {
		if ok && slices.Contains(m.Blacklist, start) {
			return "NOKPROBE_SYMBOL in module " + m.Name
		}
		return ""
	}
	if ok && slices.Contains(k.Blacklist, start) {
		return "NOKPROBE_SYMBOL"
	}
	if r, ok := k.Range(image.RangeNoinstrText); ok && r.Contains(addr) {
		return ".noinstr.text"
	}
	if r, ok := k.Range(image.RangeEntryText); ok && r.Contains(addr) {
		return "entry text"
	}
	return ""
}
