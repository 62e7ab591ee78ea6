package module

import (
	"bufio"
	"bytes"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

const kver = realkernel.Version

// realTree finds the pinned Debian kernel and its module tree (make
// real-kernel), or KPSIM_KERNEL and KPSIM_MODULES; tests skip without them.
func realTree(t testing.TB) (kernel, dir string) {
	kernel = realkernel.Path(t)
	dir = os.Getenv("KPSIM_MODULES")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(kernel), "lib", "modules", kver)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no module tree: run `make real-kernel` (or set KPSIM_MODULES) to enable")
	}
	return kernel, dir
}

var (
	realOnce sync.Once
	realK    *image.Kernel
	realErr  error
)

// realKernel loads the real vmlinux once per test binary; each caller gets
// its own copy of the module list.
func realKernel(t testing.TB) (*image.Kernel, string) {
	kernel, dir := realTree(t)
	realOnce.Do(func() { realK, realErr = load.Open(kernel) })
	if realErr != nil {
		t.Fatal(realErr)
	}
	k := *realK
	k.Modules = nil
	return &k, dir
}

func needReadelf(t testing.TB) {
	if _, err := exec.LookPath("readelf"); err != nil {
		t.Skip("no readelf (binutils)")
	}
}

func readelf(t testing.TB, args ...string) string {
	out, err := exec.Command("readelf", args...).Output()
	if err != nil {
		t.Fatalf("readelf %v: %v", args, err)
	}
	return string(out)
}

// sectionSizes parses readelf -SW: name -> size.
func sectionSizes(t testing.TB, path string) map[string]uint64 {
	out := map[string]uint64{}
	for _, line := range strings.Split(readelf(t, "-SW", path), "\n") {
		i := strings.Index(line, "]")
		if !strings.HasPrefix(strings.TrimSpace(line), "[") || i < 0 {
			continue
		}
		f := strings.Fields(line[i+1:])
		if len(f) < 6 {
			continue
		}
		sz, err := strconv.ParseUint(f[4], 16, 64)
		if err != nil {
			continue
		}
		out[f[0]] = sz
	}
	return out
}

// rela is one line of readelf -rW: offset, type, symbol name, addend.
type rela struct {
	off    uint64
	typ    string
	sym    string
	addend int64
}

// relocs parses readelf -rW's section named sec.
func relocs(t testing.TB, path, sec string) []rela {
	var out []rela
	in := false
	sc := bufio.NewScanner(strings.NewReader(readelf(t, "-rW", path)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Relocation section ") {
			in = strings.HasPrefix(line, "Relocation section '"+sec+"'")
			continue
		}
		f := strings.Fields(line)
		if !in || len(f) < 7 || !strings.HasPrefix(f[2], "R_X86_64_") {
			continue
		}
		off, _ := strconv.ParseUint(f[0], 16, 64)
		add, _ := strconv.ParseInt(f[len(f)-1], 16, 64)
		if f[len(f)-2] == "-" {
			add = -add
		}
		out = append(out, rela{off: off, typ: f[2], sym: f[4], addend: add})
	}
	return out
}

// readelfModules are large, common modules (kvm and its vendor parts,
// two file systems) plus the ext4 journal.
var readelfModules = []string{"kvm", "kvm_intel", "kvm_amd", "xfs", "ext4", "jbd2"}

// readelfLoads is for the tests that compare modules with readelf
// (skipped without it): the real kernel, a loader on it, and the loads of
// readelfModules one after another, each module yielded as it is loaded.
func readelfLoads(t *testing.T) (*image.Kernel, *Loader, iter.Seq2[string, *Loaded]) {
	t.Helper()
	needReadelf(t)
	k, dir := realKernel(t)
	l := NewLoader(k, Options{Dir: dir})
	return k, l, func(yield func(string, *Loaded) bool) {
		for _, name := range readelfModules {
			m, err := l.Load(name)
			if err != nil {
				t.Fatal(err)
			}
			if !yield(name, m) {
				return
			}
		}
	}
}

