package x86

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// genCase is an instruction whose decode differs between the generations'
// opcode maps or insn.c rules. len is DecodeKernel's length under 6.1, 6.12
// and 7.3 (0: the kernel's decoder fails); name is Decode's mnemonic under
// each ("": Decode returns ErrInvalid); objdump is the generation whose
// length binutils' objdump shows (GenUnknown: none).
type genCase struct {
	what    string
	hex     string
	len     [3]int
	name    [3]string
	objdump image.Generation
}

var genCases = []genCase{
	// Names the 6.12 map added at unchanged lengths.
	{"LKGS: Grp6 /6 (F2), 6.12", "f2 0f 00 f0", [3]int{4, 4, 4}, [3]string{"", "lkgs", "lkgs"}, image.Gen73},
	{"LKGS, memory operand", "f2 0f 00 30", [3]int{4, 4, 4}, [3]string{"", "lkgs", "lkgs"}, image.Gen73},
	{"WRMSRNS: Grp7 (110),(11B)", "0f 01 c6", [3]int{3, 3, 3}, [3]string{"grp7", "wrmsrns", "wrmsrns"}, image.Gen73},
	{"ERETS: Grp7 (F2),(010),(11B)", "f2 0f 01 ca", [3]int{4, 4, 4}, [3]string{"clac", "erets", "erets"}, image.Gen73},
	{"ERETU: Grp7 (F3),(010),(11B)", "f3 0f 01 ca", [3]int{4, 4, 4}, [3]string{"clac", "eretu", "eretu"}, image.Gen73},
	{"PREFETCHIT0: Grp16 /7", "0f 18 38", [3]int{3, 3, 3}, [3]string{"nop", "prefetchit0", "prefetchit0"}, image.Gen73},

	// REX2 (6.12): d5 is a prefix, not AAD Ib.
	{"REX2.W add %rax,%rax", "d5 08 01 c0", [3]int{2, 4, 4}, [3]string{"aad", "", ""}, image.Gen73},
	{"REX2.M0 imul (0f af)", "d5 80 af c0", [3]int{2, 4, 4}, [3]string{"aad", "", ""}, image.Gen73},
	{"REX2.M0 0f 38: one escape byte, no ModRM", "d5 80 38 00", [3]int{2, 3, 3}, [3]string{"aad", "", ""}, GenNone},
	{"REX2 + VEX byte: LES Gz,Mp, no VEX", "d5 00 c5 f8 77", [3]int{2, 4, 4}, [3]string{"aad", "", ""}, GenNone},
	{"REX2 jmpabs (a1 Ov)", "d5 00 a1 88 77 66 55 44 33 22 11", [3]int{2, 11, 11}, [3]string{"aad", "", ""}, image.Gen73},

	// EVEX map 4 (APX) and VEX map 7, 6.12.
	{"EVEX map 4 add (es)", "62 f4 7c 08 01 c0", [3]int{0, 6, 6}, [3]string{"", "", ""}, image.Gen73},
	{"EVEX map 4 Grp1 Iz, pp=66: 2-byte operand (es)", "62 f4 7d 08 81 c0 34 12", [3]int{0, 8, 8}, [3]string{"", "", ""}, image.Gen73},
	{"EVEX map 4 Grp1 Iz, W=1", "62 f4 fd 08 81 c0 78 56 34 12", [3]int{0, 10, 10}, [3]string{"", "", ""}, image.Gen73},
	{"EVEX map 4 Grp3 test Iz", "62 f4 7c 08 f7 c0 78 56 34 12", [3]int{0, 10, 10}, [3]string{"", "", ""}, image.Gen73},
	{"EVEX map 4 opcode without a form for pp=66", "62 f4 7d 08 00 c0", [3]int{0, 0, 0}, [3]string{"", "", ""}, GenNone},
	{"VEX3 map 4: (ev) only", "c4 e4 78 01 c0", [3]int{0, 0, 0}, [3]string{"", "", ""}, GenNone},
	{"URDMSR: VEX map 7 f8 (F2) Id", "c4 e7 7b f8 c0 78 56 34 12", [3]int{0, 9, 9}, [3]string{"", "", ""}, image.Gen73},
	{"VEX map 7 f8 without F2/F3", "c4 e7 78 f8 c0 78 56 34 12", [3]int{0, 0, 0}, [3]string{"", "", ""}, GenNone},

	// XOP (7.3): 8f with ModRM.reg != 0 is a prefix.
	{"XOP 9h blcfill (GrpXOP1)", "8f e9 78 01 c8", [3]int{2, 2, 5}, [3]string{"", "", ""}, image.Gen73},
	{"XOP 8h vprotb Ib", "8f e8 78 c0 c0 05", [3]int{2, 2, 6}, [3]string{"", "", ""}, image.Gen73},
	{"XOP Ah lwpins Id (GrpXOP4)", "8f ea 78 12 c0 44 33 22 11", [3]int{2, 2, 9}, [3]string{"", "", ""}, image.Gen73},
	{"XOP Ah bextr Id", "8f ea 78 10 c0 44 33 22 11", [3]int{2, 2, 9}, [3]string{"", "", ""}, image.Gen73},
	{"XOP map Bh: no table", "8f eb 78 10 c0", [3]int{2, 2, 0}, [3]string{"", "", ""}, GenNone},
	{"8f /0 stays POP Ev", "8f c0", [3]int{2, 2, 2}, [3]string{"pop", "pop", "pop"}, image.Gen73},

	// INAT_INV64 (7.3): (i64) opcodes decode as their lone byte.
	{"JMP-far Ap (i64)", "ea 01 02 03 04 05 06", [3]int{7, 7, 1}, [3]string{"ljmp", "ljmp", ""}, image.Gen73},
	{"CALLF Ap (i64)", "9a 01 02 03 04 05 06", [3]int{7, 7, 1}, [3]string{"lcall", "lcall", ""}, image.Gen73},
	{"AAM Ib (i64)", "d4 0a", [3]int{2, 2, 1}, [3]string{"aam", "aam", ""}, image.Gen73},
	{"Grp1 Eb,Ib (1A),(i64)", "82 c0 01", [3]int{3, 3, 1}, [3]string{"add", "add", ""}, image.Gen73},
	{"PUSH ES (i64)", "06", [3]int{1, 1, 1}, [3]string{"push", "push", ""}, image.Gen73},
	{"INTO (i64)", "ce", [3]int{1, 1, 1}, [3]string{"into", "into", ""}, image.Gen73},
	{"AAD Ib (i64) | REX2 (o64): not INV64", "40 d5 0a", [3]int{3, 3, 3}, [3]string{"aad", "aad", "aad"}, GenNone},

	// VEX after REX: 7.3's insn_get_prefixes tests the REX's attribute.
	{"REX + VEX2: vzeroupper, LDS in 7.3", "40 c5 f8 77", [3]int{4, 4, 3}, [3]string{"vzeroupper", "vzeroupper", ""}, image.Gen612},
}

