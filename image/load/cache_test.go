package load

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDecompressCache: the second load of a bzImage reads the cached
// vmlinux, byte for byte what decompressing gives; a corrupt entry is
// ignored; KPSIM_NO_CACHE and Options.NoCache bypass the cache.
func TestDecompressCache(t *testing.T) {
	const p = "../../.cache/kernels/vmlinuz-6.1.0-57-amd64"
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	dir := t.TempDir()
	t.Setenv("KPSIM_CACHE_DIR", dir)
	t0 := time.Now()
	v1, err := decompressCached(p, b, false)
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(t0)
	entries, _ := filepath.Glob(filepath.Join(dir, "vmlinux", cacheVersion+"-*.elf"))
	if len(entries) != 1 {
		t.Fatalf("cache entries %v", entries)
	}
	t0 = time.Now()
	v2, err := decompressCached(p, b, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("decompress %v, cached read %v", cold, time.Since(t0))
	if !bytes.Equal(v1, v2) {
		t.Fatal("cached vmlinux differs from the decompressed one")
	}
	if err := os.WriteFile(entries[0], []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	v3, err := decompressCached(p, b, false)
	if err != nil || !bytes.Equal(v1, v3) {
		t.Fatalf("a corrupt entry was used (%v)", err)
	}
	os.Remove(entries[0])
	if _, err := decompressCached(p, b, true); err != nil {
		t.Fatal(err)
	}
	if e, _ := filepath.Glob(filepath.Join(dir, "vmlinux", "*")); len(e) != 0 {
		t.Fatalf("NoCache wrote %v", e)
	}
}
