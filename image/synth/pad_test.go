package synth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// TestGasNopTable: the gap fills for 1..15 bytes are the sequences gas and
// ld 2.40 emit (gas: one NOP up to 11 bytes, then the 11-byte NOP and the
// rest; ld: 10-byte NOPs, then the rest).
func TestGasNopTable(t *testing.T) {
	gas := map[int]string{
		1: "90", 2: "6690", 3: "0f1f00", 4: "0f1f4000", 5: "0f1f440000", 6: "660f1f440000",
		7: "0f1f8000000000", 8: "0f1f840000000000", 9: "660f1f840000000000",
		10: "662e0f1f840000000000", 11: "66662e0f1f840000000000",
		12: "66662e0f1f840000000000" + "90", 15: "66662e0f1f840000000000" + "0f1f4000",
	}
	for n, want := range gas {
		b := make([]byte, n)
		nopRun(b, 11)
		if got := fmt.Sprintf("%x", b); got != want {
			t.Errorf("gas gap %d: %s, want %s", n, got, want)
		}
	}
	b := make([]byte, 15)
	if offs := nopRun(b, 10); fmt.Sprintf("%x %v", b, offs) != "662e0f1f8400000000000f1f440000 [0 10]" {
		t.Errorf("ld gap 15: %x %v", b, offs)
	}
}

// tool is the path of command name; without it the test is skipped (what
// says which tool and package).
func tool(t *testing.T, name, what string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s on this machine", what)
	}
	return p
}