// GenNone marks a genCase objdump is not compared on.
const GenNone = image.GenUnknown

func genIndex(g image.Generation) int {
	for i, x := range image.Generations {
		if x == g {
			return i
		}
	}
	panic(fmt.Sprint("no generation ", g))
}

func TestDecodePerGeneration(t *testing.T) {
	for _, tc := range genCases {
		for gi, g := range image.Generations {
			d := For(g)
			for _, pad := range pads {
				code := append(hx(t, tc.hex), hx(t, pad)...)
				in, err := d.DecodeKernel(nil, code)
				got := in.Len
				if err != nil {
					got = 0
				}
				if got != tc.len[gi] {
					t.Errorf("%s (%s) under %s [+%s]: DecodeKernel len %d (%v), want %d", tc.what, tc.hex, g, pad, got, err, tc.len[gi])
				}
				named, err := d.Decode(nil, code)
				switch {
				case tc.name[gi] == "":
					if !errors.Is(err, ErrInvalid) {
						t.Errorf("%s (%s) under %s: Decode %q (%v), want ErrInvalid", tc.what, tc.hex, g, named.Mnemonic, err)
					}
				case err != nil || named.Mnemonic != tc.name[gi] || named.Len != tc.len[gi]:
					t.Errorf("%s (%s) under %s: Decode %q len %d (%v), want %q len %d", tc.what, tc.hex, g, named.Mnemonic, named.Len, err, tc.name[gi], tc.len[gi])
				}
			}
		}
	}
}

// TestDecodePerGenerationMatchesKernel decodes the table with each
// generation's own insn.c (TestDecodeKernelFollowsGeneration's reference).
func TestDecodePerGenerationMatchesKernel(t *testing.T) {
	var inputs [][]byte
	for _, tc := range genCases {
		inputs = append(inputs, hx(t, tc.hex))
	}
	for gi, g := range image.Generations {
		lines := runRef(t, buildRef(t, g), inputs)
		for i, tc := range genCases {
			var l int
			if _, err := fmt.Sscanf(lines[i], "len %d", &l); err != nil {
				l = 0
			}
			if l != tc.len[gi] {
				t.Errorf("%s (%s): the %s kernel's decoder says %q, the table %d", tc.what, tc.hex, g, lines[i], tc.len[gi])
			}
		}
	}
}

