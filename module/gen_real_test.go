package module

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/elfload"
	"github.com/kpsim/kpsim/internal/realkernel"
)

// genKernels holds, per generation, the -dbg vmlinux read once per test
// binary (elfload, text as built: CPU none).
var genKernels = struct {
	sync.Mutex
	k   map[image.Generation]*image.Kernel
	err map[image.Generation]error
}{k: map[image.Generation]*image.Kernel{}, err: map[image.Generation]error{}}

// genKernel returns the pinned package of generation g and a copy of its
// kernel without modules. The -dbg vmlinux is loaded with elfload; when
// elfload cannot read it (7.3's 16-byte bug entries before elfload reads
// them), the kernel is built from the -dbg System.map instead: its
// symbols, one core-text region [_stext, _etext) of zero bytes, and the
// config's CONFIG_DEBUG_BUGVERBOSE — all the loader consults.
func genKernel(t *testing.T, g image.Generation) (*image.Kernel, realkernel.Pkg) {
	t.Helper()
	p := realkernel.FindDbg(t, g)
	if _, err := os.Stat(p.Modules); err != nil {
		t.Skipf("no %s module tree", g)
	}
	genKernels.Lock()
	defer genKernels.Unlock()
	k, ok := genKernels.k[g]
	if !ok && genKernels.err[g] == nil {
		b, err := os.ReadFile(p.Vmlinux)
		if err == nil {
			k, err = elfload.Load(p.Vmlinux, b)
			if err != nil {
				t.Logf("elfload: %v; using System.map", err)
				k, err = mapKernel(p)
			}
		}
		genKernels.k[g], genKernels.err[g] = k, err
	}
	if err := genKernels.err[g]; err != nil {
		t.Fatal(err)
	}
	c := *genKernels.k[g]
	c.Modules = nil
	return &c, p
}

// mapKernel builds the loader's view of a kernel from System.map.
func mapKernel(p realkernel.Pkg) (*image.Kernel, error) {
	f, err := os.Open(p.SystemMap)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := os.ReadFile(p.Config)
	if err != nil {
		return nil, err
	}
	k := &image.Kernel{Name: p.SystemMap, Config: image.Config{Gen: p.Gen, Version: p.Release,
		BugVerbose: bytes.Contains(cfg, []byte("\nCONFIG_DEBUG_BUGVERBOSE=y\n"))}}
	sc := bufio.NewScanner(f)
	var stext, etext uint64
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || len(fs[1]) != 1 {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil {
			continue
		}
		k.Symbols = append(k.Symbols, image.Symbol{Name: fs[2], Addr: a, Type: image.SymType(fs[1][0])})
		switch fs[2] {
		case "_stext":
			stext = a
		case "_etext":
			etext = a
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(k.Symbols, func(a, b image.Symbol) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return 0
	})
	if stext == 0 || etext <= stext {
		return nil, os.ErrInvalid
	}
	k.Regions = []*image.Region{{Name: ".text", Kind: image.CoreText, Start: stext, Bytes: make([]byte, etext-stext)}}
	return k, nil
}

// xzDecompressed runs xz -dc on a module file into dir and returns the
// .ko's path (the reference readelf reads); t skips without xz.
func xzDecompressed(t *testing.T, dir, path string) string {
	t.Helper()
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("no xz")
	}
	out, err := exec.Command("xz", "-dc", path).Output()
	if err != nil {
		t.Fatalf("xz -dc %s: %v", path, err)
	}
	ko := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".xz"))
	if err := os.WriteFile(ko, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return ko
}

// genModules are the modules the generation tests load (with their
// dependencies), as named in the brief: kvm, kvm_intel, xfs, ext4.
var genModules = []string{"kvm", "kvm_intel", "xfs", "ext4"}

