package calibrate

import (
	"encoding/hex"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kpsim/kpsim/x86"
)

// x86.decode.insn is timed in Go, in place, not in C. The count it prices
// is one insn_decode_kernel() call, and kpsim's decoder (x86/) is a model
// of insn.c's table-driven length decode: a C weight would need a C copy of
// that decoder and of the opcode-map tables the kernel generates from
// x86-opcode-map.txt, a third implementation to keep in agreement with the
// kernel and with kpsim's, and the kernel's own insn.c is GPL source kpsim
// does not ship. So the weight is the Go model's time per instruction,
// converted to cycles with the same stated frequency as the C clock, and
// the cost file says so. The other families are C because their work is a
// handful of loads and compares that C states exactly as the kernel does.

// decodeMix is the kernel-like instruction mix of x86's
// BenchmarkKernelDecode (34 instructions, 128 bytes), so the hot figure
// and that benchmark time the same thing.
var decodeMix = mustHex(strings.Join([]string{
	"f3 0f 1e fa", "0f 1f 44 00 00", "55", "48 89 e5", "41 57", "41 56", "53",
	"48 83 ec 18", "48 89 fb", "65 48 8b 04 25 28 00 00 00", "48 89 44 24 10",
	"31 c0", "48 8b 47 08", "48 85 c0", "74 2a", "8b 88 a0 01 00 00", "66 90",
	"48 8b 15 10 20 30 00", "48 8d 74 24 08", "e8 7b 5a ff ff", "85 c0",
	"0f 85 f0 00 00 00", "48 8b 04 c5 00 00 00 00", "e8 00 10 00 00",
	"83 7b 10 02", "0f 94 c0", "48 83 c4 18", "5b", "41 5e", "41 5f", "5d",
	"e9 00 20 00 00", "cc", "66 66 2e 0f 1f 84 00 00 00 00 00",
}, " "))

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// timeGoDecode times x86.DecodeKernel: hot over the 34-instruction mix
// again and again, cold once through text (distinct instructions, more
// than L2 of them when text is a kernel's), in cycles per instruction at
// mhz.
func timeGoDecode(text []byte, regime string, quick bool, mhz float64) Measure {
	src, what := decodeMix, "the 34-instruction kernel-like mix of BenchmarkKernelDecode, repeated"
	if regime == "cold" && len(text) > 0 {
		src, what = text, "one pass over kernel text"
		if quick && len(src) > 1<<16 {
			src = src[:1<<16]
		}
	}
	reps := 11
	if quick {
		reps = 3
	}
	minInsns := 2_000_000
	if quick {
		minInsns = 20_000
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	samples := make([]float64, 0, reps)
	retries := 0
	for r := 0; r < reps; r++ {
		insns := 0
		c0 := threadNS()
		t0 := time.Now()
		for insns < minInsns {
			for off := 0; off < len(src); {
				in, err := x86.DecodeKernel(nil, src[off:])
				if err != nil || in.Len <= 0 {
					off++
				} else {
					off += in.Len
				}
				insns++
			}
			if regime == "cold" && len(text) > 0 {
				break
			}
		}
		wall := float64(time.Since(t0).Nanoseconds())
		cpu := threadNS() - c0
		if cpu <= 0 {
			cpu = wall // no thread clock: wall time
		}
		if wall > cpu*1.02+2000 && retries < 3 {
			retries++ // preempted on a shared machine: run it again
			r--
			continue
		}
		retries = 0
		samples = append(samples, cpu/float64(insns)*mhz/1000)
	}
	sort.Float64s(samples)
	return Measure{
		Bench: GoDecodeBench, Regime: regime, Unit: "insn",
		Median: samples[len(samples)/2], Min: samples[0], Max: samples[len(samples)-1], Samples: len(samples),
		Params: "Go x86.DecodeKernel timed in place over " + what + ", ns x the stated MHz",
	}
}

// threadNS is this thread's CPU time (0 where the clock is missing).
func threadNS() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano())
}
