package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
