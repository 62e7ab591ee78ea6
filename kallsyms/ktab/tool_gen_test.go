package ktab

// Byte-for-byte comparison with the real 6.12 and 7.3 scripts/kallsyms:
// each test compiles the generation's scripts/kallsyms.c (env
// KPSIM_LINUX_SRC_6_12 / KPSIM_LINUX_SRC_7_3, default
// /work/src/linux-source-6.12 / -7.3) with gcc -I scripts/include, runs it
// on a map first filtered by the generation's scripts/mksysmap (as
// link-vmlinux.sh does: sed -f scripts/mksysmap, when sed is there; else
// the model's filter) and compares its objects with Tables.Objects. 7.3's
// PC-relative `.long _text - . + (off)` is resolved as the linker does,
// with kallsyms_offsets where the map's kallsyms_offsets symbol (else
// _text) says. Skips without gcc or the source tree.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"pgregory.net/rapid"
)

type genTool struct {
	once      sync.Once
	path, src string
	err       string
}

var genTools = map[image.Generation]*genTool{image.Gen612: {}, image.Gen73: {}}

// kallsymsGenTool returns the compiled scripts/kallsyms of generation g
// and its source tree, or skips.
func kallsymsGenTool(t testing.TB, g image.Generation) (tool, src string) {
	t.Helper()
	gt := genTools[g]
	gt.once.Do(func() {
		env := "KPSIM_LINUX_SRC_" + strings.ReplaceAll(g.String(), ".", "_")
		src := os.Getenv(env)
		if src == "" {
			src = "/work/src/linux-source-" + g.String()
		}
		c := filepath.Join(src, "scripts", "kallsyms.c")
		if _, err := os.Stat(c); err != nil {
			gt.err = fmt.Sprintf("no %s kernel source (%v); set %s", g, err, env)
			return
		}
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			gt.err = "no gcc"
			return
		}
		dir, err := os.MkdirTemp("", "ktab-kallsyms-"+g.String())
		if err != nil {
			gt.err = err.Error()
			return
		}
		out := filepath.Join(dir, "kallsyms")
		if b, err := exec.Command(gcc, "-O2", "-I", filepath.Join(src, "scripts", "include"), "-o", out, c).CombinedOutput(); err != nil {
			gt.err = fmt.Sprintf("gcc %s: %v\n%s", c, err, b)
			return
		}
		gt.path, gt.src = out, src
	})
	if gt.path == "" {
		t.Skipf("real %s scripts/kallsyms unavailable: %s", g, gt.err)
	}
	return gt.path, gt.src
}

// genFlags are the tool's command-line flags for o (6.12 has no
// --base-relative flag: it always is).
func genFlags(o Options) []string {
	var f []string
	if o.AllSymbols {
		f = append(f, "--all-symbols")
	}
	if o.AbsolutePercpu {
		f = append(f, "--absolute-percpu")
	}
	if o.PCRelative {
		f = append(f, "--pc-relative")
	}
	return f
}

// genOptions are every flag combination of generation g's tool.
func genOptions(g image.Generation) []Options {
	var out []Options
	for _, all := range []bool{false, true} {
		switch g {
		case image.Gen612:
			out = append(out, Options{Gen: g, AllSymbols: all, BaseRelative: true},
				Options{Gen: g, AllSymbols: all, BaseRelative: true, AbsolutePercpu: true})
		case image.Gen73:
			out = append(out, Options{Gen: g, AllSymbols: all, PCRelative: true},
				Options{Gen: g, AllSymbols: all}) // 32-bit non-relocatable
		}
	}
	return out
}

