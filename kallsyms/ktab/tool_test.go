package ktab

// Byte-for-byte comparison with the real 6.1 scripts/kallsyms: the test
// compiles scripts/kallsyms.c from a kernel source tree (env
// KPSIM_LINUX_SRC, default /work/linux-src/usr/src/linux-source-6.1) with
// gcc into a temporary directory, runs it, parses the .S it prints (the
// .long/.byte/.short/.asciz/PTR directives) and compares every object with
// Tables.Objects. It skips without gcc or the source tree. The committed
// golden fixture (TestGoldenFixture) checks the same without either.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/internal/race"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/fixture.golden from the real scripts/kallsyms")

const defaultLinuxSrc = "/work/linux-src/usr/src/linux-source-6.1"

var (
	toolOnce sync.Once
	toolPath string
	toolErr  string
	toolDir  string
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if toolDir != "" {
		os.RemoveAll(toolDir)
	}
	os.Exit(code)
}

// kallsymsTool returns the path of a freshly compiled 6.1 scripts/kallsyms,
// or skips the test.
func kallsymsTool(t testing.TB) string {
	t.Helper()
	toolOnce.Do(func() {
		src := os.Getenv("KPSIM_LINUX_SRC")
		if src == "" {
			src = defaultLinuxSrc
		}
		c := filepath.Join(src, "scripts", "kallsyms.c")
		if _, err := os.Stat(c); err != nil {
			toolErr = fmt.Sprintf("no kernel source (%v); set KPSIM_LINUX_SRC", err)
			return
		}
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			toolErr = "no gcc"
			return
		}
		dir, err := os.MkdirTemp("", "ktab-kallsyms")
		if err != nil {
			toolErr = err.Error()
			return
		}
		toolDir = dir
		out := filepath.Join(dir, "kallsyms")
		if b, err := exec.Command(gcc, "-O2", "-o", out, c).CombinedOutput(); err != nil {
			toolErr = fmt.Sprintf("gcc %s: %v\n%s", c, err, b)
			return
		}
		toolPath = out
	})
	if toolPath == "" {
		t.Skip("real scripts/kallsyms unavailable: " + toolErr)
	}
	return toolPath
}

// fataler is what the comparison helpers need of testing.TB and rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func (o Options) flags() []string {
	var f []string
	if o.AllSymbols {
		f = append(f, "--all-symbols")
	}
	if o.AbsolutePercpu {
		f = append(f, "--absolute-percpu")
	}
	if o.BaseRelative {
		f = append(f, "--base-relative")
	}
	return f
}

func (o Options) String() string {
	if f := o.flags(); len(f) > 0 {
		return strings.Join(f, " ")
	}
	return "(none)"
}

func allOptions() []Options {
	var out []Options
	for m := range 8 {
		out = append(out, Options{AllSymbols: m&1 != 0, AbsolutePercpu: m&2 != 0, BaseRelative: m&4 != 0})
	}
	return out
}

// runTool runs the real tool on a map file; ok is false when it exits
// non-zero (a build failure).
func runTool(t fataler, tool, mapFile string, o Options) (objs []Object, ok bool, stderr string) {
	t.Helper()
	cmd := exec.Command(tool, append(o.flags(), mapFile)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if err != nil {
		if _, isExit := err.(*exec.ExitError); !isExit {
			t.Fatalf("run %s: %v", tool, err)
		}
		return nil, false, se.String()
	}
	objs, perr := parseS(so.Bytes(), mapText(t, mapFile))
	if perr != nil {
		t.Fatalf("parse tool output: %v", perr)
	}
	return objs, true, se.String()
}

// mapText returns _text's value the way read_symbol records it (the last
// "_text" line whose name fscanf reads), for resolving "_text + off".
func mapText(t fataler, mapFile string) uint64 {
	f, err := os.Open(mapFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var text uint64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 3 && fs[2] == "_text" {
			text, _ = strconv.ParseUint(fs[0], 16, 64)
		}
	}
	return text
}

// parseS parses write_src's output into objects (64-bit: PTR = .quad).
func parseS(s []byte, text uint64) ([]Object, error) {
	var objs []Object
	cur := -1
	for ln, line := range strings.Split(string(s), "\n") {
		l := strings.TrimSpace(line)
		fail := func(err error) error { return fmt.Errorf("line %d %q: %v", ln+1, line, err) }
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ".globl") || l == "ALGN" || strings.HasPrefix(l, ".section"):
			continue
		case strings.HasSuffix(l, ":"):
			objs = append(objs, Object{Name: strings.TrimSuffix(l, ":")})
			cur = len(objs) - 1
			continue
		}
		if cur < 0 {
			return nil, fail(fmt.Errorf("data before a label"))
		}
		o := &objs[cur]
		dir, arg, _ := strings.Cut(l, "\t")
		if dir == l {
			dir, arg, _ = strings.Cut(l, " ")
		}
		arg = strings.TrimSpace(arg)
		switch dir {
		case ".asciz":
			i, j := strings.IndexByte(arg, '"'), strings.LastIndexByte(arg, '"')
			if i < 0 || j <= i {
				return nil, fail(fmt.Errorf("bad .asciz"))
			}
			o.Data = append(append(o.Data, arg[i+1:j]...), 0)
		case ".byte":
			for _, f := range strings.Split(arg, ",") {
				v, err := strconv.ParseUint(strings.TrimSpace(f), 0, 8)
				if err != nil {
					return nil, fail(err)
				}
				o.Data = append(o.Data, byte(v))
			}
		case ".short":
			v, err := strconv.ParseInt(arg, 0, 32)
			if err != nil {
				return nil, fail(err)
			}
			o.Data = binary.LittleEndian.AppendUint16(o.Data, uint16(v))
		case ".long":
			v, err := strconv.ParseUint(arg, 0, 32)
			if err != nil {
				return nil, fail(err)
			}
			o.Data = binary.LittleEndian.AppendUint32(o.Data, uint32(v))
		case "PTR":
			var v uint64
			var err error
			switch {
			case strings.HasPrefix(arg, "_text + "):
				v, err = strconv.ParseUint(strings.TrimPrefix(arg, "_text + "), 0, 64)
				v = text + v
			case strings.HasPrefix(arg, "_text - "):
				v, err = strconv.ParseUint(strings.TrimPrefix(arg, "_text - "), 0, 64)
				v = text - v
			default:
				v, err = strconv.ParseUint(arg, 0, 64)
			}
			if err != nil {
				return nil, fail(err)
			}
			o.Data = binary.LittleEndian.AppendUint64(o.Data, v)
		default:
			return nil, fail(fmt.Errorf("unknown directive %q", dir))
		}
	}
	return objs, nil
}