// TestReadelfCounts: for each module, kpsim's table sizes equal readelf's
// section sizes divided by the entry size, and the decoded tables have as
// many entries.
func TestReadelfCounts(t *testing.T) {
	k, l, loads := readelfLoads(t)
	for name, m := range loads {
		sz := sectionSizes(t, m.Path)
		mod := m.Module
		for _, c := range []struct {
			sec   string
			size  uint64
			count int
			have  int
		}{
			{"__jump_table", JumpEntrySize, m.Counts.JumpEntries, len(mod.JumpEntries)},
			{".static_call_sites", StaticCallSiteSize, m.Counts.StaticCallSites, len(mod.StaticCallSites)},
			{"__bug_table", BugEntrySize, m.Counts.BugEntries, len(mod.BugEntries)},
			{"__mcount_loc", McountLocSize, m.Counts.McountLocs, len(mod.McountLocs)},
			{"__ex_table", ExEntrySize, m.Counts.ExEntries, len(mod.ExTable)},
			{"_kprobe_blacklist", BlacklistEntrySize, m.Counts.Blacklist, len(mod.Blacklist)},
			{".parainstructions", ParaSiteSize, m.Counts.ParaSites, m.Counts.ParaSites},
			{".altinstructions", AltInstrSize, m.Counts.AltInstrs, m.Counts.AltInstrs},
			{".return_sites", SiteSize, m.Counts.ReturnSites, m.Counts.ReturnSites},
			{"_ftrace_events", 8, len(mod.TraceEvents), len(mod.TraceEvents)},
		} {
			want := int(sz[c.sec] / c.size)
			if c.count != want || c.have != want {
				t.Errorf("%s %s: kpsim counts %d, holds %d entries; readelf: %#x bytes = %d entries", name, c.sec, c.count, c.have, sz[c.sec], want)
			}
		}
		if r, ok := mod.Range(image.RangeNoinstrText); (sz[".noinstr.text"] > 0) != ok || (ok && r.End-r.Start != sz[".noinstr.text"]) {
			t.Errorf("%s: noinstr range %+v (%v), readelf .noinstr.text %#x", name, r, ok, sz[".noinstr.text"])
		}
		t.Logf("%s: jump %d static-call %d bug %d mcount %d extable %d", name, len(mod.JumpEntries), len(mod.StaticCallSites),
			len(mod.BugEntries), len(mod.McountLocs), len(mod.ExTable))
	}
	// The entry counts readelf gives for these modules of the pinned kernel.
	for name, want := range map[string][5]int{"kvm": {278, 745, 509, 1327, 26}, "kvm_intel": {758, 164, 862, 314, 677},
		"xfs": {652, 1308, 46, 2647, 0}, "ext4": {249, 382, 536, 854, 0}} {
		m, _ := l.Lookup(name)
		got := [5]int{m.Counts.JumpEntries, m.Counts.StaticCallSites, m.Counts.BugEntries, m.Counts.McountLocs, m.Counts.ExEntries}
		if got != want {
			t.Errorf("%s: counts %v, reference %v", name, got, want)
		}
	}
	// Trace events: every entry of _ftrace_events named (kvm's 109, xfs's
	// 579, ext4's 113), e.g. kvm/kvm_exit and xfs/xfs_iomap_found.
	for name, want := range map[string]image.TraceEvent{"kvm": {System: "kvm", Name: "kvm_exit"}, "xfs": {System: "xfs", Name: "xfs_iomap_found"}} {
		m, _ := l.Lookup(name)
		evs := m.Module.TraceEvents
		if !slices.Contains(evs, want) || slices.ContainsFunc(evs, func(e image.TraceEvent) bool { return e.System == "" || e.Name == "" }) {
			t.Errorf("%s: trace events %v lack %v or have an unnamed one", name, evs[:min(len(evs), 5)], want)
		}
	}
	// Core kallsyms (readelf's symtab counts include entry 0, which
	// Module.Symbols leaves out).
	for name, want := range map[string]int{"kvm": 5335, "kvm_intel": 664, "xfs": 8041, "ext4": 2986} {
		m, _ := l.Lookup(name)
		if got := len(m.Module.Symbols) + 1; got != want {
			t.Errorf("%s: %d core symbols (with entry 0), reference %d", name, got, want)
		}
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRelocatedTables: every code / bug / insn / mcount address kpsim
// decoded is the relocation readelf shows for that field (section symbol
// + addend, at the section's address kpsim assigned), and every jump
// entry's opcode size equals its decoded size in the relocated text.
func TestRelocatedTables(t *testing.T) {
	k, l, loads := readelfLoads(t)
	for name, m := range loads {
		mod := m.Module
		target := func(r rela) (uint64, bool) {
			s, ok := m.Section(r.sym)
			if !ok {
				for _, sym := range mod.Symbols {
					if sym.Name == r.sym {
						return sym.Addr + uint64(r.addend), true
					}
				}
				return 0, false
			}
			return s.Addr + uint64(r.addend), true
		}
		check := func(sec string, entsize uint64, field uint64, have []uint64) {
			var want []uint64
			for _, r := range relocs(t, m.Path, ".rela"+sec) {
				if r.off%entsize != field {
					continue
				}
				a, ok := target(r)
				if !ok {
					t.Errorf("%s %s: relocation against %s, not a section or module symbol", name, sec, r.sym)
					return
				}
				want = append(want, a)
			}
			slices.Sort(want)
			have = slices.Sorted(slices.Values(have))
			if !slices.Equal(want, have) {
				t.Errorf("%s %s: %d decoded addresses differ from readelf's %d relocation targets", name, sec, len(have), len(want))
			}
		}
		var codes, bugs, insns []uint64
		for _, e := range mod.JumpEntries {
			codes = append(codes, e.Code)
		}
		for _, b := range mod.BugEntries {
			bugs = append(bugs, b.Addr)
		}
		for _, e := range mod.ExTable {
			insns = append(insns, e.Insn)
		}
		check("__jump_table", JumpEntrySize, 0, codes)
		check("__bug_table", BugEntrySize, 0, bugs)
		check("__ex_table", ExEntrySize, 0, insns)
		check("__mcount_loc", McountLocSize, 0, mod.McountLocs)

		c := sim.NewCounters(false)
		for _, e := range mod.JumpEntries {
			text := m.mem.at(e.Code, 15)
			if text == nil {
				text = m.mem.at(e.Code, 5)
			}
			op, err1 := x86.JumpEntrySize(c, text)
			dec, err2 := x86.JumpEntrySizeDecode(c, text)
			if err1 != nil || err2 != nil || op != dec || (op != 2 && op != 5) {
				t.Errorf("%s jump entry %#x: opcode size %d (%v), decoded %d (%v), bytes %x", name, e.Code, op, err1, dec, err2, text[:min(len(text), 5)])
			}
		}
		// Jump targets and exception fixups are module text; every
		// static-call key is a __SCK__ symbol of the module or of vmlinux
		// (trampoline keys replaced as static_call_add_module does) of vmlinux
		// or a loaded module.
		inText := func(a uint64) bool {
			return (a >= m.Core.Base && a < m.Core.Base+m.Core.TextSize) || (a >= m.Init.Base && a < m.Init.Base+m.Init.TextSize)
		}
		for _, e := range mod.JumpEntries {
			if !inText(e.Target) {
				t.Errorf("%s jump entry %#x: target %#x outside the module's text", name, e.Code, e.Target)
			}
		}
		for _, e := range mod.ExTable {
			if !inText(e.Insn) || !inText(e.Fixup) {
				t.Errorf("%s exception entry %#x -> %#x outside the module's text", name, e.Insn, e.Fixup)
			}
		}
		keys := map[uint64]string{}
		for _, lm := range l.Loaded() { // kvm_intel calls kvm's static calls
			for _, s := range lm.Module.Symbols {
				keys[s.Addr] = s.Name
			}
		}
		for _, s := range k.Symbols {
			if strings.HasPrefix(s.Name, "__SCK__") {
				keys[s.Addr] = s.Name
			}
		}
		for _, s := range mod.StaticCallSites {
			if !strings.HasPrefix(keys[s.Key], "__SCK__") {
				t.Errorf("%s static-call site %#x: key %#x (%q) is not a static_call_key", name, s.Addr, s.Key, keys[s.Key])
			}
		}
		for _, b := range mod.BugEntries {
			if ud := m.mem.at(b.Addr, 2); !bytes.Equal(ud, []byte{0x0f, 0x0b}) {
				t.Errorf("%s bug entry %#x (%s:%d): %x, want ud2", name, b.Addr, b.File, b.Line, ud)
			}
		}
	}
}

// TestModuleFinalize: on the booted Debian kernel (load.Open boots it for
// alternative.DefaultCPU) every module paravirt and alternative site
// decodes instruction by instruction to exactly its length, and no
// paravirt site is left as the indirect "call *pv_ops" (ff 15).
func TestModuleFinalize(t *testing.T) {
	k, dir := realKernel(t)
	if k.Config.CPU == "" || k.Config.CPU == alternative.CPUNone {
		t.Skip("kernel not boot-patched")
	}
	l := NewLoader(k, Options{Dir: dir})
	c := sim.NewCounters(false)
	walk := func(name string, m *Loaded, addr uint64, n int) {
		b := m.mem.Text(addr, n)
		if len(b) != n {
			t.Errorf("%s site %#x: %d bytes mapped, want %d", name, addr, len(b), n)
			return
		}
		for off := 0; off < n; {
			in, err := x86.Decode(c, b[off:])
			if err != nil || off+in.Len > n {
				t.Errorf("%s site %#x+%d: %x: %v (len %d of %d)", name, addr, off, b, err, in.Len, n)
				return
			}
			off += in.Len
		}
	}
	for _, name := range []string{"kvm", "kvm_intel", "kvm_amd", "xfs", "ext4"} {
		m, err := l.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := m.Section(".parainstructions"); ok {
			sites, err := alternative.ParseParaInstructions(m.mem.Text(p.Addr, int(p.Size)))
			if err != nil {
				t.Fatal(err)
			}
			if m.Patch.Paravirt.Sites != len(sites) || m.Patch.Paravirt.Sites == 0 {
				t.Errorf("%s: %d paravirt sites patched of %d", name, m.Patch.Paravirt.Sites, len(sites))
			}
			for _, s := range sites {
				walk(name+" paravirt", m, s.Instr, int(s.Len))
				if b := m.mem.Text(s.Instr, 2); b[0] == 0xff && b[1] == 0x15 {
					t.Errorf("%s paravirt site %#x still call *pv_ops", name, s.Instr)
				}
			}
		}
		if a, ok := m.Section(".altinstructions"); ok {
			alts, err := alternative.ParseAltInstructions(m.mem.Text(a.Addr, int(a.Size)), a.Addr)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range alts {
				walk(name+" alternative", m, s.Instr, int(s.InstrLen))
			}
		}
		t.Logf("%s: %s", name, strings.Join(m.Finalize, "; "))
	}
}

// TestCommittedList loads the committed lsmod list on the real kernel.
func TestCommittedList(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	k, dir := realKernel(t)
	list := committedList(t)
	l := NewLoader(k, Options{Dir: dir})
	for _, n := range LoadOrder(list) {
		if _, err := l.Load(n); err != nil {
			t.Fatal(err)
		}
	}
	if len(k.Modules) != len(list) {
		t.Errorf("%d modules loaded, the list has %d (its dependencies are all listed)", len(k.Modules), len(list))
	}
	// The committed sizes are the loader's core sizes, used-by its ref_module edges.
	for _, e := range list {
		m, _ := l.Lookup(e.Name)
		if m.Core.Size != e.Size {
			t.Errorf("%s: core size %d, list says %d", e.Name, m.Core.Size, e.Size)
		}
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLoadDebianModules(b *testing.B) {
	kernel, dir := realTree(b)
	names := LoadOrder(committedList(b))
	b.Run("kernel+modules", func(b *testing.B) {
		for b.Loop() {
			k, err := load.Open(kernel)
			if err != nil {
				b.Fatal(err)
			}
			l := NewLoader(k, Options{Dir: dir})
			for _, n := range names {
				if _, err := l.Load(n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("modules", func(b *testing.B) {
		k0, err := load.Open(kernel)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			k := *k0
			k.Modules = nil
			l := NewLoader(&k, Options{Dir: dir})
			for _, n := range names {
				if _, err := l.Load(n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
