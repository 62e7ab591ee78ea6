package libbpf

// Weights of the user-space ops, in cycles: a C benchmark of the same glibc
// calls on the build machine (gcc -O2, glibc 2.36; program in the bpf
// branch notes), ns × 2.6 GHz (the reference clock of every kpsim weight).
const (
	wFscanfKallsyms = 429
	rFscanfKallsyms = "C benchmark fscanf(\"%llx %c %499s%*[^\\n]\\n\") over a 150k-line kallsyms-like file: 165 ns/line ≈ 429 cycles (includes the stdio buffer refills' memcpy, not the read(2)s)"
	wFscanfName     = 247
	rFscanfName     = "C benchmark fscanf(\"%499s%*[^\\n]\\n\"): 95 ns/line ≈ 247 cycles"
	wFscanfAddrName = 416
	rFscanfAddrName = "C benchmark fscanf(\"%llx %499s%*[^\\n]\\n\"): 160 ns/line ≈ 416 cycles"
	wGlobStep       = 2
	rGlobStep       = "as kallsyms.chr_cmp (BenchmarkWeightCChrCmpHot, 0.8 ns ≈ 2 cycles): one byte compare in a hot loop"
	wStrdup         = 85
	rStrdup         = "C benchmark strdup of an 8-31 char name: 33 ns ≈ 85 cycles"
	wQsortCmp       = 30
	rQsortCmp       = "C benchmark qsort(3) of 150k strdup'd names with strcmp: 11.5 ns per comparison (n·log2 n) ≈ 30 cycles"
	wBsearchStep    = 45
	rBsearchStep    = "C benchmark bsearch(3) over 150k sorted names, random keys: 17.5 ns per step ≈ 45 cycles (scattered strdup'd strings: cache misses)"
	wAppend         = 3
	rAppend         = "hardware fact: an 8-byte store plus the capacity test; libbpf_ensure_mem's geometric realloc amortises to a few cycles per element"
	wFopen          = 3900
	rFopen          = "hardware fact: openat (path walk of 3-5 components, struct file, seq_open's kmalloc) + fclose ≈ 1.5 µs at 2.6 GHz, of the order of 20 syscall round trips (65 ns each, C benchmark)"
	wSecParse       = 300
	rSecParse       = "hardware fact: strncmp against ~60 section_defs prefixes and one sscanf of a short spec (≈ 100 ns, an fscanf line of the C benchmark)"
)
