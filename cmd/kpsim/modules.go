package main

import (
	"fmt"
	"strconv"
	"strings"

	flag "github.com/spf13/pflag"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/internal/input"
	"github.com/kpsim/kpsim/module"
)

// moduleFlags are --modules and --modules-dir. --modules is shared with the
// generator: a number is the synthetic kernel's module count; names or
// @FILE load real .ko files into a --kernel image.
type moduleFlags struct {
	count    *int   // synth.Config.Modules
	countSet bool   // --modules N given
	list     string // NAME,... or @FILE; "" when a count was given
	dir      string

	// set by preflight
	names   []string
	tree    *module.Tree
	treeDir string
	// release is the kernel release the default tree was found for ("":
	// --modules-dir given, or no tree found yet: loadModules looks again
	// with the release the kernel's banner gives).
	release string
}

// moduleFinalizeNote says which text patches a loaded module gets.
const moduleFinalizeNote = "module text: relocated; module_finalize for the boot CPU (the generation's tables, as counted below; ITS thunks from the static array, no per-module ITS pages); " +
	"__fentry__ calls NOPed (ftrace_module_init); jump labels and static calls keep their built bytes (COMING rewrites are same-length)"

// synthCheck refuses a module list for the generator.
func (m *moduleFlags) synthCheck() error {
	if m.list != "" {
		return usagef("--modules %s: module names need --kernel PATH (the synthetic kernel takes a count)", m.list)
	}
	if m.dir != "" {
		return usagef("--modules-dir needs --kernel PATH and --modules NAME,...|@FILE")
	}
	return nil
}

func (m *moduleFlags) String() string {
	if m == nil {
		return ""
	}
	if m.list != "" {
		return m.list
	}
	if m.count != nil {
		return strconv.Itoa(*m.count)
	}
	return ""
}

func (m *moduleFlags) Type() string { return "string" }

func (m *moduleFlags) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return fmt.Errorf("a module count cannot be negative")
		}
		*m.count, m.list, m.countSet = n, "", true
		return nil
	}
	if s == "" || s == "@" {
		return fmt.Errorf("want a count, NAME,... or @FILE")
	}
	m.list = s
	return nil
}

// addModuleFlags defines --modules (replacing the generator's count flag)
// and --modules-dir.
func (f *imageFlags) addModuleFlags(fs *flag.FlagSet) {
	f.mods.count = &f.cfg.Modules
	fs.Var(&f.mods, "modules", "loaded modules: a count for the synthetic kernel, or with --kernel PATH the real modules to load: NAME,... (load order) or @FILE (/proc/modules or lsmod output, newest first)")
	fs.StringVar(&f.mods.dir, "modules-dir", "", "module tree for --modules with --kernel PATH (.ko, .ko.xz, .ko.zst, .ko.gz files; default: the package's tree for the kernel's release KVER: for X/boot/vmlinuz-KVER X/usr/lib/modules/KVER or X/lib/modules/KVER, for .../modules/KVER/vmlinuz that directory, else lib/modules/KVER beside the kernel, as make real-kernel caches 6.1's)")
}

// defaultModulesDir is the module tree of the kernel file kernel (see
// module.TreeDirs), "" if none is there: the release its name gives, else
// the one in its bzImage header.
func defaultModulesDir(kernel string) string {
	d, _, _ := findModulesDir(kernel, "")
	return d
}

// findModulesDir looks for kernel's module tree: for release, or, when
// release is "", the release kernel's path names or else its bzImage
// header's kernel_version. It returns the tree (or ""), the release it
// looked for ("" when it knows none) and the directories it tried.
func findModulesDir(kernel, release string) (string, string, []string) {
	if release == "" {
		release = module.ReleaseFromPath(kernel)
	}
	if release == "" {
		release = bzImageRelease(kernel)
	}
	d, tried := module.FindTreeDir(kernel, release)
	return d, release, tried
}

// bzImageRelease is the release in a bzImage's setup header
// (kernel_version: "6.12.117+deb13-amd64 (debian-kernel@...) #1 SMP ..."),
// "" for anything else.
func bzImageRelease(kernel string) string {
	b, err := input.ReadFile(kernel, input.MaxKernel)
	if err != nil || !bzimage.IsBzImage(b) {
		return ""
	}
	in, err := bzimage.ParseSetupHeader(b)
	if err != nil {
		return ""
	}
	if f := strings.Fields(in.Version); len(f) > 0 {
		return f[0]
	}
	return ""
}

// moduleNames returns the modules --modules names, in load order.
func (m *moduleFlags) moduleNames() ([]string, error) {
	if file, ok := strings.CutPrefix(m.list, "@"); ok {
		b, err := input.ReadFile(file, input.MaxList)
		if err != nil {
			return nil, err
		}
		l, err := module.ParseList(file, b)
		if err != nil {
			return nil, err
		}
		return module.LoadOrder(l), nil
	}
	return module.ParseNames(m.list)
}

