package alternative_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/load"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/x86"
)

var (
	bootMu sync.Mutex
	boots  = map[string]*load.Result{}
)

// eachBootedCPU runs f, one subtest per named CPU, on the real kernel
// booted for it (skipped under -short).
func eachBootedCPU(t *testing.T, f func(t *testing.T, name string, r *load.Result)) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots the real kernel")
	}
	for _, cpu := range alternative.CPUNames() {
		t.Run(cpu, func(t *testing.T) { f(t, cpu, booted(t, cpu)) })
	}
}

// booted loads the real kernel booted for cpu, with site records; the
// vmlinux is decompressed once.
func booted(t testing.TB, cpu string) *load.Result {
	path, vmELF := realkernel.Vmlinux(t)
	bootMu.Lock()
	defer bootMu.Unlock()
	if r, ok := boots[cpu]; ok {
		return r
	}
	r, err := load.BytesWith(path, vmELF, load.Options{CPU: cpu, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	boots[cpu] = r
	return r
}

func symAddr(t testing.TB, k *image.Kernel, name string) uint64 {
	s := k.SymbolsByName(name)
	if len(s) == 0 {
		t.Fatalf("no %s", name)
	}
	return s[0].Addr
}

// walk decodes [addr, addr+n) of k's text and reports whether the
// instructions end exactly at addr+n.
func walk(k *image.Kernel, addr uint64, n int) (insns []x86.Insn, ok bool) {
	for off := 0; off < n; {
		in, err := x86.DecodeKernel(nil, k.Text(addr+uint64(off), 15))
		if err != nil {
			return insns, false
		}
		insns = append(insns, in)
		off += in.Len
		if off > n {
			return insns, false
		}
	}
	return insns, true
}

// TestRealSitesDecode: on the Debian kernel booted for each named CPU,
// every .parainstructions and .altinstructions site decodes into whole
// instructions that end on the site's end, no pv site is left as an
// indirect "call *pv_ops+off(%rip)", and no alternative site keeps a run
// of single-byte NOPs (optimize_nops ran over every one).
func TestRealSitesDecode(t *testing.T) {
	eachBootedCPU(t, func(t *testing.T, name string, r *load.Result) {
		k, tb := r.Kernel, &r.Booted.Tables
		if len(tb.Para) != 3848 || len(tb.Alternatives) != 4667 {
			t.Fatalf("site tables: %d para, %d alt; the Debian 6.1 vmlinux has 3848 and 4667", len(tb.Para), len(tb.Alternatives))
		}
		pv := symAddr(t, k, "pv_ops")
		for _, s := range tb.Para {
			ins, ok := walk(k, s.Instr, int(s.Len))
			if !ok {
				t.Fatalf("pv site %#x (type %d): % x does not decode to its %d bytes", s.Instr, s.Type, k.Text(s.Instr, int(s.Len)), s.Len)
			}
			in := ins[0]
			if in.Opcode[0] == 0xff && in.RIPRelative() {
				dest := s.Instr + uint64(in.Len) + uint64(int64(in.Disp))
				if dest >= pv && dest < pv+uint64(8*len(k.PVOps)) {
					t.Fatalf("pv site %#x still calls through pv_ops: % x", s.Instr, k.Text(s.Instr, 6))
				}
			}
		}
		for _, a := range tb.Alternatives {
			if _, ok := walk(k, a.Instr, int(a.InstrLen)); !ok {
				t.Fatalf("alternative %#x (%v inv=%v, %d/%d): % x does not decode to its %d bytes", a.Instr, a.Feature(), a.Inv(), a.InstrLen, a.ReplLen, k.Text(a.Instr, int(a.InstrLen)), a.InstrLen)
			}
			if b := k.Text(a.Instr, int(a.InstrLen)); bytes.Contains(b, []byte{0x90, 0x90}) {
				// A 0x90 0x90 pair may sit inside a longer instruction
				// (an immediate); only decoded single NOPs count.
				ins, _ := walk(k, a.Instr, int(a.InstrLen))
				for i := 1; i < len(ins); i++ {
					if ins[i-1].Len == 1 && ins[i].Len == 1 && ins[i-1].Opcode[0] == 0x90 && ins[i].Opcode[0] == 0x90 {
						t.Fatalf("alternative %#x keeps single NOPs: % x", a.Instr, b)
					}
				}
			}
		}
	})
}

// TestRealParavirtBytes: each pv site not rewritten by a later
// alternative holds exactly what paravirt_patch writes for its pv_ops
// slot: "call <slot>" + NOP1, or NOP6 for _paravirt_nop.
func TestRealParavirtBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("boots the real kernel")
	}
	r := booted(t, alternative.DefaultCPU)
	k := r.Kernel
	nop := symAddr(t, k, "_paravirt_nop")
	replaced := map[uint64]bool{}
	cpu, _ := alternative.LookupCPU(alternative.DefaultCPU)
	for _, a := range r.Booted.Tables.Alternatives {
		if cpu.Has(a.Feature()) != a.Inv() {
			replaced[a.Instr] = true
		}
	}
	var direct, nops, checked int
	for _, s := range r.Booted.Tables.Para {
		if replaced[s.Instr] {
			continue
		}
		checked++
		b := k.Text(s.Instr, int(s.Len))
		fn := k.PVOps[s.Type]
		var want []byte
		if fn == nop {
			want = alternative.Nop(6)
			nops++
		} else {
			d := uint32(int32(int64(fn - (s.Instr + 5))))
			want = []byte{0xe8, byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24), 0x90}
			direct++
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("pv site %#x type %d: % x, want % x", s.Instr, s.Type, b, want)
		}
	}
	t.Logf("%d pv sites not rewritten by alternatives: %d direct calls, %d NOP6", checked, direct, nops)
	// As built, every site is the indirect call kprobes refuses.
	raw := booted(t, alternative.CPUNone).Kernel
	pv := symAddr(t, k, "pv_ops")
	for _, s := range r.Booted.Tables.Para {
		in, err := x86.DecodeKernel(nil, raw.Text(s.Instr, 15))
		if err != nil || in.Opcode[0] != 0xff || !in.RIPRelative() || in.ModRMReg() != 2 {
			t.Fatalf("as built, pv site %#x is not call *disp32(%%rip): % x", s.Instr, raw.Text(s.Instr, 6))
		}
		if d := s.Instr + 6 + uint64(int64(in.Disp)); d != pv+8*uint64(s.Type) {
			t.Fatalf("as built, pv site %#x calls through %#x, not pv_ops slot %d", s.Instr, d, s.Type)
		}
	}
	if direct == 0 || nops == 0 {
		t.Fatal("expected both direct-call and nop pv sites on the Debian kernel")
	}
}

