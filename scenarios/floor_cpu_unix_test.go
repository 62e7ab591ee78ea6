//go:build unix

package scenarios

import (
	"syscall"
	"time"
)

// processCPU is the process's user+system CPU time so far (every thread,
// the garbage collector's included). On a shared machine it is steadier
// than wall time, which counts the time other processes hold the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