// preflight checks --modules and --modules-dir for a --kernel image before
// the kernel is read: the list, the tree, every named module's file and
// its dependencies (module.Tree.Check). Every error is a usage error
// (exit 2) naming the file and the problem.
func (f *imageFlags) preflight() error {
	m := &f.mods
	if m.list == "" {
		if m.countSet && *m.count != 0 {
			return usagef("--modules %d: a module count applies to the synthetic kernel; with --kernel give NAME,... or @FILE", *m.count)
		}
		if m.dir != "" {
			return usagef("--modules-dir needs --modules NAME,...|@FILE")
		}
		return nil
	}
	names, err := m.moduleNames()
	if err != nil {
		return usagef("--modules: %v", err)
	}
	dir := m.dir
	if dir == "" {
		var tried []string
		dir, m.release, tried = findModulesDir(f.kernel, "")
		if dir == "" {
			if m.release == "" {
				// Only the kernel's banner knows its release: loadModules
				// looks once the kernel is read.
				m.names = names
				return nil
			}
			return usagef("--modules: no module tree for %s (release %s) at %s: run `make real-kernel`, or give --modules-dir", f.kernel, m.release, strings.Join(tried, ", "))
		}
	}
	tree, err := module.OpenTree(dir)
	if err != nil {
		return usagef("--modules: %v", err)
	}
	if err := tree.Check(names); err != nil {
		return usagef("--modules: %v", err)
	}
	m.names, m.tree, m.treeDir = names, tree, dir
	return nil
}

// kernelTree settles the module tree once the kernel is read: a default
// tree found for the release the kernel's path or bzImage header named
// must be the release its banner gives (version), and without one the
// banner's release finds it.
func (m *moduleFlags) kernelTree(kernel, version string) error {
	if m.dir != "" || version == "" {
		if m.tree == nil {
			return usagef("--modules: no module tree for %s (its release is unknown): give --modules-dir", kernel)
		}
		return nil
	}
	if m.tree != nil {
		if m.release != version {
			return usagef("--modules: the module tree %s is for release %s, the kernel %s is %s: give --modules-dir", m.treeDir, m.release, kernel, version)
		}
		return nil
	}
	dir, _, tried := findModulesDir(kernel, version)
	if dir == "" {
		return usagef("--modules: no module tree for %s (release %s) at %s: give --modules-dir", kernel, version, strings.Join(tried, ", "))
	}
	tree, err := module.OpenTree(dir)
	if err != nil {
		return usagef("--modules: %v", err)
	}
	if err := tree.Check(m.names); err != nil {
		return usagef("--modules: %v", err)
	}
	m.tree, m.treeDir, m.release = tree, dir, version
	return nil
}

// loadModules loads the --modules list (checked by preflight) into the
// real kernel k. Every error is a usage error (exit 2) naming the file and
// the problem.
func (f *imageFlags) loadModules(k *image.Kernel) error {
	if f.mods.list == "" {
		return nil
	}
	if f.mods.tree == nil && f.mods.names == nil {
		if err := f.preflight(); err != nil {
			return err
		}
	}
	if err := f.mods.kernelTree(f.kernel, k.Config.Version); err != nil {
		return err
	}
	names, dir := f.mods.names, f.mods.treeDir
	l := module.NewLoader(k, module.Options{Dir: dir, Tree: f.mods.tree})
	k.Notes = append(k.Notes, fmt.Sprintf("module layout (%s): %s", l.Generation(), l.LayoutName()))
	for _, n := range names {
		if _, err := l.Load(n); err != nil {
			return usagef("--modules: %v", err)
		}
	}
	notes := k.Notes[:0]
	for _, n := range k.Notes {
		if n != "modules are not loaded from real images" {
			notes = append(notes, n)
		}
	}
	k.Notes = notes
	k.Notes = append(k.Notes, fmt.Sprintf("%d modules loaded from %s (%d named, %d more as their dependencies), LIVE, init text freed; module area from %#x (MODULES_VADDR + one page)",
		len(l.Loaded()), dir, len(names), len(l.Loaded())-len(names), uint64(module.ModulesVaddr+module.DefaultLoadOffset)))
	k.Notes = append(k.Notes, moduleFinalizeNote)
	if c := k.Config.CPU; c != "" && c != alternative.CPUNone {
		k.Notes = append(k.Notes, module.FinalizeNote(alternative.ModelFor(k.Config.Gen), c, l.Loaded()))
	}
	if err := k.Validate(); err != nil {
		return usagef("--modules: %v", err)
	}
	return nil
}
