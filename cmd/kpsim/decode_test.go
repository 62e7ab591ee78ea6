package main

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/x86"
)

// TestDecodeOne: what x86asm cannot name takes the kernel decoder's length
// of the chosen generation, and says so; what neither decodes is "(bad)".
func TestDecodeOne(t *testing.T) {
	for _, tc := range []struct {
		gen  image.Generation
		hex  string
		len  int
		mnem string
	}{
		{image.Gen61, "f20f00f0", 4, "(kernel decoder: 4 bytes; not named)"}, // LKGS: not in 6.1's map
		{image.Gen612, "f20f00f0", 4, "lkgs"},
		{image.Gen73, "f20f00f0", 4, "lkgs"},
		{image.Gen61, "d50801c0", 2, "aad"},                                           // 6.1: AAD Ib
		{image.Gen612, "d50801c0", 4, "(kernel decoder: 4 bytes; not named)"},         // REX2 add
		{image.Gen612, "62f47d0881c03412", 8, "(kernel decoder: 8 bytes; not named)"}, // EVEX map 4
		{image.Gen61, "62f47d0881c03412", 1, "(bad)"},                                 // no map 4 in 6.1
		{image.Gen73, "8fe97801c8", 5, "(kernel decoder: 5 bytes; not named)"},        // XOP blcfill
		{image.Gen73, "ea010203040506", 1, "(kernel decoder: 1 byte; not named)"},     // INAT_INV64
		{image.Gen61, "ea010203040506", 7, "ljmp"},
		{image.Gen61, "e8000000", 1, "(bad)"}, // truncated
		{image.Gen61, "f30f1efa", 4, "endbr64"},
	} {
		code, err := hex.DecodeString(strings.ReplaceAll(tc.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		n, mnem := decodeOne(x86.For(tc.gen), code)
		if n != tc.len || mnem != tc.mnem {
			t.Errorf("%s under %s: %d %q, want %d %q", tc.hex, tc.gen, n, mnem, tc.len, tc.mnem)
		}
	}
}

func TestDecodeKernelVersionFlag(t *testing.T) {
	// The synthetic image is the generation's: 7.3's (IBT, call padding)
	// by default, 6.1's another.
	def := mustKpsim(t, append([]string{"decode", "--summary"}, smallSizes...)...)
	if out := mustKpsim(t, append([]string{"decode", "--summary", "--kernel-version", "7.3"}, smallSizes...)...); out != def {
		t.Error("the synthetic image decodes differently under --kernel-version 7.3, the default")
	}
	if out := mustKpsim(t, append([]string{"decode", "--summary", "--kernel-version", "6.1"}, smallSizes...)...); out == def {
		t.Error("the 6.1 synthetic image decodes as 7.3's")
	}
	_, errs, code := runKpsim(append([]string{"decode", "--kernel-version", "5.10"}, smallSizes...)...)
	if code != 2 || !strings.Contains(errs, "--kernel-version") {
		t.Errorf("--kernel-version 5.10: exit %d, %q", code, errs)
	}
}

// TestDecodeLKGSRealKernel: 6.12's native_lkgs is LKGS; its own map names
// it, 6.1's gives the kernel decoder's length.
func TestDecodeLKGSRealKernel(t *testing.T) {
	p := realkernel.FindDbg(t, image.Gen612)
	for _, tc := range []struct{ version, want string }{
		{"", "\t4\tlkgs\n"},
		{"6.12", "\t4\tlkgs\n"},
		{"6.1", "\t4\t(kernel decoder: 4 bytes; not named)\n"},
	} {
		args := []string{"decode", "--kernel", p.Vmlinux, "--cpu", "none", "--func", "native_lkgs"}
		if tc.version != "" {
			args = append(args, "--kernel-version", tc.version)
		}
		if out := mustKpsim(t, args...); !strings.Contains(out, tc.want) {
			t.Errorf("--kernel-version %q: no %q in\n%s", tc.version, tc.want, out)
		}
	}
}
