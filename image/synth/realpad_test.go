package synth

import (
	"os"
	"sort"
	"testing"

	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/x86"
)

// TestRealKernelObjectSizes measures the gaps between functions in the
// pinned Debian 6.1 vmlinux .text (as built, before any boot patching),
// which is where the generator's object model (Config.ObjectFunctions*)
// comes from: it classifies the run of NOP / int3 instructions that ends
// each function whose successor is 16-byte aligned, and measures how many
// functions lie between int3-only gaps (ld's =0xcccc between objects).
func TestRealKernelObjectSizes(t *testing.T) {
	const p = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if testing.Short() {
		t.Skip("decompresses the real kernel")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	// The padding census is about the text as built (gas and ld fill);
	// boot patching would turn every return into "ret; int3 x4".
	r, err := load.OpenWith(p, load.Options{CPU: "none"})
	if err != nil {
		t.Fatal(err)
	}
	k := r.Kernel
	core := k.CoreText()
	var addrs []uint64
	seen := map[uint64]bool{}
	for _, s := range k.Symbols {
		if s.IsText() && s.Addr >= core.Start && s.Addr < core.End() && !seen[s.Addr] {
			seen[s.Addr] = true
			addrs = append(addrs, s.Addr)
		}
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	kinds := map[string]int{}
	var sizes []int
	run := 0
	for i := 0; i+1 < len(addrs); i++ {
		if addrs[i+1]%funcAlign != 0 {
			kinds["unaligned"]++
			continue
		}
		code := k.Text(addrs[i], int(addrs[i+1]-addrs[i]))
		kind := "empty" // the kind of the trailing pad run
		for off := 0; off < len(code); {
			in, err := x86.Decode(nil, code[off:])
			if err != nil {
				kind = "undecodable"
				break
			}
			switch {
			case in.Kind == x86.KindInt3 && (kind == "empty" || kind == "int3"):
				kind = "int3"
			case in.Kind == x86.KindInt3:
				kind = "mixed"
			case in.Kind == x86.KindNop && (kind == "empty" || kind == "nop"):
				kind = "nop"
			case in.Kind == x86.KindNop:
				kind = "mixed"
			default:
				kind = "empty"
			}
			off += in.Len
		}
		kinds[kind]++
		run++
		if kind == "int3" {
			sizes = append(sizes, run)
			run = 0
		}
	}
	t.Logf("%d .text functions; trailing gaps: %v", len(addrs), kinds)
	sort.Ints(sizes)
	q := func(f float64) int { return sizes[int(f*float64(len(sizes)-1))] }
	t.Logf("functions per object (between int3 gaps): %d objects, p10 %d p25 %d p50 %d p75 %d p90 %d p99 %d max %d",
		len(sizes), q(.1), q(.25), q(.5), q(.75), q(.9), q(.99), sizes[len(sizes)-1])
	// The figures Config documents.
	if kinds["int3"] != 2203 || kinds["nop"] != 37735 || kinds["empty"] != 3210 {
		t.Errorf("gap census %v differs from the one Config documents (int3 2203, nop 37735, empty 3210)", kinds)
	}
	c := DefaultConfig()
	if float64(q(.5)) != c.ObjectFunctionsMedian || q(.9) != 46 {
		t.Errorf("median %d, p90 %d functions per object; Config has median %g (p90 46)", q(.5), q(.9), c.ObjectFunctionsMedian)
	}
}
