package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/internal/realkernel"
)

func cachedKernel(t *testing.T) []byte {
	b, err := os.ReadFile("../../.cache/kernels/vmlinuz-6.1.0-57-amd64")
	if err != nil {
		t.Skip("no cached real kernel: run `make real-kernel` to enable")
	}
	return b
}

func TestKernelBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ls, err := os.ReadFile("/bin/ls")
	if err != nil {
		t.Skip("no /bin/ls to make ELF inputs from")
	}
	arm := append([]byte(nil), ls...)
	binary.LittleEndian.PutUint16(arm[18:], 183) // e_machine = EM_AARCH64
	cases := []struct {
		name string
		file string
		want string
	}{
		{"missing", filepath.Join(dir, "nope"), "no such file"},
		{"random", write("random.bin", []byte("this is not a kernel at all, just text")), "not a kernel image"},
		{"empty", write("empty.bin", nil), "empty file"},
		{"not a kernel ELF", write("ls", ls), "not a kernel ELF"},
		{"other arch", write("arm", arm), "not x86-64"},
	}
	if k := cachedKernel(t); k != nil {
		cases = append(cases, struct{ name, file, want string }{"truncated bzImage", write("trunc-vmlinuz", k[:len(k)/2]), "truncated"})
		corrupt := append([]byte(nil), k...)
		for i := 0x6000; i < 0x6040; i++ {
			corrupt[i] ^= 0x5a // inside the xz payload
		}
		cases = append(cases, struct{ name, file, want string }{"corrupt xz", write("corrupt-vmlinuz", corrupt), "corrupt"})
		// The generation is never guessed: another release, or none.
		_, vm := realkernel.Vmlinux(t)
		other := bytes.ReplaceAll(vm, []byte("Linux version 6.1.0-57"), []byte("Linux version 6.6.0-57"))
		cases = append(cases, struct{ name, file, want string }{"unmodelled release", write("vmlinux-6.6", other), "kernel 6.6 is not a modelled generation"})
		none := bytes.ReplaceAll(vm, []byte("Linux version "), []byte("Linux versioN "))
		cases = append(cases, struct{ name, file, want string }{"no banner", write("vmlinux-nobanner", none), "kernel release unknown"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runKpsim("image", "--kernel", tc.file)
			if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, filepath.Base(tc.file)) || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2, one line naming %s and %q", code, errs, filepath.Base(tc.file), tc.want)
			}
		})
	}
}

func TestDecodeRealKernelSummary(t *testing.T) {
	cachedKernel(t)
	out := mustKpsim(t, "decode", "--kernel", "../../.cache/kernels/vmlinuz-6.1.0-57-amd64", "--all", "--summary")
	if n := strings.Count(out, "\n"); n < 40000 {
		t.Fatalf("%d summary lines for a kernel of ~50k functions", n)
	}
}

// TestKernelVersionFlag: --kernel-version names a modelled generation or
// is refused in one line; on a synthetic image it picks the generation's
// profile (7.3 by default), which debian-6.1 (a 6.1 profile) refuses.
func TestKernelVersionFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "--kernel-version", "6.6"}, "kernel 6.6 is not a modelled generation"},
		{[]string{"image", "--kernel-version", "banana"}, "is not a kernel release"},
		{[]string{"image", "--kernel-version", "7.3", "--profile", "debian-6.1"}, "profile debian-6.1 is a 6.1 kernel's"},
		{[]string{"image", "--kconfig", "X86_KERNEL_IBT=y"}, "the image's build options need --kernel"},
		{[]string{"image", "--kconfig", "X86_KERNEL_IBT"}, "want OPTION=VALUE"},
	} {
		_, errs, code := runKpsim(tc.args...)
		if code != 2 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	for _, tc := range []struct{ args, want string }{
		{"--kernel-version 6.1", "generation 6.1"}, {"--kernel-version 6.12", "generation 6.12"},
		{"--kernel-version 7.3", "generation 7.3"}, {"", "generation 7.3"},
		{"--profile debian-6.1", "generation 6.1"},
	} {
		out := mustKpsim(t, append([]string{"image"}, strings.Fields(tc.args)...)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("kpsim image %s does not say %q:\n%s", tc.args, tc.want, out)
		}
	}
}
