package trace

import (
	"fmt"
	"testing"

	"github.com/kpsim/kpsim/rhashtable"
)

// The weight of trace.event_index.hash.byte comes from this
// micro-benchmark of the modelled operation. On a shared host time it by
// CPU time, not wall time:
//
//	go test -c -o /tmp/trace.test ./trace
//	/usr/bin/time -f %U /tmp/trace.test -test.run '^$' -test.bench CostJhash -test.benchtime 100000x -test.cpu 1
//
// (user seconds / (100001 x the bytes per op the benchmark reports)).

var jsink uint32

// BenchmarkCostJhashByte: the index's key hash, rhashtable.Jhash(name, rhashtable.Jhash(group,
// 0)), over event names of 8 to 39 bytes (kprobe_events names are
// function names) in the group "kprobes", per byte hashed.
func BenchmarkCostJhashByte(b *testing.B) {
	var names []string
	bytes := 0
	for i := range 256 {
		n := fmt.Sprintf("%s_%d", "do_some_kernel_function_name_here_xyz_abc"[:6+i%30], i)
		names = append(names, n)
		bytes += len(n) + len(KprobeEventSystem)
	}
	var h uint32
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range names {
			h += rhashtable.Jhash(n, rhashtable.Jhash(KprobeEventSystem, h))
		}
	}
	jsink = h
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bytes), "ns/byte")
}
