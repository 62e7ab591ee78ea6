package module

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// The two .ko files in testdata are Debian's linux-image-6.1.0-57-amd64
// (6.1.192-3) lib/crc16.ko and drivers/net/dummy.ko, unchanged (GPL-2.0).

// fakeKernel is a vmlinux model that defines every symbol the testdata
// modules leave undefined, in a core text region and a data area, so the
// loader tests run without the real kernel.
func fakeKernel(t testing.TB) *image.Kernel {
	k := &image.Kernel{Name: "fake", Config: image.Config{BugVerbose: true, ReturnsPatched: true, RetThunk: true}}
	text := &image.Region{Name: ".text", Kind: image.CoreText, Start: 0xffffffff81000000, Bytes: make([]byte, 0x10000)}
	k.Regions = []*image.Region{text}
	names := []string{"__fentry__", "__x86_return_thunk", "__SCT__cond_resched", "dev_lstats_read", "rtnl_unlock", "eth_mac_addr",
		"__rtnl_link_unregister", "skb_tstamp_tx", "consume_skb", "eth_validate_addr", "__rtnl_link_register", "ether_setup",
		"dev_addr_mod", "alloc_netdev_mqs", "__stack_chk_fail", "__alloc_percpu_gfp", "rtnl_link_unregister", "down_write", "up_write",
		"free_netdev", "_find_next_bit", "free_percpu", "strscpy", "netif_carrier_off", "netif_carrier_on", "rtnl_lock",
		"get_random_bytes", "skb_clone_tx_timestamp", "ethtool_op_get_ts_info", "register_netdevice"}
	for i, n := range names {
		k.Symbols = append(k.Symbols, image.Symbol{Name: n, Addr: text.Start + uint64(i)*64, Size: 64, Type: 'T'})
	}
	for i, n := range []string{"__SCK__cond_resched", "__cpu_possible_mask", "nr_cpu_ids", "pernet_ops_rwsem", "param_ops_int"} {
		k.Symbols = append(k.Symbols, image.Symbol{Name: n, Addr: 0xffffffff82000000 + uint64(i)*64, Size: 64, Type: 'D'})
	}
	k.Symbols = append([]image.Symbol{{Name: "this_cpu_off", Addr: 0x1ad00, Size: 8, Type: 'D'}}, k.Symbols...)
	// __x86_return_thunk is where the module's returns jump.
	return k
}