// TestGenReadelf loads kvm, kvm_intel, xfs and ext4 from the 6.12 and 7.3
// packages' .ko.xz files and checks, against readelf on the xz -dc
// output: Decompress gives the same bytes; every table's entry count is
// its section size over the generation's entry size; every allocated
// section keeps its size; every relocated table address is readelf's
// relocation target; the layout puts each section in its mod_mem_type.
func TestGenReadelf(t *testing.T) {
	needReadelf(t)
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			k, p := genKernel(t, g)
			l := NewLoader(k, Options{Dir: p.Modules})
			if l.Generation() != g {
				t.Fatalf("loader generation %s, want %s", l.Generation(), g)
			}
			tmp := t.TempDir()
			for _, name := range genModules {
				m, err := l.Load(name)
				if err != nil {
					t.Fatal(err)
				}
				ko := xzDecompressed(t, tmp, m.Path)
				ref, _ := os.ReadFile(ko)
				raw, _ := os.ReadFile(m.Path)
				if got, err := Decompress(m.Path, raw); err != nil || !bytes.Equal(got, ref) {
					t.Fatalf("%s: Decompress differs from xz -dc (%v)", m.Path, err)
				}
				checkGenModule(t, l, name, m, ko)
			}
			checkGenLayout(t, l)
			if err := k.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// genCounts lists, per table, kpsim's count and entries and readelf's
// section size over the entry size.
func checkGenModule(t *testing.T, l *Loader, name string, m *Loaded, ko string) {
	t.Helper()
	sz := sectionSizes(t, ko)
	mod := m.Module
	bl := l.gen.bugEntry(l.k.Config.BugVerbose)
	var line []string
	for _, c := range []struct {
		sec         string
		size        uint64
		count, have int
	}{
		{"__jump_table", JumpEntrySize, m.Counts.JumpEntries, len(mod.JumpEntries)},
		{".static_call_sites", StaticCallSiteSize, m.Counts.StaticCallSites, len(mod.StaticCallSites)},
		{"__bug_table", uint64(bl.size), m.Counts.BugEntries, len(mod.BugEntries)},
		{"__mcount_loc", McountLocSize, m.Counts.McountLocs, len(mod.McountLocs)},
		{"__ex_table", ExEntrySize, m.Counts.ExEntries, len(mod.ExTable)},
		{"_kprobe_blacklist", BlacklistEntrySize, m.Counts.Blacklist, len(mod.Blacklist)},
		{".altinstructions", uint64(l.gen.altInstrSize), m.Counts.AltInstrs, m.Counts.AltInstrs},
		{".return_sites", SiteSize, m.Counts.ReturnSites, m.Counts.ReturnSites},
		{".retpoline_sites", SiteSize, m.Counts.RetpolineSites, m.Counts.RetpolineSites},
	} {
		want := int(sz[c.sec] / c.size)
		if sz[c.sec]%c.size != 0 {
			t.Errorf("%s %s: readelf size %#x is not a multiple of the %d-byte entry", name, c.sec, sz[c.sec], c.size)
		}
		if c.count != want || c.have != want {
			t.Errorf("%s %s: kpsim counts %d, holds %d entries; readelf: %#x bytes = %d entries", name, c.sec, c.count, c.have, sz[c.sec], want)
		}
		line = append(line, strings.TrimPrefix(strings.TrimPrefix(c.sec, "_"), "_")+"="+strconv.Itoa(c.count)+"/"+strconv.Itoa(want))
	}
	for _, r := range []struct{ sec, name string }{{".noinstr.text", image.RangeNoinstrText}, {".kprobes.text", image.RangeKprobesText}} {
		if rg, ok := mod.Range(r.name); (sz[r.sec] > 0) != ok || (ok && rg.End-rg.Start != sz[r.sec]) {
			t.Errorf("%s: %s range %+v (%v), readelf %#x", name, r.sec, rg, ok, sz[r.sec])
		}
	}
	for _, s := range m.Sections {
		if want, ok := sz[s.Name]; ok && s.Size != want && s.Name != ".symtab" && s.Name != ".strtab" {
			t.Errorf("%s: section %s is %#x bytes, readelf %#x", name, s.Name, s.Size, want)
		}
	}
	t.Logf("%s (%s): kpsim/readelf %s", name, filepath.Base(m.Path), strings.Join(line, " "))

	// Relocated addresses: each table's first field is readelf's
	// relocation target (section + addend, at kpsim's section address).
	target := func(r rela) (uint64, bool) {
		if s, ok := m.Section(r.sym); ok {
			return s.Addr + uint64(r.addend), true
		}
		for _, sym := range mod.Symbols {
			if sym.Name == r.sym {
				return sym.Addr + uint64(r.addend), true
			}
		}
		return 0, false
	}
	check := func(sec string, entsize uint64, have []uint64) {
		var want []uint64
		for _, r := range relocs(t, ko, ".rela"+sec) {
			if r.off%entsize != 0 {
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
		if have = slices.Sorted(slices.Values(have)); !slices.Equal(want, have) {
			t.Errorf("%s %s: %d decoded addresses differ from readelf's %d relocation targets", name, sec, len(have), len(want))
		}
	}
	var codes, bugs, insns []uint64
	for _, e := range mod.JumpEntries {
		codes = append(codes, e.Code)
	}
	args := 0
	for _, b := range mod.BugEntries {
		bugs = append(bugs, b.Addr)
		if b.File == "" || b.Line == 0 {
			t.Errorf("%s bug entry %#x: no file:line (%q:%d)", name, b.Addr, b.File, b.Line)
			break
		}
		// 7.3's WARN with arguments (BUGFLAG_ARGS, 1<<4) records the
		// address after its "lea bug_entry" (the argument set-up and the
		// call of the WARN_trap static call); every other entry is a ud2.
		if b.Flags&(1<<4) != 0 && l.gen.gen == image.Gen73 {
			args++
		} else if ud := m.mem.at(b.Addr, 2); !bytes.Equal(ud, []byte{0x0f, 0x0b}) {
			t.Errorf("%s bug entry %#x (%s:%d, flags %#x): %x, want ud2", name, b.Addr, b.File, b.Line, b.Flags, ud)
		}
	}
	if args > 0 {
		t.Logf("%s: %d of %d bug entries are WARNs with arguments (BUGFLAG_ARGS)", name, args, len(mod.BugEntries))
	}
	for _, e := range mod.ExTable {
		insns = append(insns, e.Insn)
	}
	check("__jump_table", JumpEntrySize, codes)
	check("__bug_table", uint64(bl.size), bugs)
	check("__ex_table", ExEntrySize, insns)
	check("__mcount_loc", McountLocSize, mod.McountLocs)
}

// checkGenLayout: each loaded module's sections sit in the mod_mem_type
// __layout_sections gives them, blocks do not overlap and each vmalloc'ed
// one has its guard page.
func checkGenLayout(t *testing.T, l *Loader) {
	t.Helper()
	type blk struct {
		name       string
		start, end uint64
	}
	var all []blk
	for _, m := range l.Loaded() {
		if m.Core.Size != 0 || m.Init.Size != 0 {
			t.Errorf("%s: 6.1 layouts set on a %s module", m.Module.Name, l.Generation())
		}
		want := map[string]ModMemType{".text": ModText, ".init.text": ModInitText, "__mcount_loc": ModRodata,
			".rodata": ModRodata, "__jump_table": ModROAfterInit, ".data..ro_after_init": ModROAfterInit,
			".data": ModData, ".bss": ModData, "__bug_table": ModData, ".gnu.linkonce.this_module": ModData,
			".init.data": ModInitData, ".symtab": ModInitData, ".strtab": ModInitData, ".exit.text": ModText,
			".static_call_sites": ModData}
		if l.gen.execmemROX { // 7.3: module_mark_ro_after_init
			want[".static_call_sites"] = ModROAfterInit
		}
		for _, s := range m.Sections {
			if w, ok := want[s.Name]; ok && s.Block != w.String() {
				t.Errorf("%s: %s in %s, want %s", m.Module.Name, s.Name, s.Block, w)
			}
			mm := m.Mem[typeOf(s.Block)]
			if s.Addr < mm.Base || s.Addr+s.Size > mm.Base+mm.Size {
				t.Errorf("%s: %s [%#x, +%#x) outside its %s block [%#x, +%#x)", m.Module.Name, s.Name, s.Addr, s.Size, s.Block, mm.Base, mm.Size)
			}
		}
		if m.Module.Text.Start != m.Mem[ModText].Base || uint64(len(m.Module.Text.Bytes)) != m.Mem[ModText].Size {
			t.Errorf("%s: text region %#x+%#x is not MOD_TEXT %+v", m.Module.Name, m.Module.Text.Start, len(m.Module.Text.Bytes), m.Mem[ModText])
		}
		for ty, mm := range m.Mem {
			if mm.Size == 0 {
				continue
			}
			if mm.Size%PageSize != 0 || mm.Base%PageSize != 0 || mm.Base < ModulesVaddr+DefaultLoadOffset {
				t.Errorf("%s %s: %+v not page-aligned in the module area", m.Module.Name, ModMemType(ty), mm)
			}
			end := mm.Base + mm.Size
			if !(l.gen.execmemROX && ModMemType(ty).IsText()) {
				end += PageSize // the guard page
			}
			all = append(all, blk{m.Module.Name + " " + ModMemType(ty).String(), mm.Base, end})
		}
		t.Logf("%s: size %d, MOD_TEXT %#x+%#x MOD_DATA %#x+%#x MOD_RODATA %#x+%#x MOD_RO_AFTER_INIT %#x+%#x init text %#x+%#x",
			m.Module.Name, m.Size(), m.Mem[ModText].Base, m.Mem[ModText].Size, m.Mem[ModData].Base, m.Mem[ModData].Size,
			m.Mem[ModRodata].Base, m.Mem[ModRodata].Size, m.Mem[ModROAfterInit].Base, m.Mem[ModROAfterInit].Size,
			m.Mem[ModInitText].Base, m.Mem[ModInitText].Size)
	}
	// Init text freed into the ROX cache may be reused by a later module's
	// text: only blocks live at the same time must not overlap.
	slices.SortFunc(all, func(a, b blk) int {
		if a.start < b.start {
			return -1
		}
		if a.start > b.start {
			return 1
		}
		return 0
	})
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		freed := strings.HasSuffix(a.name, "MOD_INIT_TEXT") || strings.HasSuffix(b.name, "MOD_INIT_TEXT")
		if b.start < a.end && !(freed && l.gen.execmemROX) {
			t.Errorf("blocks %s [%#x, %#x) and %s [%#x, %#x) overlap", a.name, a.start, a.end, b.name, b.start, b.end)
		}
	}
}

// typeOf maps a block name back to its mod_mem_type.
func typeOf(name string) ModMemType {
	for t := range ModMemNumTypes {
		if t.String() == name {
			return t
		}
	}
	return modInvalid
}

// TestFindTreeReal: the default tree beside each pinned kernel, stripped
// or -dbg, is its package's module tree; 6.1's stays lib/modules/KVER
// beside the cached bzImage.
func TestFindTreeReal(t *testing.T) {
	t.Run("6.1", func(t *testing.T) {
		k := realkernel.Path(t)
		want := filepath.Join(filepath.Dir(k), "lib", "modules", realkernel.Version)
		if _, err := os.Stat(want); err != nil {
			t.Skip("no 6.1 module tree")
		}
		if got, _ := FindTreeDir(k, ""); got != want {
			t.Errorf("FindTreeDir(%s) = %q, want %q", k, got, want)
		}
	})
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			p := realkernel.Find(t, g)
			kernels := []string{p.Vmlinuz}
			if _, err := os.Stat(p.Vmlinux); err == nil {
				kernels = append(kernels, p.Vmlinux)
			}
			for _, k := range kernels {
				if got, tried := FindTreeDir(k, ""); got != p.Modules {
					t.Errorf("FindTreeDir(%s) = %q (tried %q), want %q", k, got, tried, p.Modules)
				}
				if r := ReleaseFromPath(k); r != p.Release {
					t.Errorf("ReleaseFromPath(%s) = %q, want %q", k, r, p.Release)
				}
			}
		})
	}
}
