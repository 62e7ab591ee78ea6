package load

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/image/cache"
)

// cacheVersion changes whenever the decompressor's output could change
// (a fixed decoder bug), so old entries are never read.
const cacheVersion = "v1"

// CacheDir is where decompressed kernels are kept: the vmlinux/
// subdirectory of the kpsim cache root ($KPSIM_CACHE_DIR, else the user
// cache directory's kpsim: package image/cache). "" when there is none.
func CacheDir() string { return cache.Dir("vmlinux") }

// decompressCached returns the vmlinux inside the bzImage b. Decompressing
// xz is most of a --kernel run, so the result is kept in CacheDir, keyed
// by the SHA-256 of the bzImage and the cache version: a hit reads the
// file instead. Entries are written to a temporary file and renamed, so
// concurrent runs never see a partial one; each entry ends with the
// SHA-256 of its vmlinux, and one that does not match is ignored and
// rewritten. Any cache failure falls back to decompressing:
// the cache is the simulator's, never a source of different bytes.
func decompressCached(name string, b []byte, noCache bool) ([]byte, error) {
	dir := CacheDir()
	if noCache || dir == "" || cache.Disabled() {
		v, _, err := bzimage.Decompress(name, b)
		return v, err
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, cacheVersion+"-"+hex.EncodeToString(sum[:])+".elf")
	if e, err := os.ReadFile(path); err == nil && len(e) > sha256.Size {
		v, tail := e[:len(e)-sha256.Size], e[len(e)-sha256.Size:]
		if h := sha256.Sum256(v); bytes.Equal(h[:], tail) && bytes.HasPrefix(v, []byte("\x7fELF")) {
			cache.Touch(path)
			return v, nil
		}
	}
	v, _, err := bzimage.Decompress(name, b)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if f, done, err := cache.CreateTemp(dir, ".vmlinux-*"); err == nil {
			defer done()
			h := sha256.Sum256(v)
			_, werr := f.Write(append(v[:len(v):len(v)], h[:]...))
			cerr := f.Close()
			if werr == nil && cerr == nil && os.Chmod(f.Name(), 0o644) == nil && os.Rename(f.Name(), path) == nil {
				cache.Stored(path)
				return v, nil
			}
			os.Remove(f.Name())
		}
	}
	return v, nil
}