func writeMap(t testing.TB, syms []Symbol) string {
	t.Helper()
	var b bytes.Buffer
	for _, s := range syms {
		fmt.Fprintf(&b, "%016x ", s.Addr)
		b.WriteByte(s.Type)
		b.WriteString(" " + s.Name + "\n")
	}
	f := filepath.Join(t.TempDir(), "in.map")
	if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func diffObjects(want, got []Object) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d objects, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i].Name != got[i].Name {
			return fmt.Errorf("object %d is %s, want %s", i, got[i].Name, want[i].Name)
		}
		w, g := want[i].Data, got[i].Data
		if !bytes.Equal(w, g) {
			j := 0
			for j < len(w) && j < len(g) && w[j] == g[j] {
				j++
			}
			return fmt.Errorf("%s: %d bytes, want %d; first difference at byte %d (got % x, want % x)",
				want[i].Name, len(g), len(w), j, window(g, j), window(w, j))
		}
	}
	return nil
}

func window(b []byte, i int) []byte {
	return b[min(i, len(b)):min(i+8, len(b))]
}

// compareWithTool builds syms (3-field symbols) with both and compares.
// It reports whether the tool succeeded.
func compareWithTool(t fataler, tool, mapFile string, syms []Symbol, o Options) bool {
	t.Helper()
	want, ok, stderr := runTool(t, tool, mapFile, o)
	got, err := Build(syms, o)
	if !ok {
		if err == nil {
			t.Fatalf("%v: tool failed (%s) but Build succeeded", o, strings.TrimSpace(stderr))
		}
		return false
	}
	if err != nil {
		t.Fatalf("%v: Build: %v (tool succeeded)", o, err)
	}
	if err := diffObjects(want, got.Objects()); err != nil {
		t.Fatalf("%v: %v", o, err)
	}
	return true
}

// loadMap reads a 3-field map like the tool does, keeping names of 512+
// bytes (ParseSymbols refuses them; Build skips them as 6.1 does).
func loadMap(t testing.TB, path string) []Symbol {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var syms []Symbol
	for i, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) == 0 {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if len(fs) != 3 || err != nil || len(fs[1]) != 1 {
			t.Fatalf("%s:%d: bad line", path, i+1)
		}
		syms = append(syms, Symbol{Addr: a, Type: fs[1][0], Name: fs[2]})
	}
	return syms
}

func TestToolFixture(t *testing.T) {
	tool := kallsymsTool(t)
	syms := loadFixture(t)
	for _, o := range allOptions() {
		compareWithTool(t, tool, "testdata/fixture.map", syms, o)
	}
}

// procKallsyms returns the 3-field lines of /proc/kallsyms, or skips.
func procKallsyms(t testing.TB) []Symbol {
	t.Helper()
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Skipf("/proc/kallsyms: %v", err)
	}
	syms, err := ParseSymbols("/proc/kallsyms", bytes.NewReader(b))
	if err != nil {
		t.Skipf("parse /proc/kallsyms: %v", err)
	}
	core := syms[:0]
	nonzero := false
	for _, s := range syms {
		if s.Module == "" {
			core = append(core, s)
			nonzero = nonzero || s.Addr != 0
		}
	}
	if !nonzero {
		t.Skip("/proc/kallsyms addresses are all zero (unprivileged)")
	}
	return core
}

func TestToolProcKallsyms(t *testing.T) {
	tool := kallsymsTool(t)
	syms := procKallsyms(t)
	if race.Enabled {
		syms = syms[:min(len(syms), 30000)]
	}
	mapFile := writeMap(t, syms)
	opts := []Options{{BaseRelative: true}, {BaseRelative: true, AbsolutePercpu: true}, {}, {AllSymbols: true, BaseRelative: true}}
	if race.Enabled {
		// The prefix has no _etext: keep everything.
		opts = []Options{{AllSymbols: true, BaseRelative: true, AbsolutePercpu: true}}
	}
	for _, o := range opts {
		if !compareWithTool(t, tool, mapFile, syms, o) {
			t.Fatalf("%v: the tool failed on /proc/kallsyms", o)
		}
	}
}
