package x86

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// objdumpBinary runs objdump -D on code as raw x86-64 bytes: a skip when
// binutils is absent, a failure when it fails on the input.
func objdumpBinary(t *testing.T, code []byte) []byte {
	t.Helper()
	path, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump not installed")
	}
	f := filepath.Join(t.TempDir(), "code.bin")
	if err := os.WriteFile(f, code, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "-D", "-w", "-b", "binary", "-m", "i386:x86-64", f).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("objdump on % x: %v %s", code, err, stderr)
	}
	return out
}

// objdumpInsns disassembles code with binutils and returns each
// instruction's length and mnemonic (objdump -D -b binary -m i386:x86-64).
func objdumpInsns(t *testing.T, code []byte) (lens []int, names []string) {
	t.Helper()
	out := objdumpBinary(t, code)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) < 3 || !strings.HasSuffix(parts[0], ":") {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(parts[1]), " ", ""))
		if err != nil {
			continue
		}
		lens = append(lens, len(b))
		names = append(names, strings.Fields(parts[2] + " ?")[0])
	}
	return lens, names
}

// TestAgainstObjdump lays the special cases out back to back and checks
// that binutils finds the same instruction boundaries and mnemonics.
func TestAgainstObjdump(t *testing.T) {
	cases := []struct{ hex, objdump string }{
		{"f3 0f 1e fa", "endbr64"},
		{"f3 0f 1e fb", "endbr32"},
		{"0f 01 ca", "clac"},
		{"0f 01 cb", "stac"},
		{"0f 01 ee", "rdpkru"},
		{"0f 01 ef", "wrpkru"},
		{"0f 01 e8", "serialize"},
		{"0f 01 c1", "vmcall"},
		{"0f 01 c2", "vmlaunch"},
		{"0f 01 c3", "vmresume"},
		{"0f 01 c4", "vmxoff"},
		{"0f 01 d9", "vmmcall"},
		{"0f 01 fa", "monitorx"},
		{"0f 01 fb", "mwaitx"},
		{"0f c7 f8", "rdseed"},
		{"f3 0f c7 f8", "rdpid"},
		{"c4 e2 78 49 c0", "tilerelease"},
		{"f3 0f 01 d9", "vmgexit"},
		{"f3 0f 01 fe", "rmpadjust"},
		{"f2 0f 01 ff", "pvalidate"},
		{"66 0f ae f1", "tpause"},
		{"f2 0f ae f1", "umwait"},
		{"66 0f 38 f8 84 24 00 01 00 00", "movdir64b"},
		{"f3 0f 38 f8 45 00", "enqcmds"},
		{"c5 f8 77", "vzeroupper"},
		{"c5 fc 77", "vzeroall"},
		{"66 66 66 66 66 66 2e 0f 1f 84 00 00 00 00 00", "data16"},
		{"65 48 8b 04 25 28 00 00 00", "mov"},
		{"48 b8 88 77 66 55 44 33 22 11", "movabs"},
		{"e8 7b 5a ff ff", "call"},
		{"ff 25 00 10 00 00", "jmp"},
		{"0f ae e8", "lfence"},
		{"f3 90", "pause"},
		{"66 90", "xchg"},
		{"0f 1f 44 00 00", "nopl"},
		{"0f 0b", "ud2"},
		{"cc", "int3"},
	}
	var code []byte
	for _, c := range cases {
		code = append(code, hx(t, c.hex)...)
	}
	lens, names := objdumpInsns(t, code)
	if len(lens) != len(cases) {
		t.Fatalf("objdump found %d instructions, want %d: %v", len(lens), len(cases), names)
	}
	for i, c := range cases {
		in, err := Decode(nil, hx(t, c.hex))
		if err != nil {
			t.Errorf("%s: %v", c.hex, err)
			continue
		}
		if in.Len != lens[i] || names[i] != c.objdump {
			t.Errorf("%s: kpsim len %d %q, objdump len %d %q (want %q)", c.hex, in.Len, in.Mnemonic, lens[i], names[i], c.objdump)
		}
	}
}

// TestAgainstObjdumpELF walks the .text of a system library with objdump's
// boundaries and checks every length. Set KPSIM_X86_CORPUS to an ELF file to
// run it (libc: ~335k instructions, all agree, ~1 s).
func TestAgainstObjdumpELF(t *testing.T) {
	path := os.Getenv("KPSIM_X86_CORPUS")
	if path == "" {
		t.Skip("set KPSIM_X86_CORPUS=/path/to/elf to compare a whole .text with objdump")
	}
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("objdump not installed")
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("objdump", "-d", "-w", "-j", ".text", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, bad := 0, 0
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) < 3 || !strings.HasSuffix(parts[0], ":") || strings.HasPrefix(parts[2], "(bad)") {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(parts[0], ":")), 16, 64)
		if err != nil || addr < sec.Addr || addr >= sec.Addr+uint64(len(data)) {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(parts[1]), " ", ""))
		if err != nil {
			continue
		}
		off := addr - sec.Addr
		n++
		in, err := Decode(nil, data[off:min(uint64(len(data)), off+MaxInsnSize)])
		if err != nil || in.Len != len(b) {
			bad++
			if bad <= 20 {
				t.Logf("%#x: % x %s: kpsim len %d err %v", addr, b, parts[2], in.Len, err)
			}
		}
	}
	t.Logf("%d instructions, %d disagree", n, bad)
}
