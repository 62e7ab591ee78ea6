// Package realkernel finds the pinned Debian kernel that the real-kernel
// tests read (make real-kernel fetches it) and decompresses its vmlinux
// once per test binary.
package realkernel

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image/bzimage"
)

// Version is the pinned kernel's release.
const Version = "6.1.0-57-amd64"

// Path returns KPSIM_KERNEL, else the pinned kernel in the repository's
// .cache/kernels; t skips when that file is missing.
func Path(t testing.TB) string {
	if p := os.Getenv("KPSIM_KERNEL"); p != "" {
		return p
	}
	_, self, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(self), "..", "..", ".cache", "kernels", "vmlinuz-"+Version)
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` (or set KPSIM_KERNEL) to enable")
	}
	return p
}

var (
	vmOnce sync.Once
	vm     []byte
	vmErr  error
)

// Vmlinux returns Path(t) and the kernel's vmlinux as built (a bzImage
// decompressed, an ELF as it is), read once per test binary.
func Vmlinux(t testing.TB) (string, []byte) {
	path := Path(t)
	vmOnce.Do(func() {
		b, err := os.ReadFile(path)
		if err != nil {
			vmErr = err
			return
		}
		if bzimage.IsBzImage(b) {
			vm, _, vmErr = bzimage.Decompress(path, b)
		} else {
			vm = b
		}
	})
	if vmErr != nil {
		t.Fatal(vmErr)
	}
	return path, vm
}
