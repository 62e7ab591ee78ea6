package x86

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// The reference: the kernel's own decoder, built from a generation's source
// tree exactly as the kernel builds arch/x86/tools/insn_decoder_test (the
// awk script turns x86-opcode-map.txt into inat-tables.c; inat.c and insn.c
// are compiled with the tools/ headers), then run on every test input. The
// tests skip when gcc, awk or the tree is absent, and fail when the build
// from what is present fails.

// kernelTrees are the source trees the reference is built from.
var kernelTrees = map[image.Generation][]string{
	image.Gen61:  {"/work/src/linux-source-6.1", "/tmp/linux-6.1"},
	image.Gen612: {"/work/src/linux-source-6.12"},
	image.Gen73:  {"/work/src/linux-source-7.3"},
}

// refMain prints, for each input line of hex, the fields of struct insn
// after insn_decode(..., INSN_MODE_64).
const refMain = `#include <stdio.h>
#include <asm/insn.h>
#include <inat.c>
#include <insn.c>
int main(void) {
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		unsigned char buf[32];
		int n = 0;
		char *p = line;
		unsigned v;
		while (n < 32 && sscanf(p, "%2x", &v) == 1) {
			buf[n++] = v;
			p += 2;
		}
		struct insn insn;
		int ret = insn_decode(&insn, buf, n, INSN_MODE_64);
		if (ret) {
			printf("err\n");
			continue;
		}
		printf("len %d rex %d vex %d op %d %02x %02x %02x modrm %d %02x sib %d disp %d %d imm %d %d opnd %d addr %d\n",
			insn.length, insn.rex_prefix.nbytes, insn.vex_prefix.nbytes,
			insn.opcode.nbytes, insn.opcode.bytes[0], insn.opcode.bytes[1], insn.opcode.bytes[2],
			insn.modrm.nbytes, insn.modrm.bytes[0], insn.sib.nbytes,
			insn.displacement.nbytes, insn.displacement.value,
			insn.immediate.value, insn.immediate1.nbytes + insn.immediate2.nbytes,
			insn.opnd_bytes, insn.addr_bytes);
	}
	return 0;
}
`

// refDecoder is one generation's reference: its binary, or why there is
// none. absent says a tool or the source tree is missing (the tests skip);
// any other err is a failure to build it from what is present (they fail).
type refDecoder struct {
	path   string
	err    error
	absent bool
}

var (
	refOnce sync.Once
	refBins map[image.Generation]*refDecoder
	refDir  string // removed by TestMain
	refErr  error  // no temporary directory
)

func TestMain(m *testing.M) {
	code := m.Run()
	if refDir != "" {
		os.RemoveAll(refDir)
	}
	os.Exit(code)
}

// refSources are the files of a tree the reference is built from.
var refSources = []string{
	"tools/arch/x86/lib/insn.c", "tools/arch/x86/lib/inat.c", "tools/arch/x86/lib/x86-opcode-map.txt",
	"tools/arch/x86/tools/gen-insn-attr-x86.awk", "tools/arch/x86/include/asm/insn.h",
}

// hasRefSources says whether tree holds every file of refSources.
func hasRefSources(tree string) bool {
	for _, f := range refSources {
		if _, err := os.Stat(filepath.Join(tree, f)); err != nil {
			return false
		}
	}
	return true
}

