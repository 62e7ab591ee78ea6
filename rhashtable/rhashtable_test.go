package rhashtable

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

type obj struct{ addr uint64 }

func keyOf(o *obj) uint64 { return o.addr }

func total(c *sim.Counters, name string) uint64 {
	op, ok := sim.LookupOp(name)
	if !ok {
		panic("no op " + name)
	}
	return c.Total(op)
}

// kernelSrc is the Linux 6.1 source tree: KPSIM_LINUX_SRC, else the
// machines' extracted Debian linux-source-6.1.
var kernelSrc = func() string {
	if s := os.Getenv("KPSIM_LINUX_SRC"); s != "" {
		return s
	}
	return "/work/src/usr/src/linux-source-6.1"
}()

// TestJhash2MatchesKernel compiles include/linux/jhash.h from the kernel
// source with the system C compiler and compares jhash2 of 8-byte keys.
// Skips without a compiler or the source.
func TestJhash2MatchesKernel(t *testing.T) {
	hdr, err := os.ReadFile(filepath.Join(kernelSrc, "include/linux/jhash.h"))
	if err != nil {
		t.Skip("no kernel source:", err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	body := regexp.MustCompile(`(?m)^#include .*$`).ReplaceAll(hdr, nil)
	prog := `#include <stdint.h>
#include <stdio.h>
typedef uint32_t u32; typedef uint16_t u16; typedef uint8_t u8;
static inline u32 rol32(u32 w, unsigned int s) { return (w << s) | (w >> ((-s) & 31)); }
#define __get_unaligned_cpu32(p) (*(const u32 *)(p))
#define fallthrough __attribute__((__fallthrough__))
` + string(body) + `
int main(void) {
	unsigned long long k; unsigned int seed;
	while (scanf("%llx %x", &k, &seed) == 2) {
		u32 w[2] = { (u32)k, (u32)(k >> 32) };
		printf("%08x\n", jhash2(w, 2, seed));
	}
	return 0;
}
`
	src := filepath.Join(dir, "jhash.c")
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "jhash")
	if out, err := exec.Command(cc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	type kv struct {
		k    uint64
		seed uint32
	}
	var in strings.Builder
	var cases []kv
	for i := uint64(0); i < 200; i++ {
		c := kv{0xffffffff81000000 + i*0x1234567, uint32(i * 2654435761)}
		cases = append(cases, c)
		fmt.Fprintf(&in, "%x %x\n", c.k, c.seed)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(bytes.TrimSpace(out)))
	if len(lines) != len(cases) {
		t.Fatalf("%d hashes from C, want %d", len(lines), len(cases))
	}
	for i, c := range cases {
		want, _ := strconv.ParseUint(lines[i], 16, 32)
		if got := Jhash2Key(c.k, c.seed); got != uint32(want) {
			t.Fatalf("jhash2(%#x, seed %#x) = %#x, kernel %#x", c.k, c.seed, got, want)
		}
	}
}

// TestGrowthAt75Percent: the default table has 64 buckets; the insert
// that makes nelems exceed 48 doubles it, rehashing every entry once
// (moves = nelems, buckets walked = the old size, re-walks = sum of
// L(L-1)/2 over the old chains).
func TestGrowthAt75Percent(t *testing.T) {
	c := sim.NewCounters(false)
	tb := New(KprobeParams, keyOf, nil, 1, c)
	if tb.Size() != HashDefaultSize {
		t.Fatalf("initial size %d, want %d", tb.Size(), HashDefaultSize)
	}
	for i := 0; i < 48; i++ {
		if err := tb.Insert(&obj{0xffffffff81000000 + uint64(i)*64}, c); err != nil {
			t.Fatal(err)
		}
	}
	if tb.Size() != 64 || tb.Grows != 0 {
		t.Fatalf("48 entries: size %d, %d grows", tb.Size(), tb.Grows)
	}
	var rewalks uint64
	for b := 0; b < 64; b++ {
		l := uint64(tb.ChainLen(b))
		rewalks += l * (l - min(l, 1)) / 2
	}
	// The 49th goes into its chain before the rehash.
	o := &obj{0xffffffff81000000 + 48*64}
	l49 := uint64(tb.ChainLen(int(tb.tbl.bucket(o.addr))))
	rewalks += (l49 + 1) * l49 / 2
	rewalks -= l49 * (l49 - min(l49, 1)) / 2
	if err := tb.Insert(o, c); err != nil {
		t.Fatal(err)
	}
	if tb.Size() != 128 || tb.Grows != 1 {
		t.Fatalf("49 entries: size %d, %d grows", tb.Size(), tb.Grows)
	}
	if m, b, v := total(c, "rhashtable.rehash.move"), total(c, "rhashtable.rehash.bucket"), total(c, "rhashtable.rehash.visit"); m != 49 || b != 64 || v != rewalks {
		t.Fatalf("rehash: %d moves, %d buckets, %d re-walks; want 49, 64, %d", m, b, v, rewalks)
	}
	if got := total(c, "rhashtable.worker"); got != 1 {
		t.Fatalf("%d worker runs", got)
	}
	if tb.Bytes() != RhashtableBytes+BucketTableHeaderBytes+128*8 || tb.PeakBytes() != tb.Bytes()+BucketTableHeaderBytes+64*8 {
		t.Fatalf("bytes %d peak %d", tb.Bytes(), tb.PeakBytes())
	}
}

// TestShrinkBelow30Percent: with automatic_shrinking, removals that leave
// fewer than 3/10 of the buckets used shrink the table to
// roundup_pow_of_two(nelems * 3 / 2), never below min_size.
func TestShrinkBelow30Percent(t *testing.T) {
	tb := New(KprobeParams, keyOf, nil, 1, nil)
	for i := 0; i < 1000; i++ {
		_ = tb.Insert(&obj{uint64(i) * 8}, nil)
	}
	if tb.Size() != 2048 {
		t.Fatalf("1000 entries: size %d, want 2048", tb.Size())
	}
	for i := 0; i < 1000; i++ {
		if err := tb.Remove(uint64(i)*8, nil); err != nil {
			t.Fatal(err)
		}
		if tb.Len() >= 4 && tb.Len() < tb.Size()*3/10 {
			t.Fatalf("%d entries left in %d buckets: no shrink", tb.Len(), tb.Size())
		}
	}
	if tb.Size() != HashMinSize || tb.Shrinks == 0 {
		t.Fatalf("empty: size %d after %d shrinks, want %d", tb.Size(), tb.Shrinks, HashMinSize)
	}
}

// TestGrowthAllocFailure: a failed worker allocation keeps the old table
// and the worker retries on the next insert; with every allocation
// failing, inserts go on until the table is over 100% load, then fail
// with ErrNoMem (the slow path's GFP_ATOMIC allocation fails too).
func TestGrowthAllocFailure(t *testing.T) {
	f := &sim.Faults{}
	f.Set(FaultTableAlloc, 1)
	tb := New(KprobeParams, keyOf, f, 1, nil)
	for i := 0; i < 49; i++ {
		_ = tb.Insert(&obj{uint64(i)}, nil)
	}
	if tb.Size() != 64 || tb.FailedAllocs != 1 {
		t.Fatalf("after the failed growth: size %d, %d failures", tb.Size(), tb.FailedAllocs)
	}
	_ = tb.Insert(&obj{1000}, nil)
	if tb.Size() != 128 {
		t.Fatalf("the retry did not grow the table: size %d", tb.Size())
	}
	for i := 0; i < 50; i++ {
		if _, ok := tb.Lookup(uint64(i), nil); ok != (i < 49) {
			t.Fatalf("lookup %d after the rehash: %v", i, ok)
		}
	}

	all := &sim.Faults{}
	all.Set(FaultTableAlloc, 0)
	tb = New(KprobeParams, keyOf, all, 1, nil)
	n := 0
	for ; n < 200; n++ {
		if err := tb.Insert(&obj{uint64(n)}, nil); err != nil {
			if err != ErrNoMem {
				t.Fatal(err)
			}
			break
		}
	}
	if tb.Size() != 64 || n != 65 {
		t.Fatalf("with every allocation failing: first failure at insert %d (size %d), want 65 (nelems 65 > 64)", n+1, tb.Size())
	}
}

// TestTableMatchesMap: random inserts, removals, replaces and lookups,
// with table allocations failing at random hits, answer as a map does; a
// table with no failure pending is never above 75% load.
func TestTableMatchesMap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := &sim.Faults{}
		if rapid.Bool().Draw(rt, "faults") {
			f.Set(FaultTableAlloc, uint64(rapid.IntRange(1, 6).Draw(rt, "nth")))
		}
		tb := New(Params{AutomaticShrinking: rapid.Bool().Draw(rt, "shrink"), NelemHint: uint(rapid.IntRange(0, 100).Draw(rt, "hint"))}, keyOf, f, 7, nil)
		ref := map[uint64]*obj{}
		keys := rapid.Uint64Range(0, 300)
		for step := rapid.IntRange(1, 400).Draw(rt, "steps"); step > 0; step-- {
			k := keys.Draw(rt, "key")
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				o := &obj{k}
				err := tb.Insert(o, nil)
				_, present := ref[k]
				switch {
				case present && err != ErrExists, !present && err != nil:
					rt.Fatalf("insert %d: %v (present %v)", k, err, present)
				case !present:
					ref[k] = o
				}
			case 2:
				err := tb.Remove(k, nil)
				if _, present := ref[k]; present != (err == nil) {
					rt.Fatalf("remove %d: %v", k, err)
				}
				delete(ref, k)
			case 3:
				o := &obj{k}
				err := tb.Replace(k, o, nil)
				if _, present := ref[k]; present != (err == nil) {
					rt.Fatalf("replace %d: %v", k, err)
				} else if present {
					ref[k] = o
				}
			}
			if tb.Len() != len(ref) {
				rt.Fatalf("len %d, want %d", tb.Len(), len(ref))
			}
			if !tb.pending && tb.growAbove75() {
				rt.Fatalf("%d entries in %d buckets with no resize pending", tb.Len(), tb.Size())
			}
		}
		var want []uint64
		for k := range ref {
			want = append(want, k)
		}
		slices.Sort(want)
		var got []uint64
		for _, o := range tb.Entries() {
			got = append(got, o.addr)
			if ref[o.addr] != o {
				rt.Fatalf("entry %d is not the object last stored", o.addr)
			}
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("entries %v, want %v", got, want)
		}
		for k, o := range ref {
			if g, ok := tb.Lookup(k, nil); !ok || g != o {
				rt.Fatalf("lookup %d: %v %v", k, g, ok)
			}
		}
	})
}

