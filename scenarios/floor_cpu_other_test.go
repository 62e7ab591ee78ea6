//go:build !unix

package scenarios

import "time"

// processCPU is not measured here (the cpu metrics read 0).
func processCPU() time.Duration { return 0 }