// mksysmapFile runs the generation's scripts/mksysmap over mapFile with
// sed when there is one (else the model's filter) and returns the
// filtered map, which the tool reads.
func mksysmapFile(t fataler, src, dir, mapFile string, g image.Generation, syms []Symbol) string {
	t.Helper()
	out := filepath.Join(dir, "in.syms")
	if sed, err := exec.LookPath("sed"); err == nil {
		b, err := exec.Command(sed, "-f", filepath.Join(src, "scripts", "mksysmap"), mapFile).Output()
		if err != nil {
			t.Fatalf("sed -f mksysmap: %v", err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var b bytes.Buffer
	for _, s := range syms {
		if Filtered(g, s) != "mksysmap" {
			fmt.Fprintf(&b, "%016x %c %s\n", s.Addr, s.Type, s.Name)
		}
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// mapSymbol is the address of the last line naming sym (0 if none).
func mapSymbol(syms []Symbol, sym string) (uint64, bool) {
	var a uint64
	ok := false
	for _, s := range syms {
		if s.Name == sym && s.Module == "" {
			a, ok = s.Addr, true
		}
	}
	return a, ok
}

// parseGenS parses 6.12's and 7.3's write_src output: comments, .balign
// and .size lines, and 7.3's `.long _text - . + (off)` resolved for
// kallsyms_offsets at offsetsAddr.
func parseGenS(s []byte, text, offsetsAddr uint64) ([]Object, error) {
	var plain []string
	var pcrel []int64
	for _, line := range strings.Split(string(s), "\n") {
		if i := strings.Index(line, "/*"); i >= 0 {
			line = line[:i]
		}
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, ".balign"), strings.HasPrefix(l, ".size"):
			continue
		case strings.HasPrefix(l, ".long\t_text - . + ("):
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(l, ".long\t_text - . + ("), ")"), 0, 64)
			if err != nil {
				return nil, fmt.Errorf("line %q: %v", line, err)
			}
			pcrel = append(pcrel, v)
			l = ".long\t0x0 PCREL"
		}
		plain = append(plain, l)
	}
	var k int
	for i, l := range plain {
		if strings.HasSuffix(l, "PCREL") {
			slot := offsetsAddr + 4*uint64(k)
			v := text + uint64(pcrel[k]) - slot
			plain[i] = fmt.Sprintf(".long\t%#x", uint32(v))
			k++
		}
	}
	return parseS([]byte(strings.Join(plain, "\n")), text)
}

// compareWithGenTool builds syms with generation o.Gen's tool and Build
// and compares; it reports whether the tool succeeded.
func compareWithGenTool(t fataler, tool, src, dir, mapFile string, syms []Symbol, o Options) bool {
	t.Helper()
	in := mksysmapFile(t, src, dir, mapFile, o.Gen, syms)
	cmd := exec.Command(tool, append(genFlags(o), in)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	got, berr := Build(syms, o)
	if err != nil {
		if _, isExit := err.(*exec.ExitError); !isExit {
			t.Fatalf("run %s: %v", tool, err)
		}
		if berr == nil {
			t.Fatalf("%s %v: tool failed (%s) but Build succeeded", o.Gen, genFlags(o), strings.TrimSpace(se.String()))
		}
		return false
	}
	if berr != nil {
		if strings.Contains(berr.Error(), "link failure") {
			return false // the tool's output would not link
		}
		t.Fatalf("%s %v: Build: %v (tool succeeded)", o.Gen, genFlags(o), berr)
	}
	// _text and kallsyms_offsets as the tool read them (past mksysmap):
	// the link puts them there.
	read := make([]Symbol, 0, len(syms))
	for _, s := range syms {
		if Filtered(o.Gen, s) != "mksysmap" {
			read = append(read, s)
		}
	}
	text, _ := mapSymbol(read, "_text")
	offs, ok := mapSymbol(read, ObjOffsets)
	if !ok {
		offs = text
	}
	want, perr := parseGenS(so.Bytes(), text, offs)
	if perr != nil {
		t.Fatalf("parse tool output: %v", perr)
	}
	if err := diffObjects(want, got.Objects()); err != nil {
		t.Fatalf("%s %v: %v", o.Gen, genFlags(o), err)
	}
	return true
}

func TestGenToolFixture(t *testing.T) {
	syms := loadFixture(t)
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			tool, src := kallsymsGenTool(t, g)
			dir := t.TempDir()
			mapFile := writeMap(t, syms)
			built := 0
			for _, o := range genOptions(g) {
				if compareWithGenTool(t, tool, src, dir, mapFile, syms, o) {
					built++
				} else {
					// 6.12 without --absolute-percpu: the per-cpu
					// symbols at 0 put the relative base at 0.
					t.Logf("%v: the tool and Build failed on the fixture", genFlags(o))
				}
			}
			if built == 0 {
				t.Fatal("no option set built the fixture")
			}
		})
	}
}

// Random symbol lists (range symbols, section bounds, per-cpu ranges,
// weak and linker-provided names, names mksysmap or is_ignored_symbol
// drop, the kallsyms_* objects, long names, address ties) through the
// real 6.12 and 7.3 tools and Build.
func TestGenToolRandom(t *testing.T) {
	special := []string{"_text", "_stext", "_etext", "_sinittext", "_einittext", "__per_cpu_start", "__per_cpu_end",
		"__start_x", "__stop_x", "__end_y", "__foo_start", "__foo_end", "kallsyms_markers", "kallsyms_offsets",
		"__kcfi_typeid_f", "x_veneer", "__gp", "a.long_branch.b", ".Ltmp", "$x", "__crc_f", "__kstrtab_f",
		"__AArch64ADRPThunk_x", "L0", "__mod_device_table__x", "__UNIQUE_ID_modinfo_12", "__UNIQUE_ID_modinfo_x"}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			tool, src := kallsymsGenTool(t, g)
			opts := genOptions(g)
			runs, built := 0, 0
			rapid.Check(t, func(rt *rapid.T) {
				syms := drawToolSymbols(rt, special, "TTTttWwDdbRAaUNnuw", 511)
				o := opts[rapid.IntRange(0, len(opts)-1).Draw(rt, "options")]
				runs++
				if compareWithGenTool(rt, tool, src, t.TempDir(), writeMap(t, syms), syms, o) {
					built++
				}
			})
			t.Logf("%s: %d random lists, %d built by the tool (the rest failed in both)", g, runs, built)
			if built == 0 {
				t.Fatal("no random list was built by the tool")
			}
		})
	}
}
