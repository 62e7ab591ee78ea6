package elfload

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/kconfig"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// genKernels holds each later generation's -dbg vmlinux, loaded once per
// test binary as built (no CPU), with the config file beside it.
var genKernels sync.Map // image.Generation -> *genKernel

type genKernel struct {
	once sync.Once
	pkg  realkernel.Pkg
	k    *image.Kernel
	err  error
}

func loadGen(t *testing.T, g image.Generation) (realkernel.Pkg, *image.Kernel) {
	t.Helper()
	p := realkernel.FindDbg(t, g)
	v, _ := genKernels.LoadOrStore(g, &genKernel{pkg: p})
	gk := v.(*genKernel)
	gk.once.Do(func() {
		b, err := os.ReadFile(p.Vmlinux)
		if err != nil {
			gk.err = err
			return
		}
		kc, err := kconfig.ReadFile(p.Config)
		if err != nil {
			gk.err = err
			return
		}
		gk.k, _, gk.err = LoadWith(p.Vmlinux, b, Options{KConfig: kc})
	})
	if gk.err != nil {
		t.Fatal(gk.err)
	}
	return gk.pkg, gk.k
}

// readelfCounts counts each table's entries the way binutils sees the
// file: __bug_table and __ex_table by their section sizes (readelf -S),
// the others by their __start_/__stop_ bound symbols (nm).
func readelfCounts(t *testing.T, vmlinux string, bugSize int) map[string]int {
	t.Helper()
	for _, tool := range []string{"readelf", "nm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	out := map[string]int{}
	sec, err := exec.Command("readelf", "-SW", vmlinux).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(sec), "\n") {
		if i := strings.Index(line, "]"); i >= 0 {
			f := strings.Fields(line[i+1:])
			if len(f) < 6 {
				continue
			}
			size, err := strconv.ParseUint(f[4], 16, 64)
			if err != nil {
				continue
			}
			switch f[0] {
			case "__bug_table":
				out["bug"] = int(size) / bugSize
			case "__ex_table":
				out["extable"] = int(size) / ExEntrySize
			}
		}
	}
	nm, err := exec.Command("nm", vmlinux).Output()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(nm))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && strings.HasPrefix(f[2], "__st") {
			a, _ := strconv.ParseUint(f[0], 16, 64)
			addr[f[2]] = a
		}
	}
	for _, b := range []struct {
		name, start, stop string
		size              int
	}{
		{"jump", "__start___jump_table", "__stop___jump_table", JumpEntrySize},
		{"static_call", "__start_static_call_sites", "__stop_static_call_sites", StaticCallSiteSize},
		{"blacklist", "__start_kprobe_blacklist", "__stop_kprobe_blacklist", PtrSize},
		{"mcount", "__start_mcount_loc", "__stop_mcount_loc", PtrSize},
	} {
		out[b.name] = int(addr[b.stop]-addr[b.start]) / b.size
	}
	return out
}

// TestGenerationsTablesMatchReadelf: the 6.12 and 7.3 -dbg vmlinux load
// as built, each table's entry count equals binutils', functions exclude
// the __pfx_ padding, and the facts come from the config beside the image.
func TestGenerationsTablesMatchReadelf(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			p, k := loadGen(t, g)
			if k.Config.Gen != g || k.Config.Version != p.Release {
				t.Fatalf("generation %s release %q, want %s %q", k.Config.Gen, k.Config.Version, g, p.Release)
			}
			want := readelfCounts(t, p.Vmlinux, image.BugEntryLayoutFor(g, true).Size)
			got := map[string]int{"jump": len(k.JumpEntries), "static_call": len(k.StaticCallSites), "bug": len(k.BugEntries),
				"extable": len(k.ExTable), "blacklist": len(k.Blacklist), "mcount": len(k.McountLocs)}
			for name, w := range want {
				// __mcount_loc keeps zeroed entries (discarded weak
				// functions); ftrace_process_locs skips them.
				if name == "mcount" {
					w -= zeroMcount(t, p.Vmlinux)
				}
				if got[name] != w {
					t.Errorf("%s: kpsim %d entries, readelf/nm %d", name, got[name], w)
				}
			}
			t.Logf("%s: %v (mcount records %d)", g, want, len(k.McountLocs))
			if !k.Config.IBT || !k.Config.CallPadding || k.Config.FunctionAlignment != 16 {
				t.Errorf("config ibt=%v call_padding=%v alignment=%d, want true true 16", k.Config.IBT, k.Config.CallPadding, k.Config.FunctionAlignment)
			}
			for _, s := range k.Functions() {
				if s.IsPadding() {
					t.Fatalf("Functions() lists the padding symbol %s", s.Name)
				}
			}
			for _, e := range k.BugEntries[:min(len(k.BugEntries), 1000)] {
				if k.RegionAt(e.Addr) == nil {
					t.Fatalf("bug entry at %#x is outside any text", e.Addr)
				}
			}
		})
	}
}

// zeroMcount counts the NULL entries of vmlinux's __mcount_loc, read
// with debug/elf apart from the loader.
func zeroMcount(t *testing.T, vmlinux string) int {
	f, err := elf.Open(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var start, stop uint64
	for _, s := range syms {
		switch s.Name {
		case "__start_mcount_loc":
			start = s.Value
		case "__stop_mcount_loc":
			stop = s.Value
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && start >= p.Vaddr && stop <= p.Vaddr+p.Filesz {
			b := make([]byte, stop-start)
			if _, err := p.ReadAt(b, int64(start-p.Vaddr)); err != nil {
				t.Fatal(err)
			}
			n := 0
			for i := 0; i+8 <= len(b); i += 8 {
				if le.Uint64(b[i:]) == 0 {
					n++
				}
			}
			return n
		}
	}
	t.Fatal("__mcount_loc not in a PT_LOAD segment")
	return 0
}