// asBytes assembles src with the machine's gas and returns .text.
func asBytes(t *testing.T, src string) []byte {
	t.Helper()
	as := tool(t, "as", "gas (binutils)")
	objcopy := tool(t, "objcopy", "objcopy (binutils)")
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "t.s"), filepath.Join(dir, "t.o"), filepath.Join(dir, "t.bin")
	if err := os.WriteFile(s, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--64", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "-j", ".text", o, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGasPaddingMatchesAs: for every residue, what this machine's gas
// writes for ".p2align 4" (what gcc emits before each function) after a
// function of that length equals the generator's fill.
func TestGasPaddingMatchesAs(t *testing.T) {
	var src strings.Builder
	for n := 1; n <= 16; n++ {
		fmt.Fprintf(&src, "f%d:\n .fill %d,1,0x50\n .p2align 4\n", n, n)
	}
	got := asBytes(t, src.String())
	var want []byte
	for n := 1; n <= 16; n++ {
		f := bytes.Repeat([]byte{0x50}, n)
		pad := make([]byte, int(alignUp(uint64(n), 16))-n)
		nopRun(pad, 11)
		want = append(append(want, f...), pad...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("gas:\n%x\ngenerator:\n%x", got, want)
	}
}

// checkPadding decodes every function's gap to the next symbol and checks
// it against the truth: boundaries, the fill's instructions, nothing
// else, and the next function starting where the gap ends.
func checkPadding(t *testing.T, k *image.Kernel, truth *Truth) map[Fill]int {
	t.Helper()
	counts := map[Fill]int{}
	starts := map[uint64]bool{}
	for _, f := range truth.Funcs {
		starts[f.Addr] = true
	}
	bad := 0
	for _, f := range truth.Funcs {
		if f.Fill == FillNone {
			if f.Pad != 0 || len(f.PadInsns) != 0 {
				t.Fatalf("%s: no fill but %d pad bytes", f.Name, f.Pad)
			}
			continue
		}
		counts[f.Fill]++
		end := f.Addr + uint64(f.Size) + uint64(f.Pad)
		if end%funcAlign != 0 || f.Pad >= funcAlign {
			t.Fatalf("%s: gap of %d ends at %#x, not the next 16-byte boundary", f.Name, f.Pad, end)
		}
		code := k.Text(f.Addr+uint64(f.Size), int(f.Pad))
		off, i := 0, 0
		for off < len(code) {
			insn, err := x86.Decode(nil, code[off:])
			ok := err == nil && i < len(f.PadInsns) && f.PadInsns[i] == f.Size+uint32(off)
			switch f.Fill {
			case FillLinkerINT3:
				ok = ok && insn.Kind == x86.KindInt3
			case FillGasNOP:
				ok = ok && insn.Kind == x86.KindNop && insn.Len <= 11
			case FillLinkerNOP:
				ok = ok && insn.Kind == x86.KindNop && insn.Len <= 10
			}
			if !ok {
				if bad++; bad < 10 {
					t.Errorf("%s+%#x: % x is not the %v padding the truth claims (%v)", f.Name, int(f.Size)+off, code[off:], f.Fill, err)
				}
				break
			}
			off += insn.Len
			i++
		}
		if i != len(f.PadInsns) {
			t.Errorf("%s: %d padding instructions decoded, truth has %d", f.Name, i, len(f.PadInsns))
		}
		// No instruction of the gap runs into the next function (the
		// next 16-byte boundary holds a function or ends the text).
		if r := k.RegionAt(end); r != nil && end < r.End() && !starts[end] && f.Zone != ZoneProbeTarget {
			t.Errorf("%s: gap ends at %#x, which starts no function", f.Name, end)
		}
	}
	if bad > 0 {
		t.Fatalf("%d gaps disagree", bad)
	}
	return counts
}

// TestPaddingDecodesAsClaimed: in the default image (core text, modules)
// and an image with the sample's targets inside .text, every gap decodes
// as its fill, gas gaps hold no int3 and vmlinux object gaps only int3.
func TestPaddingDecodesAsClaimed(t *testing.T) {
	k, truth := defaultImage(t)
	counts := checkPadding(t, k, truth)
	if counts[FillGasNOP] == 0 || counts[FillLinkerINT3] == 0 || counts[FillLinkerNOP] == 0 {
		t.Fatalf("fills %v: want gas, vmlinux-linker and module-linker gaps", counts)
	}
	// About one function in 20 ends an object (Debian 6.1: 2,203 int3
	// gaps of 43,148 non-empty aligned gaps, 5.1%).
	share := float64(counts[FillLinkerINT3]) / float64(counts[FillLinkerINT3]+counts[FillGasNOP])
	if share < 0.03 || share > 0.09 {
		t.Errorf("%.1f%% of core gaps are object boundaries, want about 5%%", 100*share)
	}
	for _, f := range truth.Funcs {
		if (f.Zone == ZoneInit || f.Zone == ZoneModuleInit) && f.Pad != 0 {
			t.Fatalf("init function %s has %d pad bytes: __cold functions are not aligned", f.Name, f.Pad)
		}
	}

	cfg := DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules = 1000, 50, 1
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 200, 50, 50, 100, 20
	cfg.ProbeTargets = 500
	for _, at := range []float64{0.5, 1} {
		cfg.ProbeTargetsAt = at
		k2, truth2, err := Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPadding(t, k2, truth2)
		var tg []FuncTruth
		for _, f := range truth2.Funcs {
			if f.Zone == ZoneProbeTarget {
				tg = append(tg, f)
			}
		}
		sort.Slice(tg, func(i, j int) bool { return tg[i].Addr < tg[j].Addr })
		for i, f := range tg {
			want := FillGasNOP
			if i == len(tg)-1 {
				want = FillLinkerINT3
			}
			if f.Fill != want {
				t.Fatalf("at=%g: target %d fill %v, want %v (one object)", at, i, f.Fill, want)
			}
		}
		// The function before the sample's object ends its own object.
		if at < 1 {
			for _, f := range truth2.Funcs {
				if f.Addr+uint64(f.Size)+uint64(f.Pad) == tg[0].Addr && f.Fill == FillGasNOP {
					t.Fatalf("%s, before the sample's object, is padded with gas NOPs", f.Name)
				}
			}
		}
	}
}

// TestObjectSizes: object sizes follow the configured median (the
// grouping's determinism is TestDeterministic's).
func TestObjectSizes(t *testing.T) {
	g := &gen{cfg: DefaultConfig()}
	var sizes []int
	run := 0
	for _, e := range g.objectEnds(200000, sim.NewRNG(7, "test")) {
		run++
		if e {
			sizes = append(sizes, run)
			run = 0
		}
	}
	sort.Ints(sizes)
	if med := sizes[len(sizes)/2]; med < 8 || med > 10 {
		t.Errorf("median object holds %d functions, want 9", med)
	}
}

// TestLinkerFillMatchesLd: what this machine's ld writes between two
// input sections (a function of every length, then an object whose .text
// is 16-byte aligned) equals the generator's linker fill: ld -r (a module)
// fills with its NOPs, and a link with vmlinux.lds.S's "=0xcccc" with
// int3.
func TestLinkerFillMatchesLd(t *testing.T) {
	ld := tool(t, "ld", "ld (binutils)")
	as := tool(t, "as", "gas (binutils)")
	objcopy := tool(t, "objcopy", "objcopy (binutils)")
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := filepath.Join(dir, "b.o")
	run(as, "--64", "-o", b, file("b.s", ".text\n.p2align 4\nb: .byte 0xc3\n"))
	lds := file("vmlinux.lds", "SECTIONS { . = 0x1000; .text : { *(.text) } =0xcccc }\n")
	for n := 1; n <= 15; n++ {
		a := filepath.Join(dir, "a.o")
		run(as, "--64", "-o", a, file("a.s", fmt.Sprintf(".text\na: .fill %d,1,0x50\n", n)))
		for _, tc := range []struct {
			fill Fill
			args []string
		}{{FillLinkerNOP, []string{"-r"}}, {FillLinkerINT3, []string{"-T", lds}}} {
			out, bin := filepath.Join(dir, "out.o"), filepath.Join(dir, "out.bin")
			run(ld, append(append([]string{}, tc.args...), "-o", out, a, b)...)
			run(objcopy, "-O", "binary", "-j", ".text", out, bin)
			got, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 16-n)
			writePad(want, tc.fill)
			if len(got) != 17 || !bytes.Equal(got[n:16], want) {
				t.Fatalf("gap %d, %v: ld wrote % x, generator % x", n, tc.fill, got, want)
			}
		}
	}
}

// TestAddSampleErrors: a bad or oversized sample names --sample-functions.
func TestAddSampleErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules = 1000, 50, 0
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 200, 50, 50, 100, 20
	k, _, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sample, n int }{{-1, 10}, {2_000_000, 10}} { // refused before k changes
		c := cfg
		c.SampleFunctions = tc.sample
		err = AddSample(k, c, tc.n, false, 1)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != "sample-functions" {
			t.Errorf("sample %d: %v, want a --sample-functions error", tc.sample, err)
		}
	}
	c := cfg
	c.SampleFunctions = 300
	if err := AddSample(k, c, 500, false, 1); err != nil || len(k.SymbolsByName(ProbeTargetName(499))) != 1 {
		t.Fatalf("a sample grown to n: %v", err)
	}
}