func readTestdata(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustLoad loads testdata/name with l, failing t on an error.
func mustLoad(t testing.TB, l *Loader, name string) *Loaded {
	m, err := l.LoadFile("testdata/"+name, readTestdata(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadDummy(t *testing.T) {
	k := fakeKernel(t)
	l := NewLoader(k, Options{})
	m := mustLoad(t, l, "dummy.ko")
	mod := m.Module
	if mod.Name != "dummy" || mod.State != image.ModuleLive || mod.Init != nil {
		t.Fatalf("module %q state %v init %v: want dummy, live, init freed", mod.Name, mod.State, mod.Init)
	}
	if m.Core.Base != ModulesVaddr+DefaultLoadOffset {
		t.Errorf("core base %#x, want MODULES_VADDR + one page", m.Core.Base)
	}
	// readelf -SW dummy.ko: __mcount_loc 0x50 (10), .static_call_sites 0x8 (1),
	// .return_sites 0x28 (10); no jump, bug or exception table.
	want := Counts{McountLocs: 10, StaticCallSites: 1, ReturnSites: 10}
	if m.Counts != want {
		t.Errorf("counts %+v, want %+v", m.Counts, want)
	}
	// The static-call site's key pointed at the trampoline __SCT__cond_resched:
	// static_call_add_module replaces it by the key.
	sck := k.SymbolsByName("__SCK__cond_resched")[0].Addr
	// The one site is in dummy_init_module: marked init (__static_call_init).
	ini, _ := m.Section(".init.text")
	if s := mod.StaticCallSites[0]; s.Key != sck || !s.Init || s.Addr < ini.Addr || s.Addr >= ini.Addr+ini.Size {
		t.Errorf("static-call site %+v: want key __SCK__cond_resched %#x and an init site in .init.text %+v", s, sck, ini)
	}
	// Every mcount site is in text and now NOP5 (ftrace_module_init).
	for _, a := range mod.McountLocs {
		if !bytes.Equal(k.Text(a, 5), nop5) && mod.Text.Contains(a) {
			t.Errorf("mcount site %#x: %x, want NOP5", a, k.Text(a, 5))
		}
	}
	// Returns were patched to ret; int3 (the fake image's returns are patched).
	if len(m.Finalize) != 1 || !strings.Contains(m.Finalize[0], "10 of 10") {
		t.Errorf("finalize %q, want all 10 returns patched", m.Finalize)
	}
	// Layout: .text is the first text section at the core base; sections
	// are page-grouped text < rodata < ro_after_init < data.
	txt, _ := m.Section(".text")
	if txt.Addr != m.Core.Base {
		t.Errorf(".text at %#x, want the core base %#x", txt.Addr, m.Core.Base)
	}
	sc, _ := m.Section(".static_call_sites")
	mc, _ := m.Section("__mcount_loc")
	if !(mc.Addr >= m.Core.Base+m.Core.TextSize && mc.Addr < m.Core.Base+m.Core.ROSize) {
		t.Errorf("__mcount_loc at %#x, want core rodata [%#x, %#x)", mc.Addr, m.Core.Base+m.Core.TextSize, m.Core.Base+m.Core.ROSize)
	}
	if sc.Addr < m.Core.Base+m.Core.ROAfterInitSize {
		t.Errorf(".static_call_sites at %#x, want core data (>= %#x)", sc.Addr, m.Core.Base+m.Core.ROAfterInitSize)
	}
	if _, ok := m.Section(".modinfo"); ok {
		t.Error(".modinfo was allocated: rewrite_section_headers drops its SHF_ALLOC")
	}
	// Core kallsyms: no undefined symbols, no init ones, text symbols 't'.
	for _, s := range mod.Symbols {
		if s.Type == 'U' || s.Name == "" {
			t.Errorf("core symbol %+v: undefined or unnamed symbols are not core", s)
		}
		if s.Name == "dummy_init_module" {
			t.Errorf("init symbol %s kept in the core symtab", s.Name)
		}
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	// A second copy is -EEXIST.
	if _, err := l.LoadFile("testdata/dummy.ko", readTestdata(t, "dummy.ko")); err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("second load: %v, want already loaded", err)
	}
}

// TestLoadOrderAndLayout: two modules get increasing, non-overlapping
// blocks; the image keeps them oldest first.
func TestLoadOrderAndLayout(t *testing.T) {
	k := fakeKernel(t)
	l := NewLoader(k, Options{})
	a := mustLoad(t, l, "crc16.ko")
	b := mustLoad(t, l, "dummy.ko")
	if len(k.Modules) != 2 || k.Modules[0].Name != "crc16" || k.Modules[1].Name != "dummy" {
		t.Fatalf("modules %v, want crc16 then dummy", k.Modules)
	}
	end := a.Core.Base + a.Core.Size
	if a.Init.Size > 0 {
		end = a.Init.Base + a.Init.Size
	}
	if b.Core.Base < end+PageSize {
		t.Errorf("dummy at %#x overlaps crc16's blocks and guard page ending %#x", b.Core.Base, end+PageSize)
	}
	// crc16 exports crc16 and crc16_table: a later module links against them.
	if e, ok := l.resolve("crc16"); !ok || e.owner != a {
		t.Errorf("crc16 export: %+v %v", e, ok)
	}
	for _, s := range a.Module.Symbols {
		if s.Name == "crc16" && s.Type != 't' {
			// EXPORT_SYMBOL (not _GPL): /proc/kallsyms prints it upper case.
			if s.Type != 'T' {
				t.Errorf("crc16 type %c, want T", s.Type)
			}
		}
	}
}

// corrupt returns a copy of dummy.ko changed by f.
func corrupt(t *testing.T, f func(b []byte)) []byte {
	b := bytes.Clone(readTestdata(t, "dummy.ko"))
	f(b)
	return b
}

// relaOffset returns the file offset of the first entry of the named RELA section.
func relaOffset(t *testing.T, b []byte, name string) int {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(name)
	if s == nil {
		t.Fatalf("no %s", name)
	}
	return int(s.Offset)
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		ko   func(t *testing.T) []byte
		want string
	}{
		{"truncated", func(t *testing.T) []byte { return readTestdata(t, "dummy.ko")[:5000] }, "truncated"},
		{"truncated header", func(t *testing.T) []byte { return readTestdata(t, "dummy.ko")[:40] }, "truncated"},
		{"empty", func(t *testing.T) []byte { return nil }, "truncated"},
		{"not ELF", func(t *testing.T) []byte { return []byte(strings.Repeat("x", 100)) }, "not an ELF"},
		{"aarch64", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) { binary.LittleEndian.PutUint16(b[18:], uint16(elf.EM_AARCH64)) })
		}, "EM_AARCH64: not an x86-64 module"},
		{"32-bit", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) { b[elf.EI_CLASS] = byte(elf.ELFCLASS32) })
		}, "ELFCLASS32"},
		{"executable", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) { binary.LittleEndian.PutUint16(b[16:], uint16(elf.ET_EXEC)) })
		}, "ET_EXEC"},
		{"unhandled relocation", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) {
				off := relaOffset(t, b, ".rela__mcount_loc")
				info := binary.LittleEndian.Uint64(b[off+8:])
				binary.LittleEndian.PutUint64(b[off+8:], info&^0xffffffff|uint64(elf.R_X86_64_GOTPCREL))
			})
		}, "R_X86_64_GOTPCREL: unhandled relocation type 9"},
		{"empty symbol table", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) {
				f, _ := elf.NewFile(bytes.NewReader(b))
				shoff := binary.LittleEndian.Uint64(b[40:])
				for i, s := range f.Sections {
					if s.Type == elf.SHT_SYMTAB {
						binary.LittleEndian.PutUint64(b[shoff+uint64(i)*64+32:], 0)
					}
				}
			})
		}, "symbol index"},
		{"nonzero target", func(t *testing.T) []byte {
			return corrupt(t, func(b []byte) {
				f, _ := elf.NewFile(bytes.NewReader(b))
				b[f.Section("__mcount_loc").Offset] = 1
			})
		}, "existing value is nonzero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLoader(fakeKernel(t), Options{}).LoadFile("dummy.ko", tc.ko(t))
			if err == nil {
				t.Fatal("loaded")
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "dummy.ko: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming dummy.ko and %q", msg, tc.want)
			}
		})
	}
}

