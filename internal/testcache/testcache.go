// Package testcache keeps tests out of the user's kpsim cache: Setup points
// KPSIM_CACHE_DIR at a directory of the system temp dir shared by every
// test binary of this machine (so the decompressed pinned kernel is
// decompressed once, not once per package), unless the caller set one.
// Entries other than the vmlinux are keyed by the build, and every test
// binary is its own build, so tests never read what kpsim wrote or each
// other's image entries.
package testcache

import (
	"os"
	"path/filepath"
	"testing"
)

// Setup sets KPSIM_CACHE_DIR for the test binary (call it from TestMain).
func Setup() {
	if os.Getenv("KPSIM_CACHE_DIR") != "" {
		return
	}
	os.Setenv("KPSIM_CACHE_DIR", filepath.Join(os.TempDir(), "kpsim-test-cache"))
}

// Main is a test binary's whole TestMain: Setup, then run the tests and
// exit with their status.
func Main(m *testing.M) {
	Setup()
	os.Exit(m.Run())
}
