package input

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "/dev/zero: not a regular file (a character device)"},
		{fifo, fifo + ": not a regular file (a FIFO)"},
		{dir, dir + ": not a regular file (a directory)"},
		{filepath.Join(dir, "none"), "no such file or directory"},
		{big, big + ": 100 bytes, more than the 10 this input can be"},
	} {
		_, err := ReadFile(tc.path, 10)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	b, err := ReadFile(big, 100)
	if err != nil || len(b) != 100 {
		t.Errorf("a file at the bound: %d bytes, %v", len(b), err)
	}
}

// A procfs file reports size 0 to stat; the bound still holds while it is
// read.
func TestBoundWhileReading(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no procfs")
	}
	if _, err := ReadFile("/proc/self/maps", 8); err == nil || !strings.Contains(err.Error(), "more than the 8 bytes") {
		t.Errorf("/proc/self/maps under an 8-byte bound: %v", err)
	}
	if b, err := ReadFile("/proc/self/maps", MaxList); err != nil || len(b) == 0 {
		t.Errorf("/proc/self/maps: %d bytes, %v", len(b), err)
	}
}
