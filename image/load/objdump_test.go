package load

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/bzimage"
	"github.com/kpsim/kpsim/x86"
)

// realKernel finds the pinned Debian kernel (make real-kernel) or
// KPSIM_KERNEL; tests skip without it.
func realKernel(t testing.TB) string {
	if p := os.Getenv("KPSIM_KERNEL"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../.cache/kernels/vmlinuz-6.1.0-57-amd64")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no real kernel: run `make real-kernel` (or set KPSIM_KERNEL) to enable")
	}
	return p
}

var (
	realOnce    sync.Once
	realK       *image.Kernel
	realVmlinux []byte
	realErr     error
)

func loadReal(t testing.TB) (*image.Kernel, []byte) {
	path := realKernel(t)
	realOnce.Do(func() {
		b, err := os.ReadFile(path)
		if err != nil {
			realErr = err
			return
		}
		if Detect(b) == BzImage {
			if realVmlinux, _, realErr = bzimage.Decompress(path, b); realErr != nil {
				return
			}
		} else {
			realVmlinux = b
		}
		realK, realErr = Bytes(path, b)
	})
	if realErr != nil {
		t.Fatal(realErr)
	}
	return realK, realVmlinux
}

func TestOpenRealKernel(t *testing.T) {
	k, _ := loadReal(t)
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
// exceptions above.
func TestBoundariesMatchObjdump(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the whole real .text twice")
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (binutils) not installed")
	}
	k, vmlinux := loadReal(t)
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
			in, err := x86.Decode(nil, code[off:])
			if err != nil {
				ok = false
				break
			}
			off += in.Len
		}
		if !ok {
			if _, known := objdumpExceptions[s.Name]; known {
				excused++
				continue
			}
			bad++
			if len(badFuncs) < 40 {
				badFuncs = append(badFuncs, s.Name)
			}
		}
	}
	t.Logf("%d functions, %d instructions compared with objdump; %d documented exceptions; %d other functions disagree: %s",
		funcs, insns, excused, bad, strings.Join(badFuncs, " "))
	if bad > 0 {
		t.Errorf("%d functions disagree with objdump", bad)
	}
}
