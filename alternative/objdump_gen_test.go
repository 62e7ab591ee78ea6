package alternative_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// objdumpGenExceptions are the 6.12 / 7.3 functions whose instruction
// boundaries a linear sweep cannot match, each with its reason in the
// kernel source.
var objdumpGenExceptions = map[string]string{
	// arch/x86/include/asm/gsseg.h: native_lkgs is "lkgs %di"
	// (F2 0F 00 /6, FRED's load-kernel-GS, 4 bytes) as an alternative's
	// replacement; binutils 2.40 does not know LKGS and sweeps
	// "repnz (bad)" (3 bytes) then "imul %ecx", so every later boundary
	// of the function differs. The kernel decoder (insn_decode_kernel,
	// x86-opcode-map.txt: "0f 00 /6 LKGS Ew (F2)") agrees with kpsim.
	"native_lkgs": "LKGS (f2 0f 00 /6) unknown to objdump 2.40: it decodes 3 bytes of (bad)",
	// arch/x86/kernel/cpu/common.c / asm/gsseg.h: native_load_gs_index
	// inlines the same LKGS alternative.
	"native_load_gs_index": "LKGS (f2 0f 00 /6) unknown to objdump 2.40, as native_lkgs",
}

// TestRealGenBoundariesMatchObjdump: over every function of the 6.12 and
// 7.3 core text, the instruction starts kpsim's kernel decoder
// (x86.DecodeKernel, insn_decode_kernel's lengths, what can_probe and
// can_optimize walk) equal
// objdump's, for the text as built and booted for the default CPU
// (objdump reads a copy of the vmlinux with the patched text), in at least
// 99.95% of functions; every other function is named with its reason.
// objdump takes ~25 s per image: skipped under -short.
func TestRealGenBoundariesMatchObjdump(t *testing.T) {
	if testing.Short() {
		t.Skip("runs objdump over the whole real 6.12 and 7.3 .text (four times ~25 s)")
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (binutils) not installed")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		for _, cpu := range []string{alternative.CPUNone, alternative.DefaultCPU} {
			t.Run(g.String()+"/"+cpu, func(t *testing.T) {
				var m *elfImage
				if cpu == alternative.CPUNone {
					m = openELF(t, g)
				} else {
					c, err := alternative.LookupCPU(cpu)
					if err != nil {
						t.Fatal(err)
					}
					m, _, _ = bootELF(t, g, c)
				}
				compareGenObjdump(t, objdump, m)
			})
		}
	}
}

func compareGenObjdump(t *testing.T, objdump string, m *elfImage) {
	f := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(f, m.data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(objdump, "-d", "-w", "-j", ".text", f)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var starts []uint64
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 18 || line[0] != ' ' && line[0] != 'f' {
			continue
		}
		l := bytes.TrimLeft(line, " ")
		i := bytes.IndexByte(l, ':')
		if i <= 0 || i+1 >= len(l) || l[i+1] != '\t' {
			continue
		}
		a, err := strconv.ParseUint(string(l[:i]), 16, 64)
		if err != nil {
			continue
		}
		starts = append(starts, a)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	isStart := func(a uint64) bool {
		i := sort.Search(len(starts), func(i int) bool { return starts[i] >= a })
		return i < len(starts) && starts[i] == a
	}
	var funcs, insns, excused int
	var bad []string
	for _, s := range m.funcs {
		funcs++
		code := m.Text(s.Value, int(s.Size))
		ok := true
		var at uint64
		for off := 0; off < len(code); {
			a := s.Value + uint64(off)
			insns++
			if !isStart(a) {
				ok, at = false, a
				break
			}
			in, err := x86.DecodeKernel(nil, code[off:])
			if err != nil {
				ok, at = false, a
				break
			}
			off += in.Len
		}
		if ok {
			continue
		}
		if why, known := objdumpGenExceptions[s.Name]; known {
			excused++
			t.Logf("exception %s: %s", s.Name, why)
			continue
		}
		bad = append(bad, s.Name+"+"+strconv.FormatUint(at-s.Value, 16)+": "+hexOf(m.Text(at, 8)))
	}
	pct := 100 * float64(funcs-excused-len(bad)) / float64(funcs)
	t.Logf("%d functions, %d instructions compared with objdump: %.4f%% equal; %d documented exceptions; %d other functions disagree", funcs, insns, pct, excused, len(bad))
	for _, b := range bad {
		t.Logf("disagrees: %s", b)
	}
	if pct < 99.95 {
		t.Errorf("only %.4f%% of functions agree with objdump", pct)
	}
	if len(bad) > 0 {
		t.Errorf("%d functions disagree with objdump without a documented reason:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

func hexOf(b []byte) string {
	var sb strings.Builder
	for i, c := range b {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.FormatUint(uint64(c)|0x100, 16)[1:])
	}
	return sb.String()
}