// TestInt3Padding: --padding int3 fills every gap with int3 (the old
// generator's counterfactual) and changes nothing else: same functions,
// same bytes outside the gaps.
func TestInt3Padding(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules = 1000, 50, 1
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.BugEntries, cfg.Blacklist = 200, 50, 50, 100, 20
	cfg.ProbeTargets = 100
	k1, t1, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Padding = PaddingInt3
	k2, t2, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if counts := checkPadding(t, k2, t2); len(counts) != 1 || counts[FillLinkerINT3] == 0 {
		t.Fatalf("int3 padding gave fills %v", counts)
	}
	if len(t1.Funcs) != len(t2.Funcs) {
		t.Fatal("different functions")
	}
	for i, f := range t1.Funcs {
		g := t2.Funcs[i]
		if f.Addr != g.Addr || f.Size != g.Size || f.Pad != g.Pad || !bytes.Equal(k1.Text(f.Addr, int(f.Size)), k2.Text(g.Addr, int(g.Size))) {
			t.Fatalf("%s differs outside its gap", f.Name)
		}
	}
	cfg.Padding = "nops"
	if _, _, err := Generate(cfg); err == nil || !strings.Contains(err.Error(), "--padding") {
		t.Fatalf("--padding nops: %v", err)
	}
}
