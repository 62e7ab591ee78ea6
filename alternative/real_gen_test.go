package alternative_test

import (
	"bytes"
	"debug/elf"
	"os"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/realkernel"
	"github.com/kpsim/kpsim/x86"
)

// elfImage is a -dbg vmlinux read straight from its ELF (symbols from
// .symtab, tables from their sections, memory from PT_LOAD), so that the
// boot patching of a generation can be checked even where the image
// loader does not take that generation's other tables yet.
type elfImage struct {
	data  []byte
	progs []*elf.Prog
	syms  map[string]uint64
	funcs []elf.Symbol // STT_FUNC with a size, in [_text, _etext)
	secs  map[string]*elf.Section
}

func (m *elfImage) Text(addr uint64, n int) []byte {
	for _, p := range m.progs {
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := p.Off + (addr - p.Vaddr)
			end := min(p.Off+p.Filesz, off+uint64(n))
			return m.data[off:end:end]
		}
	}
	return nil
}

func (m *elfImage) lookup(n string) (uint64, bool) { a, ok := m.syms[n]; return a, ok }

func (m *elfImage) section(t testing.TB, name string) (uint64, []byte) {
	s := m.secs[name]
	if s == nil {
		return 0, nil
	}
	b := m.Text(s.Addr, int(s.Size))
	if len(b) != int(s.Size) {
		t.Fatalf("section %s not in PT_LOAD", name)
	}
	return s.Addr, b
}

var (
	elfMu    sync.Mutex
	elfBytes = map[image.Generation][]byte{}
)

// openELF returns a fresh copy of generation g's -dbg vmlinux (the file
// is read once per test binary).
func openELF(t testing.TB, g image.Generation) *elfImage {
	p := realkernel.FindDbg(t, g)
	elfMu.Lock()
	b, ok := elfBytes[g]
	if !ok {
		var err error
		if b, err = os.ReadFile(p.Vmlinux); err != nil {
			elfMu.Unlock()
			t.Fatal(err)
		}
		elfBytes[g] = b
	}
	elfMu.Unlock()
	m := &elfImage{data: bytes.Clone(b), syms: map[string]uint64{}, secs: map[string]*elf.Section{}}
	f, err := elf.NewFile(bytes.NewReader(m.data))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			m.progs = append(m.progs, p)
		}
	}
	for _, s := range f.Sections {
		m.secs[s.Name] = s
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if _, ok := m.syms[s.Name]; !ok && s.Name != "" {
			m.syms[s.Name] = s.Value
		}
	}
	ts, te := m.syms["_text"], m.syms["_etext"]
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value >= ts && s.Value < te {
			m.funcs = append(m.funcs, s)
		}
	}
	return m
}

// tables reads the site tables of a 6.12 / 7.3 vmlinux by section.
func (m *elfImage) tables(t testing.TB, mod *alternative.Model) *alternative.Tables {
	tb := &alternative.Tables{}
	var err error
	for _, s := range []struct {
		name string
		dst  *[]uint64
	}{
		{".retpoline_sites", &tb.Retpolines}, {".return_sites", &tb.Returns},
		{".call_sites", &tb.CallSites}, {".ibt_endbr_seal", &tb.EndbrSeal},
	} {
		base, b := m.section(t, s.name)
		if *s.dst, err = alternative.ParseSites(s.name, b, base); err != nil {
			t.Fatal(err)
		}
	}
	base, b := m.section(t, ".altinstructions")
	if tb.Alternatives, err = mod.ParseAlt(b, base); err != nil {
		t.Fatal(err)
	}
	return tb
}

// bootELF boots generation g's -dbg vmlinux for cpu, recording sites.
func bootELF(t testing.TB, g image.Generation, cpu *alternative.CPU) (*elfImage, *alternative.Tables, *alternative.Patcher) {
	m := openELF(t, g)
	mod := alternative.ModelFor(g)
	c, err := cpu.ForGen(g)
	if err != nil {
		t.Fatal(err)
	}
	env, err := mod.NewEnv(m.lookup, nil, m, c)
	if err != nil {
		t.Fatal(err)
	}
	tb := m.tables(t, mod)
	p := &alternative.Patcher{Model: mod, CPU: c, Env: env, Mem: m, Record: true}
	if err := p.AlternativeInstructions(tb); err != nil {
		t.Fatal(err)
	}
	return m, tb, p
}

// stuffCPU is Sapphire Rapids' bits with retbleed=stuff's outcome
// forced (spectre_v2=retpoline + call depth tracking): no preset has
// X86_FEATURE_CALL_DEPTH on the default command line, so this exercises
// callthunks_patch_builtin_calls and the call-depth retpolines.
func stuffCPU(t testing.TB, g image.Generation) *alternative.CPU {
	c, err := alternative.LookupCPU("sapphire-rapids")
	if err != nil {
		t.Fatal(err)
	}
	c, err = c.ForGen(g)
	if err != nil {
		t.Fatal(err)
	}
	m := alternative.ModelFor(g)
	for _, n := range []string{"RETPOLINE", "CALL_DEPTH", "RETHUNK"} {
		f, _ := m.FeatureByName(n)
		c.Features.Set(f)
	}
	c.Name, c.ReturnThunk = "stuff", "call_depth_return_thunk"
	return c
}