func ExampleTable() {
	type probe struct{ addr uint64 }
	c := sim.NewCounters(false)
	t := New(KprobeParams, func(p *probe) uint64 { return p.addr }, nil, 1, c)
	for i := uint64(0); i < 100; i++ {
		_ = t.Insert(&probe{0xffffffff81000000 + i*64}, c)
	}
	_, ok := t.Lookup(0xffffffff81000000+64*42, c)
	fmt.Println(ok, t.Len(), t.Size(), t.Grows)
	// Output: true 100 256 2
}

func benchLookup(b *testing.B, n int) {
	t := New(KprobeParams, keyOf, nil, 1, nil)
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = 0xffffffff81000000 + uint64(i)*4096
		_ = t.Insert(&obj{keys[i]}, nil)
	}
	c := sim.NewCounters(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := t.Lookup(keys[(i*7919)%n], c); !ok {
			b.Fatal("missing")
		}
	}
	b.ReportMetric(float64(total(c, "rhashtable.visit"))/float64(b.N), "visits/op")
}

func BenchmarkLookup20k(b *testing.B) { benchLookup(b, 20000) }
func BenchmarkLookup50k(b *testing.B) { benchLookup(b, 50000) }

func BenchmarkInsert50k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		t := New(KprobeParams, keyOf, nil, 1, nil)
		for k := uint64(0); k < 50000; k++ {
			_ = t.Insert(&obj{k * 4096}, nil)
		}
	}
}