func TestUnknownSymbol(t *testing.T) {
	k := fakeKernel(t)
	for i, s := range k.Symbols {
		if s.Name == "register_netdevice" {
			k.Symbols[i].Name = "renamed"
		}
	}
	_, err := NewLoader(k, Options{}).LoadFile("dummy.ko", readTestdata(t, "dummy.ko"))
	if err == nil || err.Error() != "dummy.ko: unknown symbol register_netdevice (simplify_symbols: -ENOENT)" {
		t.Errorf("error %v, want unknown symbol register_netdevice", err)
	}
	if len(k.Modules) != 0 {
		t.Errorf("a failed load left %d modules in the image", len(k.Modules))
	}
}

// tree writes a module tree with dummy.ko (its depends= set to deps) and crc16.ko.
func tree(t *testing.T, deps string) string {
	dir := t.TempDir()
	b := bytes.Clone(readTestdata(t, "dummy.ko"))
	if deps != "" {
		// Same-length edits of .modinfo: hide the empty depends= and turn
		// retpoline=Y into depends=<deps>.
		rep := "depends=" + deps
		if len(rep) != len("retpoline=Y") {
			t.Fatalf("deps %q must be 3 bytes", deps)
		}
		b = bytes.Replace(b, []byte("depends=\x00"), []byte("dxpends=\x00"), 1)
		b = bytes.Replace(b, []byte("retpoline=Y\x00"), []byte(rep+"\x00"), 1)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "kernel/drivers/net"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "kernel/lib"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "kernel/drivers/net/dummy.ko"), b, 0o644))
	must(os.WriteFile(filepath.Join(dir, "kernel/lib/crc16.ko"), readTestdata(t, "crc16.ko"), 0o644))
	return dir
}

func TestDependencies(t *testing.T) {
	dir := tree(t, "crc")
	k := fakeKernel(t)
	_, err := NewLoader(k, Options{Dir: dir}).Load("dummy")
	if err == nil || !strings.Contains(err.Error(), "dummy.ko: depends on crc, which is not in "+dir) {
		t.Errorf("missing dependency: %v", err)
	}
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Check([]string{"dummy"}); err == nil || !strings.Contains(err.Error(), "dummy.ko: depends on crc, which is not in "+dir) {
		t.Errorf("Check, missing dependency: %v", err)
	}
	_, err = NewLoader(k, Options{Dir: dir}).Load("nosuchmod")
	if err == nil || err.Error() != "module nosuchmod: no nosuchmod.ko in "+dir {
		t.Errorf("unknown module: %v", err)
	}
	// A dependency that exists is loaded first.
	dir = tree(t, "crc")
	os.Rename(filepath.Join(dir, "kernel/lib/crc16.ko"), filepath.Join(dir, "kernel/lib/crc.ko"))
	l := NewLoader(fakeKernel(t), Options{Dir: dir})
	// crc.ko is crc16 by name=: Load("crc") loads the file, whose module name is crc16.
	m, err := l.Load("dummy")
	if err != nil {
		t.Fatal(err)
	}
	if ls := l.Loaded(); len(ls) != 2 || ls[0].Module.Name != "crc16" || ls[1] != m {
		t.Errorf("load order %v, want crc16 (the dependency) then dummy", ls)
	}
}