// buildRef builds the reference decoder of every generation whose tree is
// present, once per test binary. It skips when awk, gcc or g's tree is
// absent, and fails when they are present and the build fails.
func buildRef(t *testing.T, g image.Generation) string {
	t.Helper()
	refOnce.Do(func() {
		refBins = map[image.Generation]*refDecoder{}
		dir, err := os.MkdirTemp("", "kpsim-insnref-")
		if err != nil {
			refErr = err
			return
		}
		refDir = dir
		for gen, trees := range kernelTrees {
			r := &refDecoder{err: fmt.Errorf("no %s source tree with %s (looked in %v)", gen, refSources, trees), absent: true}
			refBins[gen] = r
			for _, tree := range trees {
				if hasRefSources(tree) {
					r.path, r.absent, r.err = compileRef(filepath.Join(dir, gen.String()), tree)
					break
				}
			}
		}
	})
	if refErr != nil {
		t.Fatalf("kernel decoder of %s: %v", g, refErr)
	}
	r := refBins[g]
	switch {
	case r == nil:
		t.Fatalf("kernel decoder of %s: no source tree listed in kernelTrees", g)
	case r.absent:
		t.Skipf("kernel decoder of %s unavailable: %v", g, r.err)
	case r.err != nil:
		t.Fatalf("kernel decoder of %s: %v", g, r.err)
	}
	return r.path
}

// compileRef builds the reference from tree in dir; absent says awk or
// gcc is not installed.
func compileRef(dir, tree string) (bin string, absent bool, err error) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		return "", true, err
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", true, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	tab, err := exec.Command(awk, "-f", filepath.Join(tree, "tools/arch/x86/tools/gen-insn-attr-x86.awk"),
		filepath.Join(tree, "tools/arch/x86/lib/x86-opcode-map.txt")).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", false, fmt.Errorf("%s: gen-insn-attr-x86.awk: %v: %s", tree, err, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "inat-tables.c"), tab, 0o644); err != nil {
		return "", false, err
	}
	src := filepath.Join(dir, "ref.c")
	if err := os.WriteFile(src, []byte(refMain), 0o644); err != nil {
		return "", false, err
	}
	bin = filepath.Join(dir, "ref")
	out, err := exec.Command(gcc, "-O1", "-w", "-I"+dir, "-I"+filepath.Join(tree, "tools/arch/x86/lib"),
		"-I"+filepath.Join(tree, "tools/arch/x86/include"), "-I"+filepath.Join(tree, "tools/include"),
		"-o", bin, src).CombinedOutput()
	if err != nil {
		return "", false, fmt.Errorf("%s: gcc: %v: %s", tree, err, out)
	}
	return bin, false, nil
}

