package load

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

var (
	realMu    sync.Mutex
	realByCPU = map[string]*Result{}
)

// loadReal returns the real kernel booted for cpu (alternative.CPUNone:
// as built) with its site records, and the decompressed vmlinux as built.
// The vmlinux is decompressed once; each CPU's boot is cached.
func loadReal(t testing.TB, cpu string) (*image.Kernel, []byte) {
	r, vmlinux := loadRealResult(t, cpu)
	return r.Kernel, vmlinux
}

func loadRealResult(t testing.TB, cpu string) (*Result, []byte) {
	path, realVmlinux := realkernel.Vmlinux(t)
	realMu.Lock()
	defer realMu.Unlock()
	if r, ok := realByCPU[cpu]; ok {
		return r, realVmlinux
	}
	r, err := BytesWith(path, realVmlinux, Options{CPU: cpu, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	realByCPU[cpu] = r
	return r, realVmlinux
}

func TestOpenRealKernel(t *testing.T) {
	k, _ := loadReal(t, alternative.DefaultCPU)
	s := k.Summarize()
	t.Logf("%s: functions %d, text %d B, jump %d, static calls %d, bugs %d, extable %d, blacklist %d (+%d ranges), mcount %d",
		k.Name, s.Functions, s.TextBytes, s.JumpEntries, s.StaticCallSites, s.BugEntries, s.ExceptionEntries,
		s.BlacklistEntries, len(s.BlacklistRanges), s.McountLocations)
	if s.Functions < 10000 || s.JumpEntries == 0 || s.McountLocations == 0 {
		t.Fatalf("implausible real kernel: %+v", s)
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
}

// objdumpExceptions are the functions whose boundaries cannot match a
// linear sweep, each for a reason in the kernel source.
var objdumpExceptions = map[string]string{
	// arch/x86/lib/retpoline.S: the return thunk starts one byte into
	// retbleed_untrain_ret's "test $0xcc, %bl" (.byte 0xf6 trick), so the
	// two symbols' instruction streams overlap by design.
	"retbleed_untrain_ret":  "overlapping instructions by design (retpoline.S)",
	"retbleed_return_thunk": "starts inside retbleed_untrain_ret's test instruction",
	// The SRSO mitigation does the same: srso_safe_ret lies inside the
	// immediate of srso_untrain_ret's movabs.
	"srso_untrain_ret": "overlapping instructions by design (retpoline.S, SRSO)",
	"srso_safe_ret":    "starts inside srso_untrain_ret's movabs immediate",
	// arch/x86/platform/pvh/head.S is .code32: 32-bit code in .text.
	"pvh_start_xen": "32-bit code (.code32) decoded as 64-bit by both tools",
}

// TestBoundariesMatchObjdump: kpsim's instruction boundaries over every
// function of the real .text equal objdump's, apart from the documented
// exceptions above: for the text as built, and for the text booted on the
// default CPU (objdump then reads a copy of vmlinux with the patched text
// written back at its file offsets).
func TestBoundariesMatchObjdump(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the whole real .text twice")
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (binutils) not installed")
	}
	for _, cpu := range []string{alternative.CPUNone, alternative.DefaultCPU} {
		t.Run(cpu, func(t *testing.T) {
			k, vmlinux := loadReal(t, cpu)
			if cpu != alternative.CPUNone {
				vmlinux = withText(t, vmlinux, k)
			}
			compareObjdump(t, objdump, k, vmlinux)
		})
	}
}

// withText returns a copy of the vmlinux ELF with the text regions of k
// written back at their file offsets.
func withText(t *testing.T, vmlinux []byte, k *image.Kernel) []byte {
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(vmlinux)
	for _, r := range k.Regions {
		done := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && r.Start >= p.Vaddr && r.End() <= p.Vaddr+p.Filesz {
				copy(out[p.Off+(r.Start-p.Vaddr):], r.Bytes)
				done = true
			}
		}
		if !done {
			t.Fatalf("region %s not in a PT_LOAD segment", r.Name)
		}
	}
	return out
}

// objdumpGenExceptions are the 6.12 and 7.3 functions whose boundaries
// differ from objdump's, each for a reason (see
// alternative/objdump_gen_test.go, which checks both generations over
// their ELF directly).
var objdumpGenExceptions = map[string]string{
	"native_lkgs":          "LKGS (f2 0f 00 /6) unknown to objdump 2.40: it decodes 3 bytes of (bad)",
	"native_load_gs_index": "LKGS (f2 0f 00 /6) unknown to objdump 2.40, as native_lkgs",
}

// TestBoundariesMatchObjdumpGenerations: for the 6.12 and 7.3 -dbg
// vmlinux, as built and booted for the default CPU, the boundaries of
// the kernel decoder (x86.DecodeKernel) equal objdump's in at least
// 99.95% of functions, the others named with their reason. ~25 s of
// objdump per subtest: skipped under -short.
func TestBoundariesMatchObjdumpGenerations(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the whole real .text of 6.12 and 7.3")
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (binutils) not installed")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		for _, cpu := range []string{alternative.CPUNone, alternative.DefaultCPU} {
			t.Run(g.String()+"/"+cpu, func(t *testing.T) {
				p := realkernel.FindDbg(t, g)
				vmlinux, err := os.ReadFile(p.Vmlinux)
				if err != nil {
					t.Fatal(err)
				}
				r, err := BytesWith(p.Vmlinux, vmlinux, Options{CPU: cpu, NoCache: true})
				if err != nil {
					t.Fatal(err)
				}
				if cpu != alternative.CPUNone {
					vmlinux = withText(t, vmlinux, r.Kernel)
				}
				compareObjdumpWith(t, objdump, r.Kernel, vmlinux, x86.DecodeKernel, objdumpGenExceptions, 99.95)
			})
		}
	}
}