// TestDecodePerGenerationObjdump compares each case, alone, with binutils:
// its first instruction's length must be the table's for the generation
// objdump follows. An instruction objdump calls (bad) where the newest
// generation names or sizes it (LKGS and APX before binutils 2.41/2.42) is
// skipped as too new for the installed binutils.
func TestDecodePerGenerationObjdump(t *testing.T) {
	for _, tc := range genCases {
		if tc.objdump == GenNone {
			continue
		}
		n, text := objdumpFirst(t, hx(t, tc.hex))
		want := tc.len[genIndex(tc.objdump)]
		if strings.Contains(text, "(bad)") && want != 1 {
			t.Logf("%s (%s): objdump says %q: binutils too old for it", tc.what, tc.hex, text)
			continue
		}
		if n != want {
			t.Errorf("%s (%s): objdump len %d %q, kpsim %s len %d", tc.what, tc.hex, n, text, tc.objdump, want)
		}
	}
}

// TestDecodersAgreeOnKernelText: on a kernel-like instruction mix (no
// (i64), REX2, XOP or APX encodings) every generation decodes alike.
func TestDecodersAgreeOnKernelText(t *testing.T) {
	for _, g := range image.Generations {
		d := For(g)
		for off := 0; off < len(benchText); {
			want, err := Decode(nil, benchText[off:])
			if err != nil {
				t.Fatalf("6.1 at %d: %v", off, err)
			}
			got, err := d.Decode(nil, benchText[off:])
			if err != nil || got != want {
				t.Fatalf("%s at %d: %+v %v, 6.1 %+v", g, off, got, err, want)
			}
			k, err := d.DecodeKernel(nil, benchText[off:])
			if err != nil || k.Len != want.Len {
				t.Fatalf("%s DecodeKernel at %d: len %d %v, want %d", g, off, k.Len, err, want.Len)
			}
			for _, f := range []func() (int, error){
				func() (int, error) { return d.JumpEntrySizeSim(nil, benchText[off:]) },
				func() (int, error) { return d.JumpEntrySizeDecode(nil, benchText[off:]) },
			} {
				n, err := f()
				n61, err61 := JumpEntrySizeDecode(nil, benchText[off:])
				if n != n61 || (err == nil) != (err61 == nil) {
					t.Fatalf("%s jump entry size at %d: %d %v, 6.1 %d %v", g, off, n, err, n61, err61)
				}
			}
			off += want.Len
		}
	}
}

func TestFor(t *testing.T) {
	if For(image.GenUnknown) != For(image.Gen61) {
		t.Error("GenUnknown must read as 6.1")
	}
	for _, g := range image.Generations {
		if got := For(g).Generation(); got != g {
			t.Errorf("For(%s).Generation() = %s", g, got)
		}
	}
}

// objdumpFirst is the length and text of the first instruction objdump
// finds in code.
func objdumpFirst(t *testing.T, code []byte) (int, string) {
	t.Helper()
	out := objdumpBinary(t, code)
	for _, line := range strings.Split(string(out), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) < 3 || strings.TrimSpace(parts[0]) != "0:" {
			continue
		}
		return len(strings.Fields(parts[1])), strings.Join(strings.Fields(parts[2]), " ")
	}
	t.Fatalf("objdump printed no instruction for % x", code)
	return 0, ""
}

func FuzzDecoders(f *testing.F) {
	for _, tc := range genCases {
		f.Add(hx(nil, tc.hex))
	}
	f.Add(benchText[:64])
	f.Fuzz(func(t *testing.T, code []byte) {
		for _, g := range image.Generations {
			d := For(g)
			k, kerr := d.DecodeKernel(nil, code)
			if kerr == nil && (k.Len < 1 || k.Len > MaxInsnSize || k.Len > len(code)) {
				t.Fatalf("%s % x: DecodeKernel len %d", g, code, k.Len)
			}
			in, err := d.Decode(nil, code)
			if err != nil {
				continue
			}
			if kerr != nil || k.Len != in.Len {
				t.Fatalf("%s % x: Decode len %d, DecodeKernel len %d %v", g, code, in.Len, k.Len, kerr)
			}
			if in.Mnemonic == "" {
				t.Fatalf("%s % x: no mnemonic", g, code)
			}
			in2, err := d.Decode(nil, code[:in.Len])
			if err != nil || in2 != in {
				t.Fatalf("%s % x: truncated to %d: %+v %v, was %+v", g, code, in.Len, in2, err, in)
			}
		}
	})
}