// runRef decodes every input with the reference; one output line each.
func runRef(t *testing.T, bin string, inputs [][]byte) []string {
	t.Helper()
	var in bytes.Buffer
	for _, b := range inputs {
		in.WriteString(hex.EncodeToString(b))
		in.WriteByte('\n')
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference decoder: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != len(inputs) {
		t.Fatalf("reference decoder: %d lines for %d inputs", len(lines), len(inputs))
	}
	return lines
}

// refInputs enumerates instructions over every opcode of every map under
// the prefixes that select a table (none, 66, f3, f2, REX.W, REX2, VEX2,
// VEX3 and EVEX of every map and pp, XOP), each with ModRM forms that
// exercise every /reg, SIB and displacement size, plus random bytes.
func refInputs() [][]byte {
	tail := []byte{0x25, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa}
	var heads [][]byte
	for _, p := range [][]byte{{}, {0x66}, {0xf3}, {0xf2}, {0x48}, {0x66, 0x48}, {0xf2, 0x66}, {0x67}} {
		heads = append(heads, p, append(append([]byte{}, p...), 0x0f),
			append(append([]byte{}, p...), 0x0f, 0x38), append(append([]byte{}, p...), 0x0f, 0x3a))
	}
	for _, r := range []byte{0x00, 0x08, 0x80, 0x88} { // REX2 payloads: M0/M1, W
		heads = append(heads, []byte{0xd5, r}, []byte{0x66, 0xd5, r}, []byte{0xf3, 0xd5, r}, []byte{0xf2, 0xd5, r})
	}
	for pp := byte(0); pp < 4; pp++ {
		heads = append(heads, []byte{0xc5, 0xf8 | pp}, []byte{0xc5, 0x7c | pp})
		for _, m := range []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 0xa, 0x1f} {
			heads = append(heads, []byte{0xc4, 0xe0 | m, 0x78 | pp})
		}
		heads = append(heads, []byte{0xc4, 0xe7, 0xf8 | pp})
		for m := byte(0); m < 8; m++ {
			for _, w := range []byte{0x00, 0x80} {
				heads = append(heads, []byte{0x62, 0xf0 | m, 0x7c | w | pp, 0x48})
			}
		}
	}
	for _, m := range []byte{0, 1, 7, 8, 9, 0xa, 0xb, 0x1f} {
		heads = append(heads, []byte{0x8f, 0xe0 | m, 0x78}, []byte{0x8f, 0xe0 | m, 0xf8})
	}
	heads = append(heads, []byte{0x40, 0xc5, 0xf8}, []byte{0x40, 0x62, 0xf1, 0x7c, 0x48}, []byte{0x41, 0x8f, 0xe8, 0x78},
		[]byte{0x40, 0xd5, 0x80})
	// The attribute of a group entry depends on ModRM.reg only (the
	// (11B)/(!11B) superscripts do not reach the tables), the length on
	// mod and rm: every reg once, every addressing form once.
	modrms := []byte{0x00, 0x04, 0x44, 0x84, 0x05}
	for reg := byte(1); reg < 8; reg++ {
		modrms = append(modrms, reg<<3|0xc0)
	}
	var out [][]byte
	for _, h := range heads {
		for op := 0; op < 256; op++ {
			for _, m := range modrms {
				b := append(append([]byte{}, h...), byte(op), m)
				out = append(out, append(b, tail...))
			}
		}
	}
	rng := rand.New(rand.NewPCG(21, 612))
	for range 50000 {
		b := make([]byte, 1+rng.IntN(16))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		out = append(out, b)
	}
	// Truncations of some systematic inputs: the ENODATA paths.
	for i, n := 0, len(out); i < n; i += 89 {
		b := out[i]
		for k := 1; k < len(b) && k < 8; k++ {
			out = append(out, b[:k])
		}
	}
	return out
}

var refInputsOnce = sync.OnceValue(refInputs)

var (
	refMu  sync.Mutex
	refOut = map[image.Generation][]string{}
)

// kernelLines is the reference decoder's line for every refInputs input
// and then every extra input (the same extra for every call).
func kernelLines(t *testing.T, g image.Generation, extra [][]byte) []string {
	t.Helper()
	bin := buildRef(t, g)
	refMu.Lock()
	defer refMu.Unlock()
	if out, ok := refOut[g]; ok {
		return out
	}
	out := runRef(t, bin, append(append([][]byte{}, refInputsOnce()...), extra...))
	refOut[g] = out
	return out
}

// modelLine formats an Insn the way refMain prints struct insn.
func modelLine(in Insn, err error) string {
	if err != nil {
		// insn.c's error codes are not kpsim's: it returns -ENODATA for
		// a ptr16:64 (REX.W ea) where kpsim says ErrInvalid.
		return "err"
	}
	rex := 0
	switch {
	case in.REX2[0] != 0:
		rex = 2
	case in.REX != 0:
		rex = 1
	}
	modrm := 0
	if in.HasModRM {
		modrm = 1
	}
	sib := 0
	if in.HasSIB {
		sib = 1
	}
	return fmt.Sprintf("len %d rex %d vex %d op %d %02x %02x %02x modrm %d %02x sib %d disp %d %d imm %d %d opnd %d addr %d",
		in.Len, rex, in.VEXLen, in.OpcodeLen, in.Opcode[0], in.Opcode[1], in.Opcode[2],
		modrm, in.ModRM, sib, in.DispLen, in.Disp, int32(in.Imm), in.ImmLen, in.OpndBytes, in.AddrBytes)
}