func TestParseList(t *testing.T) {
	proc := "kvm_intel 380928 0 - Live 0xffffffffc0a00000\nkvm 1146880 1 kvm_intel, Live 0xffffffffc0800000 (E)\nirqbypass 16384 1 kvm, Live 0x0000000000000000\n"
	lsmod := "Module                  Size  Used by\nkvm_intel             380928  0\nkvm                  1146880  1 kvm_intel\nirqbypass              16384  1 kvm\n"
	for name, in := range map[string]string{"proc": proc, "lsmod": lsmod} {
		l, err := ParseList(name, []byte(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := strings.Join(LoadOrder(l), ",")
		if got != "irqbypass,kvm,kvm_intel" {
			t.Errorf("%s: load order %s", name, got)
		}
		if len(l[1].UsedBy) != 1 || l[1].UsedBy[0] != "kvm_intel" {
			t.Errorf("%s: kvm used by %v", name, l[1].UsedBy)
		}
	}
	for _, bad := range []string{"", "kvm\n", "kvm big 0\n", "kvm 1 0 - Live\n", "kvm 1 0 - Dead 0x0\n", "kvm 1 0\nkvm 2 0\n"} {
		if _, err := ParseList("f", []byte(bad)); err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "f") {
			t.Errorf("ParseList(%q) = %v, want a one-line error naming f", bad, err)
		}
	}
	// The committed list parses and names 130 modules.
	if l := committedList(t); len(l) != 130 {
		t.Fatalf("committed list: %d modules", len(l))
	}
}

// committedList is the committed lsmod list of a Debian 12 KVM host,
// parsed.
func committedList(t testing.TB) []ListEntry {
	t.Helper()
	b, err := os.ReadFile("../testdata/lsmod-debian12-kvm-host.txt")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseList("lsmod-debian12-kvm-host.txt", b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestApplyRelocateAdd(t *testing.T) {
	rela := func(off uint64, typ elf.R_X86_64, sym uint32, add int64) []byte {
		b := make([]byte, relaSize)
		binary.LittleEndian.PutUint64(b, off)
		binary.LittleEndian.PutUint64(b[8:], uint64(sym)<<32|uint64(typ))
		binary.LittleEndian.PutUint64(b[16:], uint64(add))
		return b
	}
	const sec = 0xffffffffc0001000
	vals := []uint64{0, 0xffffffff81000000, 0xffffffffc0002000, 0x1ad00, 0x100000000}
	for _, tc := range []struct {
		r    []byte
		want []byte // bytes at offset 0..8
		err  string
	}{
		{rela(0, elf.R_X86_64_64, 1, 0x10), le64(0xffffffff81000010), ""},
		{rela(0, elf.R_X86_64_PC32, 2, 4), le32(0x1004), ""},
		{rela(0, elf.R_X86_64_PLT32, 1, -4), le32(uint32(vals[1] - 4 - sec)), ""},
		{rela(0, elf.R_X86_64_PC64, 2, 2), le64(0x1002), ""},
		{rela(0, elf.R_X86_64_32S, 3, 0), le32(0x1ad00), ""},
		{rela(0, elf.R_X86_64_32S, 1, 0), le32(0x81000000), ""}, // the kernel code model: sign-extended
		{rela(0, elf.R_X86_64_32S, 4, 0), nil, "overflows a sign-extended"},
		{rela(0, elf.R_X86_64_32, 1, 0), nil, "overflows 32 bits"},
		{rela(0, elf.R_X86_64_GOTPCREL, 1, 0), nil, "unhandled relocation type 9"},
		{rela(6, elf.R_X86_64_64, 1, 0), nil, "outside the 8-byte target"},
		{rela(0, elf.R_X86_64_64, 9, 0), nil, "symbol index 9 outside"},
		{rela(0, elf.R_X86_64_NONE, 1, 0), le64(0), ""},
	} {
		loc := make([]byte, 8)
		err := ApplyRelocateAdd(".rela.test", tc.r, loc, sec, vals)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%x: %v", tc.r, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%x: error %v, want %q", tc.r, err, tc.err)
		case tc.err == "" && !bytes.Equal(loc[:len(tc.want)], tc.want):
			t.Errorf("%x: wrote %x, want %x", tc.r, loc, tc.want)
		}
	}
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
