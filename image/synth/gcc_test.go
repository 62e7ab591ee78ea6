package synth

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kernelCFLAGS are the flags of Debian's 6.1 x86-64 build that shape a
// small function's code and alignment (config-6.1.0-57-amd64 with the
// 6.1.192 Makefiles): top Makefile -O2 -fno-stack-clash-protection (and
// no -fomit-frame-pointer: FUNCTION_TRACER is on, so the Makefile leaves
// gcc's default, which omits it at -O2); arch/x86/Makefile -m64
// -mno-red-zone -mcmodel=kernel -mno-sse/-mmx/-sse2/-3dnow/-avx -mno-80387
// -mno-fp-ret-in-387 -mpreferred-stack-boundary=3 -mskip-rax-setup
// -falign-jumps=1 -falign-loops=1 -fno-asynchronous-unwind-tables
// -fcf-protection=none (no X86_KERNEL_IBT), RETPOLINE_CFLAGS
// (-mindirect-branch=thunk-extern -mindirect-branch-register
// -mindirect-branch-cs-prefix, and with RETHUNK -mfunction-return=
// thunk-extern), -mharden-sls=all (SLS). No -falign-functions
// (DEBUG_FORCE_FUNCTION_ALIGN_64B is off), so gcc's default for
// -mtune=generic applies: .p2align 4.
var kernelCFLAGS = []string{
	"-O2", "-fno-strict-aliasing", "-fno-common", "-fno-PIE", "-fno-pic",
	"-fno-delete-null-pointer-checks", "-fno-stack-clash-protection", "-fstack-protector-strong",
	"-ftrivial-auto-var-init=zero",
	"-m64", "-mno-red-zone", "-mcmodel=kernel", "-mno-sse", "-mno-mmx", "-mno-sse2", "-mno-3dnow", "-mno-avx",
	"-mno-80387", "-mno-fp-ret-in-387", "-mpreferred-stack-boundary=3", "-mskip-rax-setup", "-mtune=generic",
	"-falign-jumps=1", "-falign-loops=1", "-fno-asynchronous-unwind-tables", "-fno-jump-tables",
	"-fcf-protection=none",
	"-mindirect-branch=thunk-extern", "-mindirect-branch-register", "-mindirect-branch-cs-prefix",
	"-mharden-sls=all",
}

// kprobesManyC is a kprobes_many.c-like file: the sample's functions by
// macro fan-out, each bumping a counter so that it is not optimised away.
const kprobesManyC = `
#define noinline __attribute__((__noinline__))
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
int kprobe_many_counter;
#define F1(n) noinline void kprobe_many_func_##n(void) \
	{ WRITE_ONCE(kprobe_many_counter, READ_ONCE(kprobe_many_counter) + 1); }
#define F10(n) F1(n##0) F1(n##1) F1(n##2) F1(n##3) F1(n##4) F1(n##5) F1(n##6) F1(n##7) F1(n##8) F1(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) F10(n##5) F10(n##6) F10(n##7) F10(n##8) F10(n##9)
F100(1)
`

// gccFunc is one function of the compiled object.
type gccFunc struct {
	name          string
	addr, size    uint64
	code, pad     []byte
	insns, padIns int
	padMnemonics  []string
}

// compileMany compiles kprobesManyC with gcc and returns its functions in
// address order, instruction boundaries as objdump decodes them.
func compileMany(t *testing.T, extra ...string) []gccFunc {
	t.Helper()
	gcc := tool(t, "gcc", "gcc")
	objdump := tool(t, "objdump", "objdump (binutils)")
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "kprobes_many.c"), filepath.Join(dir, "kprobes_many.o")
	if err := os.WriteFile(src, []byte(kprobesManyC), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append(append([]string{}, kernelCFLAGS...), extra...), "-c", "-o", obj, src)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Skipf("gcc does not take the kernel's flags: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	body, err := text.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var fns []gccFunc
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && strings.HasPrefix(s.Name, "kprobe_many_func_") {
			fns = append(fns, gccFunc{name: s.Name, addr: s.Value, size: s.Size})
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].addr < fns[j].addr })
	// Instruction starts and mnemonics from objdump.
	out, err := exec.Command(objdump, "-d", "--no-show-raw-insn", "-j", ".text", obj).Output()
	if err != nil {
		t.Fatal(err)
	}
	starts := map[uint64]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		a, rest, ok := strings.Cut(strings.TrimSpace(line), ":\t")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(a, 16, 64)
		if err != nil {
			continue
		}
		starts[v] = strings.Fields(rest)[0]
	}
	for i := range fns {
		fn := &fns[i]
		end := uint64(len(body))
		if i+1 < len(fns) {
			end = fns[i+1].addr
		}
		fn.code, fn.pad = body[fn.addr:fn.addr+fn.size], body[fn.addr+fn.size:end]
		for a := fn.addr; a < end; a++ {
			m, ok := starts[a]
			switch {
			case !ok:
			case a < fn.addr+fn.size:
				fn.insns++
			default:
				fn.padIns++
				fn.padMnemonics = append(fn.padMnemonics, m)
			}
		}
	}
	if len(fns) != 100 {
		t.Fatalf("gcc built %d functions, want 100", len(fns))
	}
	return fns
}

