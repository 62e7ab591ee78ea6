package main

import (
	"os"
	"strings"
	"testing"
)

// The command-level speed goals, as benchmarks: each is one whole
// kpsim command run in-process with a warm cache (the first, untimed call
// fills a private cache directory, as a user's second run finds it). The
// process start (a few ms) is not in these figures; the whole-process
// figures are quoted in the closing note beside them.
//
//	go test -run '^$' -bench 'Command' -count 5 ./cmd/kpsim | benchstat -
//
// Goals on the reference machine (2 cores): Default <= 0.5 s, Ablation20k
// <= 3 s, Kernel20k <= 0.8 s.

func benchCommand(b *testing.B, args ...string) {
	b.Setenv("KPSIM_CACHE_DIR", b.TempDir())
	if _, errs, code := runKpsim(args...); code != 0 { // warm the cache
		b.Fatalf("kpsim %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, errs, code := runKpsim(args...); code != 0 {
			b.Fatalf("exit %d: %s", code, errs)
		}
	}
}

// BenchmarkCommandDefault is `make run`: kpsim run many (20,000 probes,
// none and series) on the embedded default image.
func BenchmarkCommandDefault(b *testing.B) { benchCommand(b, "run", "many") }

// BenchmarkCommandAblation20k is kpsim run many --ablation at 20,000 probes.
func BenchmarkCommandAblation20k(b *testing.B) { benchCommand(b, "run", "many", "--ablation") }

// BenchmarkCommandKernel20k is kpsim run many --kernel K --n 20000 on the
// pinned Debian bzImage (make real-kernel); it skips without it. The
// vmlinux cache is warmed by the first call.
func BenchmarkCommandKernel20k(b *testing.B) {
	k := pinnedKernelPath(b)
	benchCommand(b, "run", "many", "--kernel", k, "--n", "20000")
}

// pinnedKernelPath is the bzImage `make real-kernel` caches, or a skip.
func pinnedKernelPath(tb testing.TB) string {
	tb.Helper()
	const k = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	if _, err := os.Stat(k); err != nil {
		tb.Skipf("pinned kernel absent (make real-kernel): %v", err)
	}
	return k
}