// TestRealGenBoot: the 6.12 and 7.3 -dbg vmlinux boot for every preset,
// this machine's CPU and a call-depth-tracking CPU; every site table is
// fully handled (no skipped, unfit or undecodable site; every sealed
// ENDBR was one; every alternative site decodes to whole instructions),
// and the statistics are logged.
func TestRealGenBoot(t *testing.T) {
	if testing.Short() {
		t.Skip("boots the real 6.12 and 7.3 kernels")
	}
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		t.Run(g.String(), func(t *testing.T) {
			cpus := map[string]func() *alternative.CPU{}
			for _, n := range alternative.CPUNames() {
				cpus[n] = func() *alternative.CPU { c, _ := alternative.LookupCPU(n); return c }
			}
			if _, err := os.Stat(alternative.CPUInfoPath); err == nil {
				cpus["host"] = func() *alternative.CPU {
					c, err := alternative.LookupCPU(alternative.CPUHost)
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
			}
			cpus["stuff"] = func() *alternative.CPU { return stuffCPU(t, g) }
			for _, n := range append(append(alternative.CPUNames(), "host"), "stuff") {
				mk, ok := cpus[n]
				if !ok {
					continue
				}
				t.Run(n, func(t *testing.T) {
					m, tb, p := bootELF(t, g, mk())
					s := &p.Stats
					t.Logf("%s: %s", g, p.CPU.Summary())
					t.Logf("retpolines %+v", s.Retpolines)
					t.Logf("returns %+v", s.Returns)
					t.Logf("alternatives %+v", s.Alternatives)
					t.Logf("call thunks %+v", s.CallThunks)
					t.Logf("seal %+v", s.Seal)
					if s.Retpolines.Skipped+s.Retpolines.Unfit+s.Returns.Skipped+s.Alternatives.Undecodable+s.Seal.NotEndbr > 0 {
						t.Errorf("sites left alone: retpolines %+v returns %+v alternatives %+v seal %+v", s.Retpolines, s.Returns, s.Alternatives, s.Seal)
					}
					if s.Seal.Poisoned != len(tb.EndbrSeal) || s.Retpolines.Sites != len(tb.Retpolines) || s.Returns.Sites != len(tb.Returns) || s.Alternatives.Sites != len(tb.Alternatives) {
						t.Errorf("not every table entry visited")
					}
					if s.Alternatives.DirectCall == 0 || s.Alternatives.DirectNop == 0 {
						t.Errorf("no paravirt calls patched through ALT_FLAG_DIRECT_CALL: %+v", s.Alternatives)
					}
					if c := p.CPU; c.Has(mustBit(t, g, "CALL_DEPTH")) {
						if s.CallThunks.Patched == 0 || s.CallThunks.Pads == 0 || s.Retpolines.Depth != s.Retpolines.Sites {
							t.Errorf("call depth tracking did nothing: %+v, retpolines %+v", s.CallThunks, s.Retpolines)
						}
					} else if s.CallThunks.Patched != 0 {
						t.Errorf("call thunks without CALL_DEPTH")
					}
					// Every alternative site (the consecutive entries at
					// one address, as long as the longest) decodes to
					// whole instructions.
					site := map[uint64]int{}
					for _, a := range tb.Alternatives {
						site[a.Instr] = max(site[a.Instr], int(a.InstrLen))
					}
					for addr, n := range site {
						if !walks(m, addr, n) {
							t.Fatalf("alternative site %#x: % x does not decode to its %d bytes", addr, m.Text(addr, n), n)
						}
					}
					// No paravirt call through pv_ops is left where the
					// CPU is bare metal (ALT_NOT(XENPV) / ALT_CALL_ALWAYS).
					pv := m.syms["pv_ops"]
					left := 0
					for _, a := range tb.Alternatives {
						if !a.DirectCall() {
							continue
						}
						b := m.Text(a.Instr, 6)
						if b[0] == 0xff && b[1] == 0x15 {
							d := int32(uint32(b[2]) | uint32(b[3])<<8 | uint32(b[4])<<16 | uint32(b[5])<<24)
							if slot := a.Instr + 6 + uint64(int64(d)); slot >= pv && slot < pv+0x400 {
								left++
							}
						}
					}
					if left > 0 {
						t.Errorf("%d pv_ops indirect calls left", left)
					}
				})
			}
		})
	}
}

func mustBit(t testing.TB, g image.Generation, n string) alternative.Feature {
	f, ok := alternative.ModelFor(g).FeatureByName(n)
	if !ok {
		t.Fatalf("%s has no %s", g, n)
	}
	return f
}

func walks(m *elfImage, addr uint64, n int) bool {
	for off := 0; off < n; {
		in, err := x86.DecodeKernel(nil, m.Text(addr+uint64(off), 15))
		if err != nil {
			return false
		}
		off += in.Len
		if off > n {
			return false
		}
	}
	return true
}
