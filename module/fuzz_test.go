package module

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// FuzzLoadFile: any input either loads into a module whose tables point
// into its own blocks or vmlinux, or fails with one line naming the file;
// it never panics, and a failed load leaves the image unchanged.
func FuzzLoadFile(f *testing.F) {
	for _, n := range []string{"dummy.ko", "crc16.ko"} {
		b := readTestdata(f, n)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k := fakeKernel(t)
		l := NewLoader(k, Options{})
		l.maxBlock = 4 << 20
		m, err := l.LoadFile("fuzz.ko", b)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.ko: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming fuzz.ko", msg)
			}
			if len(k.Modules) != 0 {
				t.Fatal("failed load left a module in the image")
			}
			return
		}
		if len(k.Modules) != 1 || k.Modules[0] != m.Module {
			t.Fatal("loaded module not in the image")
		}
		end := m.Core.Base + m.Core.Size
		if m.Init.Size > 0 {
			end = m.Init.Base + m.Init.Size
		}
		for _, s := range m.Sections {
			if s.Addr < m.Core.Base || s.Addr+s.Size > end {
				t.Fatalf("section %s [%#x, +%#x) outside the module's blocks", s.Name, s.Addr, s.Size)
			}
		}
	})
}

// FuzzApplyRelocateAdd: the relocation code never panics or writes outside
// the target, and a success only ever changes bytes that were zero.
func FuzzApplyRelocateAdd(f *testing.F) {
	e := make([]byte, relaSize)
	binary.LittleEndian.PutUint64(e[8:], 1<<32|2) // PC32 against symbol 1
	f.Add(e, uint64(0xffffffffc0001000), uint64(0xffffffff81000000), 16)
	binary.LittleEndian.PutUint64(e[8:], 1<<32|24) // PC64
	f.Add(e, uint64(0xffffffffc0001000), uint64(0xffffffffc0002000), 8)
	f.Fuzz(func(t *testing.T, rela []byte, secAddr, symVal uint64, n int) {
		if n < 0 || n > 4096 {
			return
		}
		loc := make([]byte, n+8)
		for i := n; i < len(loc); i++ {
			loc[i] = 0xa5 // guard bytes past the section
		}
		err := ApplyRelocateAdd(".rela.fuzz", rela, loc[:n:n], secAddr, []uint64{0, symVal})
		for i := n; i < len(loc); i++ {
			if loc[i] != 0xa5 {
				t.Fatalf("wrote past the %d-byte section (err %v)", n, err)
			}
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
	})
}

// FuzzParseList: /proc/modules and lsmod parsing never panics, errors are
// one line naming the file, and a parsed list has distinct names.
func FuzzParseList(f *testing.F) {
	f.Add([]byte("kvm_intel 380928 0 - Live 0xffffffffc0a00000\nkvm 1146880 1 kvm_intel, Live 0xffffffffc0800000 (E)\n"))
	f.Add([]byte("Module                  Size  Used by\nkvm_intel             380928  0\nkvm                  1146880  1 kvm_intel\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseList("list", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "list") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range l {
			if seen[e.Name] || e.Name == "" || bytes.ContainsAny([]byte(e.Name), " \t\n") {
				t.Fatalf("bad or repeated name %q", e.Name)
			}
			seen[e.Name] = true
		}
	})
}
