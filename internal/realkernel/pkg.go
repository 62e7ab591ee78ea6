package realkernel

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// Pkg is one pinned Debian kernel of a later generation as
// `make real-kernel KVER=6.12|7.3` unpacks it under .cache/kernels/GEN/:
// the packages' own trees, paths as shipped (merged /usr).
type Pkg struct {
	Gen     image.Generation
	Release string // uname -r
	Root    string // .cache/kernels/GEN
	// Vmlinuz is the bzImage as shipped; Config the config file beside
	// it; Modules the module tree (.ko.xz files).
	Vmlinuz, Config, Modules string
	// Vmlinux and SystemMap come from the -dbg package (DBG=1): the
	// unstripped vmlinux and the real System.map (the image package's
	// System.map is a stub).
	Vmlinux, SystemMap string
}

func cacheDir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", ".cache", "kernels")
}

// Pinned describes the pinned package of generation g (Gen612, Gen73);
// paths are where `make real-kernel` puts the files, present or not.
func Pinned(g image.Generation) Pkg {
	root := filepath.Join(cacheDir(), g.String())
	switch g {
	case image.Gen612:
		r := "6.12.117+deb13-amd64"
		return Pkg{Gen: g, Release: r, Root: root,
			Vmlinuz:   filepath.Join(root, "boot", "vmlinuz-"+r),
			Config:    filepath.Join(root, "boot", "config-"+r),
			Modules:   filepath.Join(root, "usr", "lib", "modules", r),
			Vmlinux:   filepath.Join(root, "usr", "lib", "debug", "boot", "vmlinux-"+r),
			SystemMap: filepath.Join(root, "usr", "lib", "debug", "boot", "System.map-"+r)}
	case image.Gen73:
		r := "7.3-amd64"
		m := filepath.Join(root, "usr", "lib", "modules", r)
		d := filepath.Join(root, "usr", "lib", "debug", "lib", "modules", r)
		return Pkg{Gen: g, Release: r, Root: root,
			Vmlinuz: filepath.Join(m, "vmlinuz"), Config: filepath.Join(m, "config"), Modules: m,
			Vmlinux: filepath.Join(d, "vmlinux"), SystemMap: filepath.Join(d, "System.map")}
	}
	panic("realkernel.Pinned: no pinned package for generation " + g.String())
}

// Find returns the pinned package of generation g; t skips when its
// bzImage is not in the cache.
func Find(t testing.TB, g image.Generation) Pkg {
	p := Pinned(g)
	if _, err := os.Stat(p.Vmlinuz); err != nil {
		t.Skipf("no %s kernel: run `make real-kernel KVER=%s` to enable", g, g)
	}
	return p
}

// FindDbg is Find for tests that also need the -dbg package's vmlinux
// and System.map; t skips when they are absent.
func FindDbg(t testing.TB, g image.Generation) Pkg {
	p := Find(t, g)
	for _, f := range []string{p.Vmlinux, p.SystemMap} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("no %s debug vmlinux: run `make real-kernel KVER=%s DBG=1` to enable", g, g)
		}
	}
	return p
}
