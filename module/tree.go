package module

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Tree is a module directory indexed by module name.
type Tree struct {
	dir   string
	files map[string]string
	// unpacked keeps what Check decompressed for the Load that follows
	// (take drops it).
	unpacked map[string][]byte
}

// OpenTree indexes dir (see indexTree).
func OpenTree(dir string) (*Tree, error) {
	f, err := indexTree(dir)
	if err != nil {
		return nil, err
	}
	return &Tree{dir: dir, files: f}, nil
}

// Path resolves a module name to its .ko file.
func (t *Tree) Path(name string) (string, error) {
	p, ok := t.files[NormalizeName(name)]
	if !ok {
		return "", fmt.Errorf("module %s: no %s.ko in %s", name, strings.TrimSuffix(name, ".ko"), t.dir)
	}
	return p, nil
}

// Check reads every named module and, recursively, the modules its
// depends= names, and runs the ELF checks load_module starts with, without
// loading anything: the errors Load would give for a missing, unreadable
// or malformed file or a missing dependency, before any kernel is read.
func (t *Tree) Check(names []string) error {
	seen := map[string]bool{}
	var visit func(n string) error
	visit = func(n string) error {
		n = NormalizeName(n)
		if seen[n] {
			return nil
		}
		seen[n] = true
		path, err := t.Path(n)
		if err != nil {
			return err
		}
		raw, err := t.read(path)
		if err != nil {
			return err
		}
		o, err := parseObject(path, raw)
		if err != nil {
			return err
		}
		for _, d := range o.depends() {
			if _, err := t.Path(d); err != nil {
				return fmt.Errorf("%s: depends on %s, which is not in %s", path, d, t.dir)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

// read reads a module file of the tree, decompressed, keeping a
// decompressed copy for take.
func (t *Tree) read(path string) ([]byte, error) {
	if b, ok := t.unpacked[path]; ok {
		return b, nil
	}
	raw, err := readModule(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".ko") {
		if t.unpacked == nil {
			t.unpacked = map[string][]byte{}
		}
		t.unpacked[path] = raw
	}
	return raw, nil
}

// take is read for the loader: the kept copy is handed over and dropped.
func (t *Tree) take(path string) ([]byte, error) {
	b, err := t.read(path)
	delete(t.unpacked, path)
	return b, err
}

// readModule reads a module file and decompresses it (Decompress).
func readModule(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, errors.Unwrap(err))
	}
	return Decompress(path, raw)
}

// indexTree maps module names to files: modules.dep's first fields when
// the tree has one (what modprobe reads), else every module file under
// dir: *.ko, *.ko.xz, *.ko.zst, *.ko.gz (the first one found for a name).
// Debian ships no modules.dep in the package (depmod writes it at install
// time), so the walk is the usual path on an extracted .deb.
func indexTree(dir string) (map[string]string, error) {
	if dir == "" {
		return nil, errors.New("no module directory (--modules-dir)")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("module directory %s: %v", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("module directory %s: not a directory", dir)
	}
	out := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.dep")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f, _, ok := strings.Cut(line, ":")
			if !ok || !isModuleFile(f) {
				continue
			}
			p := f
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, f)
			}
			out[NormalizeName(filepath.Base(f))] = p
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	root := dir
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		root = r // WalkDir does not follow a symlinked root
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isModuleFile(d.Name()) {
			n := NormalizeName(d.Name())
			if _, dup := out[n]; !dup {
				out[n] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("module directory %s: %v", dir, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("module directory %s: no .ko files (nor .ko.xz, .ko.zst, .ko.gz)", dir)
	}
	return out, nil
}

// ReleaseFromPath is the kernel release a kernel file's path names:
// KVER of .../vmlinuz-KVER or .../vmlinux-KVER (Debian's /boot, the -dbg
// package's /usr/lib/debug/boot), or of .../modules/KVER/vmlinuz (the
// merged-/usr layout of 7.x packages: /usr/lib/modules/KVER/vmlinuz, the
// -dbg package's /usr/lib/debug/lib/modules/KVER/vmlinux); "" when the
// path names none.
func ReleaseFromPath(kernel string) string {
	base := filepath.Base(kernel)
	for _, p := range []string{"vmlinuz-", "vmlinux-"} {
		if v, ok := strings.CutPrefix(base, p); ok && v != "" {
			return v
		}
	}
	if base == "vmlinuz" || base == "vmlinux" {
		dir := filepath.Dir(kernel)
		if filepath.Base(filepath.Dir(dir)) == "modules" {
			return filepath.Base(dir)
		}
	}
	return ""
}

// TreeDirs lists, in the order to try them, the directories that may hold
// the module tree of the kernel file kernel, whose release is release:
//
//   - X/boot/vmlinuz-KVER: X/usr/lib/modules/KVER, then X/lib/modules/KVER
//     (the package unpacked at X: merged /usr, then the classic layout);
//   - .../modules/KVER/vmlinuz: that directory (and its /usr or non-/usr
//     twin);
//   - D/vmlinuz-KVER: D/lib/modules/KVER, then D/usr/lib/modules/KVER
//     (`make real-kernel`'s 6.1 cache: the tree beside the kernel);
//   - a -dbg kernel, R/usr/lib/debug/P: the directories for R/P, then
//     those for the path itself.
//
// release is the kernel's own (linux_banner, the bzImage header); when it
// is "", the release the path names is used.
func TreeDirs(kernel, release string) []string {
	if release == "" {
		release = ReleaseFromPath(kernel)
	}
	var out []string
	add := func(d string) {
		for _, o := range out {
			if o == d {
				return
			}
		}
		out = append(out, d)
	}
	twins := func(dir string) {
		add(dir)
		parent := filepath.Dir(filepath.Dir(dir)) // .../lib of .../lib/modules/KVER
		if filepath.Base(parent) != "lib" {
			return
		}
		root := filepath.Dir(parent)
		if filepath.Base(root) == "usr" {
			add(filepath.Join(filepath.Dir(root), "lib", "modules", filepath.Base(dir)))
		} else {
			add(filepath.Join(root, "usr", "lib", "modules", filepath.Base(dir)))
		}
	}
	paths := []string{kernel}
	sep := string(filepath.Separator)
	if i := strings.LastIndex(kernel, sep+filepath.Join("usr", "lib", "debug")+sep); i >= 0 {
		// The package's own tree first: the -dbg one holds debug files.
		paths = []string{kernel[:i] + sep + kernel[i+len(sep+filepath.Join("usr", "lib", "debug")+sep):], kernel}
	}
	for _, k := range paths {
		dir := filepath.Dir(k)
		if base := filepath.Base(k); (base == "vmlinuz" || base == "vmlinux") && filepath.Base(filepath.Dir(dir)) == "modules" {
			twins(dir)
			continue
		}
		if release == "" {
			continue
		}
		if filepath.Base(dir) == "boot" {
			x := filepath.Dir(dir)
			add(filepath.Join(x, "usr", "lib", "modules", release))
			add(filepath.Join(x, "lib", "modules", release))
		}
		add(filepath.Join(dir, "lib", "modules", release))
		add(filepath.Join(dir, "usr", "lib", "modules", release))
	}
	return out
}

// FindTreeDir returns the first of TreeDirs(kernel, release) that is a
// directory, and the list it tried.
func FindTreeDir(kernel, release string) (string, []string) {
	dirs := TreeDirs(kernel, release)
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, dirs
		}
	}
	return "", dirs
}