// TestRealAlternativeBytes: each alternative site holds what its last
// taken entry wrote: the replacement (a relative call or jump re-aimed at
// the replacement's own target), 0x90 padding turned into kernel NOPs;
// sites no entry took keep their original instructions.
func TestRealAlternativeBytes(t *testing.T) {
	eachBootedCPU(t, func(t *testing.T, name string, r *load.Result) {
		k := r.Kernel
		cpu := r.Booted.CPU
		last := map[uint64]alternative.AltInstr{}
		for _, a := range r.Booted.Tables.Alternatives {
			if cpu.Has(a.Feature()) != a.Inv() {
				last[a.Instr] = a
			}
		}
		var plain, calls, jumps int
		for at, a := range last {
			repl := k.Text(a.Repl, int(a.ReplLen))
			if repl == nil && a.ReplLen > 0 {
				// .altinstr_replacement is not a text region of the
				// image: read the booted ELF's copy through the records.
				repl = replacement(t, r, a)
			}
			got := k.Text(at, int(a.InstrLen))
			switch {
			case a.ReplLen == 5 && (repl[0] == 0xe8 || repl[0] == 0xe9):
				in, err := x86.DecodeKernel(nil, got)
				if err != nil {
					t.Fatal(err)
				}
				want := a.Repl + 5 + uint64(int64(int32(le32(repl[1:]))))
				if in.Target(at) != want {
					t.Fatalf("alternative %#x: % x goes to %#x, the replacement to %#x", at, got, in.Target(at), want)
				}
				if repl[0] == 0xe8 {
					calls++
				} else {
					jumps++
				}
			default:
				want := make([]byte, a.InstrLen)
				copy(want, repl)
				for i := int(a.ReplLen); i < len(want); i++ {
					want[i] = 0x90
				}
				alternative.OptimizeNops(want)
				if !bytes.Equal(got, want) {
					t.Fatalf("alternative %#x (%v): % x, want % x", at, a.Feature(), got, want)
				}
				plain++
			}
		}
		t.Logf("%s: %d sites replaced (%d plain, %d calls re-based, %d jumps re-aimed)", name, len(last), plain, calls, jumps)
	})
}