// TestTargetsMatchGCC: the sample's functions as gcc 12 builds them with
// the kernel's flags, untraced and traced (-pg -mfentry -mrecord-mcount,
// CONFIG_FTRACE_MCOUNT_USE_CC), with return thunks (RETHUNK) and without
// (SLS "ret; int3"), with and without IBT (ENDBR64 first), equal the generator's targets: the same bytes (gcc's
// relocated fields are 0 in the object, as in the template), the same
// instruction count, and the same padding to the next function (gas
// NOPs, no int3).
func TestTargetsMatchGCC(t *testing.T) {
	rethunk, traced := []string{"-mfunction-return=thunk-extern"}, []string{"-pg", "-mfentry", "-mrecord-mcount"}
	ibt := []string{"-fcf-protection=branch"} // CONFIG_X86_KERNEL_IBT (arch/x86/Makefile)
	cat := func(l ...[]string) (out []string) {
		for _, x := range l {
			out = append(out, x...)
		}
		return out
	}
	for _, tc := range []struct {
		name                  string
		flags                 []string
		ibt, traced, retThunk bool
	}{
		{"rethunk", rethunk, false, false, true},
		{"rethunk,traced", cat(rethunk, traced), false, true, true},
		{"sls", nil, false, false, false},
		{"sls,traced", traced, false, true, false},
		{"ibt,rethunk", cat(ibt, rethunk), true, false, true},
		{"ibt,rethunk,traced", cat(ibt, rethunk, traced), true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fns := compileMany(t, tc.flags...)
			tb := newTargetBody(tc.ibt, tc.traced, tc.retThunk, false)
			pad := make([]byte, int(alignUp(uint64(len(tb.code)), funcAlign))-len(tb.code))
			padOffs := nopRun(pad, 11)
			for _, fn := range fns[:len(fns)-1] { // the last one has no gap in the object
				if !bytes.Equal(fn.code, tb.code) {
					t.Fatalf("%s: gcc % x\n generator % x", fn.name, fn.code, tb.code)
				}
				if fn.insns != len(tb.offs) {
					t.Fatalf("%s: gcc %d instructions, generator %d", fn.name, fn.insns, len(tb.offs))
				}
				if !bytes.Equal(fn.pad, pad) || fn.padIns != len(padOffs) {
					t.Fatalf("%s: gcc pads % x (%d insns %v), generator % x (%d)", fn.name, fn.pad, fn.padIns, fn.padMnemonics, pad, len(padOffs))
				}
				if bytes.IndexByte(fn.pad, opINT3) >= 0 {
					t.Fatalf("%s: int3 in gas padding", fn.name)
				}
			}
			fn := fns[0]
			t.Logf("gcc %s: %d B, %d instructions, gap %d B = %d NOPs %v; generator: %d B, %d instructions, gap %d B = %d NOPs; with int3 fill the gap would be %d instructions",
				tc.name, fn.size, fn.insns, len(fn.pad), fn.padIns, fn.padMnemonics, len(tb.code), len(tb.offs), len(pad), len(padOffs), len(pad))
		})
	}
}

// ExampleAddProbeTargets shows one target of the sample and its padding
// as the running kernel holds them (returns patched to ret; int3).
func ExampleAddProbeTargets() {
	tb := newTargetBody(false, false, true, true)
	pad := make([]byte, int(alignUp(uint64(len(tb.code)), funcAlign))-len(tb.code))
	n := len(nopRun(pad, 11))
	fmt.Printf("% x | % x\n", tb.code, pad)
	fmt.Println(len(tb.offs), "instructions +", n, "padding NOPs")
	// Output:
	// 8b 05 00 00 00 00 83 c0 01 89 05 00 00 00 00 c3 cc cc cc cc | 66 66 2e 0f 1f 84 00 00 00 00 00 90
	// 8 instructions + 2 padding NOPs
}
