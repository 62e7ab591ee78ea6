package module

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/elfload"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/x86"
)

// bootedKernel returns the pinned -dbg vmlinux of generation g booted
// for cpu (elfload) and its package; the text regions are copied out of
// the file, which is dropped unless keep is set (then it is returned,
// patched as booted).
func bootedKernel(t *testing.T, g image.Generation, cpu *alternative.CPU, keep bool) (*image.Kernel, realkernel.Pkg, []byte) {
	t.Helper()
	p := realkernel.FindDbg(t, g)
	if _, err := os.Stat(p.Modules); err != nil {
		t.Skipf("no %s module tree", g)
	}
	b, err := os.ReadFile(p.Vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := elfload.LoadWith(p.Vmlinux, b, elfload.Options{CPU: cpu, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Regions {
		r.Bytes = bytes.Clone(r.Bytes)
	}
	if !keep {
		b = nil
	}
	return k, p, b
}

// finalizeCPUs are the CPUs the generation tests boot: the default and,
// when /proc/cpuinfo is readable, this machine's.
func finalizeCPUs(t *testing.T) []*alternative.CPU {
	var out []*alternative.CPU
	for _, n := range []string{alternative.DefaultCPU, alternative.CPUHost} {
		if n == alternative.CPUHost {
			if _, err := os.Stat(alternative.CPUInfoPath); err != nil {
				continue
			}
		}
		c, err := alternative.LookupCPU(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// TestGenModuleFinalize loads kvm, kvm_intel, xfs and ext4 (and their
// dependencies) into the 6.12 and 7.3 -dbg vmlinux booted for the
// default CPU and this machine's, and checks module_finalize: every
// table entry is visited and none is skipped or left unfit; every
// .ibt_endbr_seal entry was an ENDBR and is poisoned; no pv_ops indirect
// call is left at an ALT_FLAG_DIRECT_CALL site; the retpoline and return
// sites end as the CPU's mitigations want (checkThunkCalls); and the
// module's core text walks instruction by instruction with the kernel
// decoder over every function, every patched site starting an
// instruction (checkWalk).
func TestGenModuleFinalize(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			for _, c := range finalizeCPUs(t) {
				t.Run(c.Name, func(t *testing.T) {
					k, p, _ := bootedKernel(t, g, c, false)
					l := NewLoader(k, Options{Dir: p.Modules, RecordSites: true})
					for _, name := range genModules {
						if _, err := l.Load(name); err != nil {
							t.Fatal(err)
						}
					}
					cpu := l.cpu
					t.Logf("%s", cpu.Summary())
					for _, m := range l.Loaded() {
						checkFinalized(t, l, m)
					}
					t.Logf("all: %s", FinalizeLine(cpu.Model(), cpu.Name, ptr(SumPatch(l.Loaded()))))
				})
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// finalizeTablesOf reads m's module_finalize tables back from its
// sections (the init ones are freed: only core-text entries are kept).
func finalizeTablesOf(t *testing.T, l *Loader, m *Loaded) *alternative.Tables {
	t.Helper()
	tb := &alternative.Tables{}
	read := func(name string) ([]byte, uint64) {
		s, ok := m.Section(name)
		if !ok {
			return nil, 0
		}
		return m.mem.at(s.Addr, int(s.Size)), s.Addr
	}
	var err error
	for name, dst := range map[string]*[]uint64{".retpoline_sites": &tb.Retpolines, ".return_sites": &tb.Returns,
		".call_sites": &tb.CallSites, ".ibt_endbr_seal": &tb.EndbrSeal} {
		b, at := read(name)
		if *dst, err = alternative.ParseSites(name, b, at); err != nil {
			t.Fatal(err)
		}
	}
	b, at := read(".altinstructions")
	if tb.Alternatives, err = l.cpu.Model().ParseAlt(b, at); err != nil {
		t.Fatal(err)
	}
	return tb
}

// checkFinalized checks one module's module_finalize and logs what it did.
func checkFinalized(t *testing.T, l *Loader, m *Loaded) {
	t.Helper()
	name := m.Module.Name
	tb := finalizeTablesOf(t, l, m)
	s := &m.Patch
	var kinds []string
	for _, c := range m.Sites {
		kinds = append(kinds, fmt.Sprintf("%s %s %d", c.Kind, c.Action, c.N))
	}
	t.Logf("%s: tables retpolines %d returns %d alternatives %d call sites %d endbr seal %d; sites: %s",
		name, len(tb.Retpolines), len(tb.Returns), len(tb.Alternatives), len(tb.CallSites), len(tb.EndbrSeal), strings.Join(kinds, ", "))
	if s.Retpolines.Sites != len(tb.Retpolines) || s.Returns.Sites != len(tb.Returns) || s.Alternatives.Sites != len(tb.Alternatives) || s.Seal.Sites != len(tb.EndbrSeal) {
		t.Errorf("%s: not every table entry visited: %+v", name, *s)
	}
	if s.Retpolines.Skipped+s.Retpolines.Unfit+s.Returns.Skipped+s.Alternatives.Undecodable+s.Seal.NotEndbr > 0 {
		t.Errorf("%s: sites left alone: retpolines %+v returns %+v alternatives %+v seal %+v", name, s.Retpolines, s.Returns, s.Alternatives, s.Seal)
	}
	if s.Seal.Poisoned != len(tb.EndbrSeal) {
		t.Errorf("%s: %d of %d ENDBRs poisoned", name, s.Seal.Poisoned, len(tb.EndbrSeal))
	}
	// callthunks_patch_module_calls runs only with call depth tracking,
	// over .call_sites and (6.12) the alternative sites.
	cpu := l.cpu
	wantSites, wantAlt := 0, 0
	if cpu.Has(mustFeature(t, cpu, "CALL_DEPTH")) {
		wantSites = len(tb.CallSites)
		if cpu.Model().Gen == image.Gen612 {
			wantAlt = len(tb.Alternatives)
		}
	}
	if c := s.CallThunks; c.Sites != wantSites || c.AltSites != wantAlt || (wantSites == 0 && c.Patched+c.Pads > 0) {
		t.Errorf("%s: call thunks %+v, want %d call sites and %d alternative sites visited", name, c, wantSites, wantAlt)
	}
	// Bare metal (or a non-Xen guest): every pv call is a direct call or
	// a NOP; none is left as "call *pv_ops+N(%rip)".
	pv := l.vmlinux["pv_ops"]
	xenpv := cpu.Has(mustFeature(t, cpu, "XENPV"))
	for _, a := range tb.Alternatives {
		if xenpv || !a.DirectCall() || !m.Module.Text.Contains(a.Instr) {
			continue
		}
		if b := m.mem.at(a.Instr, 6); b[0] == 0xff && b[1] == 0x15 {
			if slot := a.Instr + 6 + uint64(int64(int32(le32u(b[2:])))); slot >= pv && slot < pv+8*uint64(len(l.k.PVOps)) {
				t.Errorf("%s: pv_ops call left at %#x", name, a.Instr)
			}
		}
	}
	if n := s.Alternatives.DirectCall + s.Alternatives.DirectNop; n == 0 && name != "crc16" && name != "libcrc32c" && name != "mbcache" && name != "irqbypass" {
		t.Logf("%s: no pv direct call patched", name)
	}
	checkThunkCalls(t, l, m)
	checkWalk(t, l, m)
}

func le32u(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func mustFeature(t *testing.T, c *alternative.CPU, n string) alternative.Feature {
	f, ok := c.Model().FeatureByName(n)
	if !ok {
		t.Fatalf("%s has no %s", c.Model().Gen, n)
	}
	return f
}

// moduleFunctions are m's core-text functions with a size (kallsyms'
// core symbols carry the ELF st_size), in address order.
func moduleFunctions(m *Loaded) []image.Symbol {
	var out []image.Symbol
	for _, s := range m.Module.Symbols {
		if s.IsText() && !s.IsPadding() && s.Size > 0 && m.Module.Text.Contains(s.Addr) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b image.Symbol) int {
		if a.Addr != b.Addr {
			return cmpU64(a.Addr, b.Addr)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkWalk decodes m's core text (every allocated section of MOD_TEXT:
// .text, .text.unlikely, .static_call.text, .altinstr_replacement, ...)
// linearly from each section's start with the kernel decoder
// (x86.DecodeKernel), the way the text runs after module_finalize:
// every decode must succeed, every sized function must start and end on
// an instruction boundary, and so must every site module_finalize
// visited. Exceptions are reported with their reason.
func checkWalk(t *testing.T, l *Loader, m *Loaded) {
	t.Helper()
	name := m.Module.Name
	text := m.Module.Text
	starts := map[uint64]bool{}
	insns := 0
	var bad []string
	var secs []string
	for _, sec := range m.Sections {
		if sec.Block != ModText.String() || sec.Size == 0 || !text.Contains(sec.Addr) {
			continue
		}
		secs = append(secs, sec.Name)
		end := sec.Addr + sec.Size
		for a := sec.Addr; a < end; {
			var w [15]byte
			copy(w[:], m.mem.at(a, min(15, int(end-a))))
			in, err := x86.DecodeKernel(nil, w[:])
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s+%#x: % x: %v", sec.Name, a-sec.Addr, w, err))
				break
			}
			starts[a] = true
			insns++
			a += uint64(in.Len)
			if a > end {
				bad = append(bad, fmt.Sprintf("%s: the last instruction runs %d bytes past the section", sec.Name, a-end))
			}
		}
		starts[end] = true
	}
	fns := moduleFunctions(m)
	for _, f := range fns {
		if !starts[f.Addr] || !starts[f.Addr+f.Size] {
			bad = append(bad, fmt.Sprintf("%s [%#x, +%#x): start %v, end %v on an instruction boundary", f.Name, f.Addr, f.Size, starts[f.Addr], starts[f.Addr+f.Size]))
		}
	}
	sites, inFns := 0, 0
	for _, s := range m.PatchedSites {
		if !text.Contains(s.Addr) {
			continue
		}
		sites++
		if !starts[s.Addr] {
			bad = append(bad, fmt.Sprintf("%s site %#x (%s) is not an instruction boundary", s.Kind, s.Addr, s.Action))
		}
		if slices.ContainsFunc(fns, func(f image.Symbol) bool { return s.Addr >= f.Addr && s.Addr < f.Addr+f.Size }) {
			inFns++
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %d exceptions: %s", name, len(bad), strings.Join(bad[:min(len(bad), 10)], "; "))
	}
	t.Logf("%s: MOD_TEXT sections %v walk cleanly (%d instructions); %d sized functions start and end on boundaries; %d visited core-text sites on boundaries (%d inside a sized function, the rest in code without a sized symbol)",
		name, secs, insns, len(fns), sites, inFns)
}

// checkThunkCalls walks m's core text and checks the thunk branches left
// against the CPU: a retpoline mode that keeps the thunk calls keeps them
// all (and no other mode leaves one), and no "jmp __x86_return_thunk"
// survives apply_returns (returns are "ret" or "jmp x86_return_thunk").
func checkThunkCalls(t *testing.T, l *Loader, m *Loaded) {
	t.Helper()
	thunks := l.vmlinux["__x86_indirect_thunk_array"]
	ret := l.vmlinux["__x86_return_thunk"]
	var toThunk, toRet int
	for _, f := range moduleFunctions(m) {
		for a := f.Addr; a < f.Addr+f.Size; {
			var w [15]byte
			copy(w[:], m.mem.at(a, min(15, int(f.Addr+f.Size-a))))
			in, err := x86.DecodeKernel(nil, w[:])
			if err != nil {
				break
			}
			if op := in.Opcode[0]; op == 0xe8 || op == 0xe9 || op == 0x0f && in.Opcode[1]&0xf0 == 0x80 {
				switch tgt := in.Target(a); {
				case tgt >= thunks && tgt < thunks+16*alternative.RetpolineThunkSize:
					toThunk++
				case tgt == ret:
					toRet++
				}
			}
			a += uint64(in.Len)
		}
	}
	keep := l.cpu.SpectreV2Mode() == "retpoline"
	if (toThunk > 0) != keep && !(keep && m.Patch.Retpolines.Sites == 0) {
		t.Errorf("%s: %d branches to __x86_indirect_thunk_* left in core text (%d retpoline sites; spectre_v2 mode %s)", m.Module.Name, toThunk, m.Patch.Retpolines.Sites, l.cpu.SpectreV2Mode())
	}
	if toRet > 0 && !(l.cpu.WantsRethunk() && l.cpu.ReturnThunk == "__x86_return_thunk") {
		t.Errorf("%s: %d jumps to __x86_return_thunk left (CPU returns through %s)", m.Module.Name, toRet, l.cpu.ReturnThunk)
	}
	t.Logf("%s: core text keeps %d branches to retpoline thunks, %d to __x86_return_thunk; returns: %d ret, %d jmp %s",
		m.Module.Name, toThunk, toRet, m.Patch.Returns.Ret, m.Patch.Returns.Thunk, l.cpu.ReturnThunk)
}

// stuffCPU is the default CPU with retbleed=stuff's bits: retpolines
// with call depth tracking (callthunks_patch_*_calls) and a return thunk.
func stuffCPU(t *testing.T, g image.Generation) *alternative.CPU {
	c, err := alternative.LookupCPU(alternative.DefaultCPU)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = c.ForGen(g); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"RETPOLINE", "CALL_DEPTH", "RETHUNK"} {
		c.Features.Set(mustFeature(t, c, n))
	}
	c.Name, c.ReturnThunk = "stuff", "call_depth_return_thunk"
	return c
}

// fileMem is an alternative.Memory over a vmlinux file's PT_LOAD
// segments (read-only use: the call-thunk template in .rodata).
type fileMem struct {
	f *elf.File
	b []byte
}

func (m fileMem) Text(addr uint64, n int) []byte {
	for _, p := range m.f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := p.Off + addr - p.Vaddr
			return m.b[off:min(off+uint64(n), p.Off+p.Filesz)]
		}
	}
	return nil
}

// TestGenModuleCallThunks: with call depth tracking (a CPU no --cpu
// name gives: retbleed=stuff), module_finalize re-aims the module's
// direct calls in MOD_TEXT at their destination's accounting thunk,
// writing the template into the padding of module functions and of
// vmlinux functions boot left untouched; calls from init text stay. The
// image does not carry skl_call_thunk_template (it is in .rodata), so the
// test gives the loader the Env built from the vmlinux file.
func TestGenModuleCallThunks(t *testing.T) {
	if testing.Short() {
		t.Skip("boots the real 6.12 and 7.3 kernels for a call-depth CPU")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			cpu := stuffCPU(t, g)
			k, p, raw := bootedKernel(t, g, cpu, true)
			f, err := elf.NewFile(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			syms := vmlinuxSymbols(k)
			env, err := cpu.Model().NewEnv(func(n string) (uint64, bool) { a, ok := syms[n]; return a, ok }, k.PVOps, fileMem{f, raw}, cpu)
			if err != nil {
				t.Fatal(err)
			}
			l := NewLoader(k, Options{Dir: p.Modules, RecordSites: true})
			l.env, l.cpu = env, cpu
			for _, name := range genModules {
				if _, err := l.Load(name); err != nil {
					t.Fatal(err)
				}
			}
			tmpl := env.CallThunks.Template
			for _, m := range l.Loaded() {
				checkFinalized(t, l, m)
				ct := m.Patch.CallThunks
				t.Logf("%s: call thunks %+v", m.Module.Name, ct)
				mt := m.Mem[ModText]
				for _, s := range m.PatchedSites {
					if s.Kind != alternative.SiteCallThunk {
						continue
					}
					switch s.Action {
					case alternative.CallThunkPatched:
						if s.Addr < mt.Base || s.Addr >= mt.Base+mt.Size {
							t.Errorf("%s: call at %#x outside MOD_TEXT re-aimed", m.Module.Name, s.Addr)
						}
						pad := s.Addr + 5 + uint64(int64(int32(le32u(s.After[1:]))))
						if b := l.k.Text(pad, len(tmpl)); len(b) != len(tmpl) || b[0] != tmpl[0] || b[len(b)-1] != tmpl[len(tmpl)-1] {
							t.Errorf("%s: call at %#x aimed at %#x: % x, not the accounting template", m.Module.Name, s.Addr, pad, b)
						}
					case alternative.CallThunkPad:
						if len(s.After) != len(tmpl) || !slices.Equal(s.Before, []byte(strings.Repeat("\x90", len(tmpl)))) {
							t.Errorf("%s: pad at %#x: % x -> % x", m.Module.Name, s.Addr, s.Before, s.After)
						}
					}
				}
				if slices.Contains(genModules, m.Module.Name) && (ct.Patched == 0 || ct.Pads == 0) {
					t.Errorf("%s: no call re-aimed", m.Module.Name)
				}
			}
		})
	}
}

// bootedFakeKernel is genFakeKernel as if booted for the default CPU:
// the vmlinux symbols 6.12's and 7.3's KernelEnv needs (nop_func,
// BUG_func, the thunk arrays) are added.
func bootedFakeKernel(t testing.TB, g image.Generation) *image.Kernel {
	k := genFakeKernel(t, g)
	k.Config.CPU = alternative.DefaultCPU
	k.Config.ReturnsPatched = false
	text := k.Regions[0]
	for i, n := range []string{"nop_func", "BUG_func", "__x86_indirect_thunk_array"} {
		k.Symbols = append(k.Symbols, image.Symbol{Name: n, Addr: text.Start + 0x8000 + uint64(i)*0x400, Size: 0x400, Type: 'T'})
	}
	slices.SortStableFunc(k.Symbols, func(a, b image.Symbol) int { return cmpU64(a.Addr, b.Addr) })
	return k
}

// TestFinalizeGenFake: the testdata modules (built for 6.1, with
// .return_sites and .retpoline_sites only) loaded as 6.12 and 7.3
// modules into a kernel booted for the default CPU get apply_returns'
// "ret; int3" and apply_retpolines' "call *%reg", and the note names the
// generation's tables.
func TestFinalizeGenFake(t *testing.T) {
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		k := bootedFakeKernel(t, g)
		l := NewLoader(k, Options{RecordSites: true})
		for _, n := range []string{"crc16.ko", "dummy.ko"} {
			m := mustLoad(t, l, n)
			s := m.Patch
			if s.Returns.Sites == 0 || s.Returns.Ret != s.Returns.Sites || s.Alternatives.Sites != 0 || s.Seal.Sites != 0 {
				t.Errorf("%s %s: %+v", g, n, s)
			}
			for _, ps := range m.PatchedSites {
				if ps.Kind == alternative.SiteReturn && (ps.After[0] != 0xc3 || m.mem.at(ps.Addr, 1)[0] != 0xc3) {
					t.Errorf("%s %s: return site %#x: % x", g, n, ps.Addr, ps.After)
				}
			}
			if len(m.Finalize) != 1 || !strings.Contains(m.Finalize[0], "module_finalize ("+alternative.DefaultCPU+", "+g.String()+")") || !strings.Contains(m.Finalize[0], "ENDBR sealing 0") {
				t.Errorf("%s %s: notes %q", g, n, m.Finalize)
			}
			if len(m.Sites) == 0 || m.Sites[0].Kind != alternative.SiteReturn {
				t.Errorf("%s %s: site summary %+v", g, n, m.Sites)
			}
		}
	}
}

// FuzzFinalizeGen: any input loaded as a 6.12 or 7.3 module into a
// kernel booted for the default CPU, with or without call depth
// tracking, loads or fails with one line naming the file; module_finalize
// never panics.
func FuzzFinalizeGen(f *testing.F) {
	for _, n := range []string{"dummy.ko", "crc16.ko", "test_static_keys.ko"} {
		b := readTestdata(f, n)
		f.Add(b, false, false)
		f.Add(b, true, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, g73, depth bool) {
		g := image.Gen612
		if g73 {
			g = image.Gen73
		}
		k := bootedFakeKernel(t, g)
		l := NewLoader(k, Options{})
		l.maxBlock = 4 << 20
		if depth {
			env, cpu, err := alternative.KernelEnv(k)
			if err != nil {
				t.Fatal(err)
			}
			cpu.Features.Set(mustFeature(t, cpu, "CALL_DEPTH"))
			text := k.Regions[0]
			env.CallThunks.Template, env.CallThunks.TemplateAddr = []byte{0x90, 0x90}, text.Start
			l.env, l.cpu = env, cpu
		}
		if _, err := l.LoadFile("fuzz.ko", b); err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.ko: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming fuzz.ko", msg)
			}
		}
	})
}