// rex2Base is the legacy encoding of a REX2 instruction: its legacy
// prefixes, 0f when REX2.M0 is set, then the bytes after the REX2 payload;
// nil when b has no REX2 prefix.
func rex2Base(b []byte) []byte {
	i := 0
	for i < len(b) && isLegacyPrefix(b[i]) {
		i++
	}
	if i+2 >= len(b) || b[i] != 0xd5 {
		return nil
	}
	base := append([]byte{}, b[:i]...)
	if b[i+1]&0x80 != 0 {
		base = append(base, 0x0f)
	}
	return append(base, b[i+2:]...)
}

// TestDecodeKernelFollowsGeneration checks the generation decoders against
// the kernels' own decoders, built from the 6.1, 6.12 and 7.3 trees, on
// every opcode of every map under every table-selecting prefix. kpsim's
// decoder is the 6.1 kernel's reduced to what real text needs (doc.go): it
// differs from insn.c on encodings no assembler emits (opcodes a map
// leaves empty for a prefix, VEX forms the map rejects, opnd_bytes of a
// few (f64) group forms), so the test is differential. Where the 6.12 or
// 7.3 kernel decodes an input as the 6.1 kernel does, kpsim's decoder of
// that generation must decode it as kpsim's 6.1 decoder does; where the
// kernel's answer changed, kpsim's must be the new kernel's, except for a
// REX2 instruction whose legacy form kpsim's 6.1 decoder already reduces
// (the REX2 opcode is looked up in the same table).
func TestDecodeKernelFollowsGeneration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three kernel decoders and runs ~700k instructions through each (~8 s)")
	}
	inputs := refInputsOnce()
	var bases [][]byte
	baseOf := map[int]int{}
	for i, b := range inputs {
		if base := rex2Base(b); base != nil {
			baseOf[i] = len(inputs) + len(bases)
			bases = append(bases, base)
		}
	}
	k61 := kernelLines(t, image.Gen61, bases)
	all := append(append([][]byte{}, inputs...), bases...)
	m61 := make([]string, len(all))
	for i, b := range all {
		m61[i] = modelLine(DecodeKernel(nil, b))
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			kg := kernelLines(t, g, bases)
			d := For(g)
			bad, changed, reduced, unmodelled := 0, 0, 0, 0
			seen := map[string]bool{}
			for i, b := range inputs {
				mg := modelLine(d.DecodeKernel(nil, b))
				var why string
				switch {
				case kg[i] == k61[i]:
					if mg != m61[i] {
						why = fmt.Sprintf("the kernel's answer did not change, kpsim's did:\n  kernel %s\n  kpsim 6.1 %s\n  kpsim %s %s", kg[i], m61[i], g, mg)
					}
				default:
					changed++
					if mg == kg[i] {
						continue
					}
					if j, ok := baseOf[i]; ok && m61[j] != k61[j] {
						reduced++
						continue
					}
					if m61[i] != k61[i] && mg == m61[i] {
						// kpsim's reduced table already differed here in
						// 6.1 and the map changed an entry it does not model.
						unmodelled++
						if k := fmt.Sprintf("% x", b[:min(len(b), 3)]); !seen[k] && len(seen) < 40 {
							seen[k] = true
							t.Logf("unmodelled: % x: kernel 6.1 %.24s; kernel %s %.24s; kpsim %.24s", b, k61[i], g, kg[i], mg)
						}
						continue
					}
					why = fmt.Sprintf("the kernel's answer changed:\n  kernel 6.1 %s\n  kernel %s %s\n  kpsim %s %s", k61[i], g, kg[i], g, mg)
				}
				if why != "" {
					bad++
					if bad <= 30 {
						t.Errorf("% x: %s", b, why)
					}
				}
			}
			t.Logf("%s: %d inputs, the kernel's decode changed on %d (%d REX2 forms of legacy encodings kpsim reduces, %d entries kpsim's reduced table does not model in either generation); %d wrong",
				g, len(inputs), changed, reduced, unmodelled, bad)
		})
	}
}
