package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestUnboundedInputsRefused: a path that is not a regular file, where a
// kernel image, a symbol list or a module list is read whole, is refused
// at once with one line naming it, exit 2. /dev/zero used to be read until
// memory ran out (10.7 GB in 60 s for --kernel).
func TestUnboundedInputsRefused(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	k := "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	cases := [][]string{
		{"image", "--kernel", "/dev/zero"},
		{"kallsyms", "dump", "--symbols", "/dev/zero"},
		{"run", "kallsyms", "--symbols", "/dev/zero"},
		{"run", "many", "--targets", "/dev/zero"},
		{"run", "many", "--costs", "/dev/zero"},
	}
	if _, err := os.Stat(k); err == nil {
		cases = append(cases, []string{"image", "--kernel", k, "--modules", "@/dev/zero"})
	}
	for _, args := range cases {
		start := time.Now()
		_, errs, code := runKpsim(args...)
		if d := time.Since(start); d > time.Second {
			t.Errorf("%v: refused after %v, want within 1 s", args, d)
		}
		if code != 2 || !strings.Contains(errs, "/dev/zero: not a regular file (a character device)") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}