func compareObjdump(t *testing.T, objdump string, k *image.Kernel, vmlinux []byte) {
	compareObjdumpWith(t, objdump, k, vmlinux, x86.Decode, objdumpExceptions, 0)
}

// compareObjdumpWith compares the instruction starts decode walks in
// every core-text function with objdump's; functions in exceptions are
// excused (and logged with their reason), any other disagreement fails
// the test, and so does an agreement below minPct percent.
func compareObjdumpWith(t *testing.T, objdump string, k *image.Kernel, vmlinux []byte,
	decode func(*sim.Counters, []byte) (x86.Insn, error), exceptions map[string]string, minPct float64) {
	f := filepath.Join(t.TempDir(), "vmlinux")
	if err := os.WriteFile(f, vmlinux, 0o644); err != nil {
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
	// objdump's instruction starts: "ffffffff81000000:\t55\tpush ..."
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
	core := k.CoreText()
	var funcs, insns, bad, excused int
	var badFuncs []string
	for _, s := range k.Symbols {
		if !s.IsText() || s.Size == 0 || !core.Contains(s.Addr) {
			continue
		}
		funcs++
		code := k.Text(s.Addr, int(s.Size))
		ok := true
		for off := 0; off < len(code); {
			a := s.Addr + uint64(off)
			insns++
			if !isStart(a) {
				ok = false
				break
			}
			in, err := decode(nil, code[off:])
			if err != nil {
				ok = false
				break
			}
			off += in.Len
		}
		if !ok {
			if why, known := exceptions[s.Name]; known {
				excused++
				t.Logf("exception %s: %s", s.Name, why)
				continue
			}
			bad++
			if len(badFuncs) < 40 {
				badFuncs = append(badFuncs, s.Name)
			}
		}
	}
	pct := 100 * float64(funcs-excused-bad) / float64(max(funcs, 1))
	t.Logf("%d functions, %d instructions compared with objdump (%.4f%% equal); %d documented exceptions; %d other functions disagree: %s",
		funcs, insns, pct, excused, bad, strings.Join(badFuncs, " "))
	if pct < minPct {
		t.Errorf("only %.4f%% of functions agree with objdump (want %.2f%%)", pct, minPct)
	}
	if bad > 0 {
		t.Errorf("%d functions disagree with objdump", bad)
	}
}
