package libbpf

import "sort"

// GlobMatch models libbpf's glob_match(str, pat) (adapted from
// tools/perf/util/string.c): '?' matches one character, '*' any run, the
// rest literally; a trailing '*' matches everything. steps counts the
// character steps, recursion included.
func GlobMatch(str, pat string) (bool, uint64) {
	var steps uint64
	m := globMatch(str, pat, &steps)
	return m, steps
}

func globMatch(str, pat string, steps *uint64) bool {
	s, p := 0, 0
	for s < len(str) && p < len(pat) && pat[p] != '*' {
		*steps++
		if pat[p] == '?' {
			s++
			p++
			continue
		}
		if str[s] != pat[p] {
			return false
		}
		s++
		p++
	}
	if p < len(pat) && pat[p] == '*' {
		for p < len(pat) && pat[p] == '*' {
			p++
		}
		if p == len(pat) {
			return true
		}
		for s < len(str) {
			*steps++
			if globMatch(str[s:], pat[p:], steps) {
				return true
			}
			s++
		}
	}
	return s == len(str) && p == len(pat)
}

// qsortStrings sorts names (glibc qsort is a merge sort for arrays that
// fit its buffer; sort.Strings' comparison count stands in for it) and
// returns the comparisons made.
func qsortStrings(names []string) uint64 {
	var n uint64
	sort.Slice(names, func(i, j int) bool { n++; return names[i] < names[j] })
	return n
}

// bsearchStrings is bsearch(3) with strcmp over sorted names.
func bsearchStrings(sorted []string, key string) (bool, uint64) {
	var steps uint64
	lo, hi := 0, len(sorted)
	for lo < hi {
		mid := lo + (hi-lo)/2
		steps++
		switch {
		case key < sorted[mid]:
			hi = mid
		case key > sorted[mid]:
			lo = mid + 1
		default:
			return true, steps
		}
	}
	return false, steps
}