// TestAgainstObjdumpKernels walks the .text of the 6.12 and 7.3 debug
// vmlinux with objdump's instruction boundaries and checks every length
// with that generation's DecodeKernel, and counts the instructions Decode
// cannot name. Set KPSIM_X86_KERNELS=1 to run it (objdump takes ~10 s a
// kernel); it skips kernels `make real-kernel KVER=... DBG=1` did not fetch.
func TestAgainstObjdumpKernels(t *testing.T) {
	if os.Getenv("KPSIM_X86_KERNELS") == "" {
		t.Skip("set KPSIM_X86_KERNELS=1 to compare the 6.12 and 7.3 vmlinux .text with objdump")
	}
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("objdump not installed")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			compareObjdumpText(t, For(g), realkernel.FindDbg(t, g).Vmlinux)
		})
	}
}

func compareObjdumpText(t *testing.T, d *Decoder, path string) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	if sec == nil {
		t.Fatalf("%s: no .text", path)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("objdump", "-d", "-w", "-j", ".text", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, bad, unnamed, explained := 0, 0, 0, 0
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) < 3 || !strings.HasSuffix(parts[0], ":") {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(parts[0], ":")), 16, 64)
		if err != nil || addr < sec.Addr || addr >= sec.Addr+uint64(len(data)) {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(parts[1]), " ", ""))
		if err != nil {
			continue
		}
		off := addr - sec.Addr
		code := data[off:min(uint64(len(data)), off+MaxInsnSize)]
		n++
		in, err := d.DecodeKernel(nil, code)
		if err != nil || in.Len != len(b) {
			if why := objdumpDiffers(code, parts[2]); why != "" {
				explained++
				t.Logf("%#x: % x %s: kpsim len %d: %s", addr, b, parts[2], in.Len, why)
				continue
			}
			bad++
			if bad <= 20 {
				t.Errorf("%#x: % x %s: kpsim %s len %d err %v", addr, b, parts[2], d.Generation(), in.Len, err)
			}
			continue
		}
		if _, err := d.Decode(nil, code); err != nil && !strings.Contains(parts[2], "(bad)") {
			unnamed++
			if unnamed <= 10 {
				t.Logf("%#x: % x %s: not named: %v", addr, b, parts[2], err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d instructions, %d lengths differ from objdump (and %d explained), %d not named by Decode", d.Generation(), n, bad, explained, unnamed)
}

// objdumpDiffers explains why objdump's instruction at code (its text
// text) is not the kernel decoder's, or "".
func objdumpDiffers(code []byte, text string) string {
	switch f := strings.Fields(text); {
	case len(code) >= 5 && (bytes.Equal(code[:5], xenPrefix[:]) || bytes.Equal(code[:5], kvmPrefix[:])):
		return "a Xen/KVM emulate prefix is part of the next instruction (insn_get_emulate_prefix)"
	case strings.Contains(text, "(bad)"):
		return "objdump is older than the instruction"
	case len(f) == 1 && (f[0] == ".byte" || strings.HasPrefix(f[0], "rex")), len(f) == 2 && f[0] == ".byte":
		return "objdump cut the instruction at a symbol (overlapping instructions: srso/retbleed untrain)"
	}
	return ""
}

// TestDecodeNamesLaterKernelText: instructions of the 6.12/7.3 text that
// x86asm v0.33.0 cannot name, at the kernel decoder's (and objdump's)
// lengths, in every generation (the 6.1 map has them too).
func TestDecodeNamesLaterKernelText(t *testing.T) {
	for _, tc := range []struct {
		hex, name string
		len       int
	}{
		{"67 48 0f b9 3a", "ud1", 5},
		{"0f b9 40 04", "ud1", 4},
		{"f3 0f a6 d0", "xsha256", 4},
		{"f3 0f a6 c8", "xsha1", 4},
		{"f3 0f a7 c8", "xcryptecb", 4},
		{"0f a7 c0", "xstore", 3},
		{"f2 0f 01 fd", "rmpread", 4},
	} {
		for _, g := range image.Generations {
			in, err := For(g).Decode(nil, hx(t, tc.hex))
			if err != nil || in.Mnemonic != tc.name || in.Len != tc.len {
				t.Errorf("%s under %s: %q len %d %v, want %q len %d", tc.hex, g, in.Mnemonic, in.Len, err, tc.name, tc.len)
			}
		}
	}
}