// TestConstantsMatchKernel reads lib/rhashtable.c and
// include/linux/rhashtable.h: HASH_DEFAULT_SIZE, HASH_MIN_SIZE and
// RHT_ELASTICITY as modelled. Skips without the source.
func TestConstantsMatchKernel(t *testing.T) {
	c, err1 := os.ReadFile(filepath.Join(kernelSrc, "lib/rhashtable.c"))
	h, err2 := os.ReadFile(filepath.Join(kernelSrc, "include/linux/rhashtable.h"))
	if err1 != nil || err2 != nil {
		t.Skip("no kernel source")
	}
	for _, tc := range []struct {
		src  []byte
		want string
	}{
		{c, fmt.Sprintf("#define HASH_DEFAULT_SIZE\t%dUL", HashDefaultSize)},
		{c, fmt.Sprintf("#define HASH_MIN_SIZE\t\t%dU", HashMinSize)},
		{h, fmt.Sprintf("#define RHT_ELASTICITY\t%du", Elasticity)},
		{h, "return atomic_read(&ht->nelems) > (tbl->size / 4 * 3) &&"},
		{h, "return atomic_read(&ht->nelems) < (tbl->size * 3 / 10) &&"},
	} {
		if !bytes.Contains(tc.src, []byte(tc.want)) {
			t.Errorf("kernel source lacks %q", tc.want)
		}
	}
}
