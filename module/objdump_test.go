package module

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// objdumpStarts returns the instruction start offsets objdump -d prints
// for one section of a .ko.
func objdumpStarts(t *testing.T, path, sec string) []uint64 {
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", "-j", sec, path).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", path, err)
	}
	var starts []uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, ":\t")
		if i < 0 || !strings.HasPrefix(line, " ") {
			continue
		}
		off, err := strconv.ParseUint(strings.TrimSpace(line[:i]), 16, 64)
		if err != nil {
			continue
		}
		starts = append(starts, off)
	}
	return starts
}

// TestAgainstObjdump: a module's executable sections, laid out and
// relocated (no boot patching: --cpu none; ftrace's NOP5 is as long as the
// call it replaces), decode linearly into exactly the instruction
// boundaries objdump finds in the .ko file. A relocation written to the
// wrong place or a section copied to the wrong offset would show here.
func TestAgainstObjdump(t *testing.T) {
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("no objdump (binutils)")
	}
	k, dir := realKernel(t)
	k.Config.CPU, k.Config.ReturnsPatched = alternative.CPUNone, false
	l := NewLoader(k, Options{Dir: dir})
	c := sim.NewCounters(false)
	for _, name := range []string{"kvm", "kvm_intel", "xfs"} {
		m, err := l.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".text", ".text.unlikely", ".noinstr.text", ".altinstr_replacement"} {
			s, ok := m.Section(sec)
			if !ok || s.Size == 0 {
				continue
			}
			want := objdumpStarts(t, m.Path, sec)
			b := m.mem.Text(s.Addr, int(s.Size))
			var got []uint64
			for off := 0; off < len(b); {
				got = append(got, uint64(off))
				in, err := x86.Decode(c, b[off:])
				if err != nil {
					t.Fatalf("%s %s+%#x: %x: %v", name, sec, off, b[off:min(off+8, len(b))], err)
				}
				off += in.Len
			}
			if len(got) != len(want) {
				t.Errorf("%s %s: %d instructions, objdump %d", name, sec, len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Errorf("%s %s: instruction %d at %#x, objdump %#x", name, sec, i, got[i], want[i])
					break
				}
			}
			t.Logf("%s %s: %d instructions", name, sec, len(got))
		}
	}
}