// readVA reads n bytes at virtual address va of an ELF file.
func readVA(data []byte, va uint64, n int) ([]byte, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && va >= p.Vaddr && va+uint64(n) <= p.Vaddr+p.Filesz {
			off := p.Off + va - p.Vaddr
			return data[off : off+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("%#x+%d is not in a PT_LOAD segment", va, n)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// replacement returns the replacement bytes of a from the as-built ELF.
func replacement(t testing.TB, r *load.Result, a alternative.AltInstr) []byte {
	t.Helper()
	_, vmELF := realkernel.Vmlinux(t)
	b, err := readVA(vmELF, a.Repl, int(a.ReplLen))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRealRetpolinesAndReturns: after boot, no return site jumps to
// __x86_return_thunk, and each retpoline site is the indirect call/jmp
// through the register its thunk named (or, under spectre_v2=retpoline,
// the thunk call as built).
func TestRealRetpolinesAndReturns(t *testing.T) {
	eachBootedCPU(t, func(t *testing.T, name string, r *load.Result) {
		asBuilt := booted(t, alternative.CPUNone).Kernel // cached after the first CPU
		k := r.Kernel
		// Alternatives run last and may overwrite retpoline and return
		// sites on purpose (the thunks' own bodies): those sites hold
		// the alternative's bytes.
		inAlt := map[uint64]bool{}
		for _, a := range r.Booted.Tables.Alternatives {
			if r.Booted.CPU.Has(a.Feature()) != a.Inv() {
				for i := uint64(0); i < uint64(a.InstrLen); i++ {
					inAlt[a.Instr+i] = true
				}
			}
		}
		var overwritten int
		thunks := symAddr(t, k, "__x86_indirect_thunk_array")
		for _, s := range r.Booted.Tables.Retpolines {
			if inAlt[s] {
				overwritten++
				continue
			}
			orig, err := x86.DecodeKernel(nil, asBuilt.Text(s, 15))
			if err != nil {
				t.Fatal(err)
			}
			reg := int((orig.Target(s) - thunks) / 32)
			got := k.Text(s, orig.Len)
			if r.Booted.CPU.SpectreV2Mode() == "retpoline" {
				if !bytes.Equal(got, asBuilt.Text(s, orig.Len)) {
					t.Fatalf("retpoline site %#x changed under spectre_v2=retpoline: % x", s, got)
				}
				continue
			}
			var want []byte
			if reg >= 8 {
				want = append(want, 0x41)
			}
			modrm := byte(0xd0)
			if orig.Opcode[0] == 0xe9 {
				modrm = 0xe0
			}
			want = append(want, 0xff, modrm+byte(reg&7))
			if !bytes.HasPrefix(got, want) {
				t.Fatalf("retpoline site %#x (reg %d): % x, want % x...", s, reg, got, want)
			}
			if _, ok := walk(k, s, orig.Len); !ok {
				t.Fatalf("retpoline site %#x: % x does not decode to %d bytes", s, got, orig.Len)
			}
		}
		thunk := symAddr(t, k, "__x86_return_thunk")
		want := symAddr(t, k, r.Booted.CPU.ReturnThunk)
		for _, s := range r.Booted.Tables.Returns {
			if inAlt[s] {
				overwritten++
				continue
			}
			if bytes.Equal(k.Text(s+5, 3), []byte{0x0f, 0xb9, 0xcc}) {
				continue // a static-call trampoline: __static_call_fixup's
			}
			in, err := x86.DecodeKernel(nil, k.Text(s, 15))
			if err != nil {
				t.Fatal(err)
			}
			if in.Opcode[0] == 0xe9 && in.Target(s) == thunk && want != thunk {
				t.Fatalf("return site %#x still jumps to __x86_return_thunk", s)
			}
			switch {
			case r.Booted.CPU.WantsRethunk():
				if in.Opcode[0] != 0xe9 || in.Target(s) != want {
					t.Fatalf("return site %#x: % x, want jmp %s", s, k.Text(s, 5), r.Booted.CPU.ReturnThunk)
				}
			default:
				if !bytes.Equal(k.Text(s, 5), []byte{0xc3, 0xcc, 0xcc, 0xcc, 0xcc}) {
					t.Fatalf("return site %#x: % x, want ret; int3 x4", s, k.Text(s, 5))
				}
			}
		}
		t.Logf("%s: %d retpoline and %d return sites, %d overwritten by a later alternative", name, len(r.Booted.Tables.Retpolines), len(r.Booted.Tables.Returns), overwritten)
	})
}
