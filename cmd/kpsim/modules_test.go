package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
)

// realKernelPath is the cached Debian kernel (make real-kernel) and its
// module tree; tests that need them skip without.
func realKernelPath(t *testing.T) string {
	p, _ := filepath.Abs("../../.cache/kernels/vmlinuz-6.1.0-57-amd64")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` to enable")
	}
	if _, err := os.Stat(defaultModulesDir(p)); err != nil {
		t.Skip("no module tree: run `make real-kernel` to enable")
	}
	return p
}

func oneLineExit2(t *testing.T, want string, args ...string) {
	t.Helper()
	_, errs, code := runKpsim(args...)
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) {
		t.Errorf("kpsim %s: exit %d, stderr %q; want exit 2 and one line containing %q", strings.Join(args, " "), code, errs, want)
	}
}

func TestModulesFlagsSynthetic(t *testing.T) {
	oneLineExit2(t, "module names need --kernel PATH", "image", "--modules", "kvm")
	oneLineExit2(t, "--modules-dir needs --kernel PATH", "image", "--modules-dir", t.TempDir())
	oneLineExit2(t, "cannot be negative", "image", "--modules", "-1")
	// A count still drives the generator.
	out, errs, code := runKpsim(append([]string{"image"}, append(small, "--modules", "3")...)...)
	if code != 0 || !strings.Contains(out, "modules") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestModulesRealKernel(t *testing.T) {
	k := realKernelPath(t)
	dir := t.TempDir()
	ko, err := os.ReadFile(filepath.Join(defaultModulesDir(k), "kernel/drivers/net/dummy.ko"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "dummy.ko"), ko[:len(ko)/3], 0o644)
	os.WriteFile(filepath.Join(dir, "list"), []byte("kvm 1 0 - Dead 0x0\n"), 0o644)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"module nosuchmod: no nosuchmod.ko in", []string{"--modules", "nosuchmod"}},
		{filepath.Join(dir, "dummy.ko") + ": truncated", []string{"--modules", "dummy", "--modules-dir", dir}},
		{filepath.Join(dir, "list") + ":1: module kvm: state \"Dead\"", []string{"--modules", "@" + filepath.Join(dir, "list")}},
		{"nofile: no such file", []string{"--modules", "@nofile"}},
		{"a module count applies to the synthetic kernel", []string{"--modules", "3"}},
	} {
		oneLineExit2(t, tc.want, append([]string{"image", "--kernel", k}, tc.args...)...)
	}
	if race.Enabled {
		t.Skip("-race: one real --kernel load costs minutes; the module package's real tests cover loading")
	}
	out := mustKpsim(t, "image", "--kernel", k, "--modules", "kvm-intel")
	// kvm_intel pulls in kvm and irqbypass first; readelf's counts
	// (jump, static call, bug, mcount, extable) appear in the table.
	for _, want := range []string{"irqbypass", "kvm   live", "758          164   862     314      677", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("image output lacks %q:\n%s", want, out)
		}
	}
}
