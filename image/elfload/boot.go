package elfload

import (
	"fmt"
	"strings"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/kconfig"

	"github.com/kpsim/kpsim/alternative"
)

// Options choose how Load builds the image.
type Options struct {
	// CPU, when not nil, boot-patches the text for that CPU as
	// alternative_instructions does (package alternative). Nil keeps the
	// text as built.
	CPU *alternative.CPU
	// Owned says data belongs to the loader: patch it in place instead of
	// in a copy.
	Owned bool
	// Record keeps every patched site's before/after bytes in
	// Booted.Sites (tests, kpsim image --boot-sites).
	Record bool
	// Gen, when set, is the generation to load the image as
	// (--kernel-version); otherwise the release in linux_banner decides,
	// and an image without one, or of a release kpsim does not model, is
	// refused.
	Gen image.Generation
	// KConfig is the kernel's config file (the config-KVER beside the
	// image; image/load finds it); nil when there is none. An embedded
	// CONFIG_IKCONFIG copy outranks it.
	KConfig *kconfig.Config
	// KConfigOverride holds --kconfig's options; they outrank both.
	KConfigOverride *kconfig.Config
}

// Booted is what boot patching did to a loaded image (nil when the text is
// as built).
type Booted struct {
	// CPU is the CPU as the image's generation numbers it (CPU.ForGen of
	// Options.CPU); Model the generation's boot patching.
	CPU    *alternative.CPU
	Model  *alternative.Model
	Tables alternative.Tables
	Stats  alternative.Stats
	Sites  []alternative.Site
}

type bootBound struct{ name, start, end, section string }

// Table bounds alternative_instructions reads
// (arch/x86/kernel/vmlinux.lds.S, 6.1).
var bootBounds = []bootBound{
	{".parainstructions", "__parainstructions", "__parainstructions_end", ".parainstructions"},
	{".retpoline_sites", "__retpoline_sites", "__retpoline_sites_end", ".retpoline_sites"},
	{".return_sites", "__return_sites", "__return_sites_end", ".return_sites"},
	{".altinstructions", "__alt_instructions", "__alt_instructions_end", ".altinstructions"},
}

// bootBounds612 are 6.12's and 7.3's: no .parainstructions (pv calls are
// alternatives), and the call-thunk and ENDBR-seal site lists
// (arch/x86/kernel/vmlinux.lds.S).
var bootBounds612 = []bootBound{
	{".retpoline_sites", "__retpoline_sites", "__retpoline_sites_end", ".retpoline_sites"},
	{".return_sites", "__return_sites", "__return_sites_end", ".return_sites"},
	{".call_sites", "__call_sites", "__call_sites_end", ".call_sites"},
	{".ibt_endbr_seal", "__ibt_endbr_seal", "__ibt_endbr_seal_end", ".ibt_endbr_seal"},
	{".altinstructions", "__alt_instructions", "__alt_instructions_end", ".altinstructions"},
}

// bootBoundsByGen chooses the table list once per generation.
var bootBoundsByGen = map[image.Generation][]bootBound{
	image.Gen61: bootBounds, image.Gen612: bootBounds612, image.Gen73: bootBounds612,
}

// bootTable returns the bytes and base address of one site table: by its
// bound symbols, else by its section header; ok false when absent.
func (l *loader) bootTable(start, end, section string) (uint64, []byte, bool, error) {
	if _, has := l.sym(start); has {
		base, b, ok, err := l.span(start, end)
		return base, b, ok, err
	}
	sec := l.f.Section(section)
	if sec == nil || sec.Size == 0 {
		return 0, nil, false, nil
	}
	b, ok := l.read(sec.Addr, sec.Size)
	if !ok {
		return 0, nil, false, fmt.Errorf("section %s [%#x, +%#x) is not in the file's PT_LOAD segments", section, sec.Addr, sec.Size)
	}
	return sec.Addr, b, true, nil
}

// pvOps reads pv_ops (struct paravirt_patch_template) from .data: one
// pointer per slot, as many slots as the symbol's size holds.
func (l *loader) pvOps() ([]uint64, error) {
	a, ok := l.sym("pv_ops")
	if !ok {
		return nil, nil
	}
	var size uint64
	for _, s := range l.k.Symbols {
		if s.Name == "pv_ops" {
			size = s.Size
			break
		}
	}
	if size == 0 || size%8 != 0 || size > 8*256 {
		return nil, fmt.Errorf("pv_ops at %#x: size %d is not a table of pointers", a, size)
	}
	b, ok := l.read(a, size)
	if !ok {
		return nil, fmt.Errorf("pv_ops [%#x, +%d) is not in the file's PT_LOAD segments", a, size)
	}
	out := make([]uint64, size/8)
	for i := range out {
		out[i] = le.Uint64(b[8*i:])
	}
	return out, nil
}

// Text implements alternative.Memory over the file's PT_LOAD data (a
// private copy when patching).
func (l *loader) Text(addr uint64, n int) []byte {
	for _, p := range l.progs {
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := p.Off + (addr - p.Vaddr)
			end := min(p.Off+p.Filesz, off+uint64(n))
			return l.data[off:end:end]
		}
	}
	return nil
}

// boot applies alternative_instructions for o.CPU to the loaded text, as
// the image's generation (k.Config.Gen) does it.
//
// Models arch/x86/kernel/alternative.c:alternative_instructions (called
// from arch_cpu_finalize_init, after cpu_select_mitigations); package
// alternative's Model holds what differs per generation.
func (l *loader) boot(o Options) (*Booted, error) {
	gen := l.k.Config.Gen.Effective()
	m := alternative.ModelFor(gen)
	cpu, err := o.CPU.ForGen(gen)
	if err != nil {
		return nil, fmt.Errorf("boot patching for %s: %w", o.CPU.Name, err)
	}
	pv, err := l.pvOps()
	if err != nil {
		return nil, err
	}
	env, err := m.NewEnv(l.sym, pv, l, cpu)
	if err != nil {
		return nil, fmt.Errorf("boot patching for %s: %w", cpu.Name, err)
	}
	bt := &Booted{CPU: cpu, Model: m}
	t := &bt.Tables
	for _, tb := range bootBoundsByGen[gen] {
		base, b, ok, err := l.bootTable(tb.start, tb.end, tb.section)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		switch tb.name {
		case ".parainstructions":
			t.Para, err = alternative.ParseParaInstructions(b)
		case ".retpoline_sites":
			t.Retpolines, err = alternative.ParseSites(tb.name, b, base)
		case ".return_sites":
			t.Returns, err = alternative.ParseSites(tb.name, b, base)
		case ".call_sites":
			t.CallSites, err = alternative.ParseSites(tb.name, b, base)
		case ".ibt_endbr_seal":
			t.EndbrSeal, err = alternative.ParseSites(tb.name, b, base)
		case ".altinstructions":
			t.Alternatives, err = m.ParseAlt(b, base)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(t.Para) > 0 && pv == nil {
		return nil, fmt.Errorf("boot patching: %d .parainstructions sites but no pv_ops symbol", len(t.Para))
	}
	p := &alternative.Patcher{Model: m, CPU: cpu, Env: env, Mem: l, Record: o.Record}
	if err := p.AlternativeInstructions(t); err != nil {
		return nil, fmt.Errorf("boot patching for %s: %w", cpu.Name, err)
	}
	bt.Stats, bt.Sites = p.Stats, p.Sites
	k := l.k
	k.PVOps = pv
	k.Config.CPU = cpu.Name
	k.Config.ReturnsPatched = p.Stats.Returns.Ret > 0 && p.Stats.Returns.Thunk == 0
	k.Notes = append(k.Notes, "boot CPU "+cpu.Summary())
	k.Notes = append(k.Notes, bootNotes(m, cpu, &p.Stats)...)
	return bt, nil
}

// bootNotes says what boot patching did, table by table, for the tables
// the generation has.
func bootNotes(m *alternative.Model, cpu *alternative.CPU, s *alternative.Stats) []string {
	var parts []string
	if m.Paravirt {
		parts = append(parts, fmt.Sprintf("paravirt %d sites (%d direct calls, %d nops, %d paravirt_BUG)",
			s.Paravirt.Sites, s.Paravirt.Direct, s.Paravirt.Nop, s.Paravirt.BUG))
	}
	parts = append(parts,
		fmt.Sprintf("retpolines %d (%d call/jmp *%%reg, %d lfence, %d ITS thunk, %d kept, %d unfit, %d skipped)",
			s.Retpolines.Sites, s.Retpolines.Indirect, s.Retpolines.Lfence, s.Retpolines.ITS, s.Retpolines.Kept, s.Retpolines.Unfit, s.Retpolines.Skipped)+
			map[bool]string{true: fmt.Sprintf(" + %d call-depth thunk calls", s.Retpolines.Depth)}[s.Retpolines.Depth > 0],
		fmt.Sprintf("returns %d (%d ret, %d jmp %s, %d static-call trampolines, %d skipped)",
			s.Returns.Sites, s.Returns.Ret, s.Returns.Thunk, cpu.ReturnThunk, s.Returns.Tramp, s.Returns.Skipped))
	if m.Paravirt {
		parts = append(parts, fmt.Sprintf("alternatives %d (%d replaced, %d calls re-based, %d jmps shortened, %d kept near, %d NOP runs optimized, %d undecodable walks)",
			s.Alternatives.Sites, s.Alternatives.Replaced, s.Alternatives.CallFixed, s.Alternatives.JmpShort, s.Alternatives.JmpNear, s.Alternatives.NopRuns, s.Alternatives.Undecodable))
	} else {
		parts = append(parts, fmt.Sprintf("alternatives %d (%d replaced, of which %d pv direct calls and %d pv calls to nop_func; %d fields relocated, %d NOP runs optimized, %d undecodable walks)",
			s.Alternatives.Sites, s.Alternatives.Replaced, s.Alternatives.DirectCall, s.Alternatives.DirectNop, s.Alternatives.Relocs, s.Alternatives.NopRuns, s.Alternatives.Undecodable))
	}
	if m.CallThunks {
		if s.CallThunks.Sites+s.CallThunks.AltSites == 0 {
			parts = append(parts, "call thunks: none (no X86_FEATURE_CALL_DEPTH)")
		} else {
			parts = append(parts, fmt.Sprintf("call thunks %d call sites + %d alternative sites (%d calls re-aimed at %d accounting pads, %d not calls, %d skipped, %d bad padding)",
				s.CallThunks.Sites, s.CallThunks.AltSites, s.CallThunks.Patched, s.CallThunks.Pads, s.CallThunks.NotCall, s.CallThunks.Skipped, s.CallThunks.BadPad))
		}
	}
	if m.Sealing {
		parts = append(parts, fmt.Sprintf("ENDBR sealing %d (%d poisoned, %d not ENDBR)", s.Seal.Sites, s.Seal.Poisoned, s.Seal.NotEndbr))
	}
	first := "boot patching (alternative_instructions): " + strings.Join(parts, "; ")
	if !m.Paravirt {
		first = fmt.Sprintf("boot patching (alternative_instructions, %s): ", m.Gen) + strings.Join(parts, "; ")
	}
	notes := []string{first}
	if len(cpu.Dropped) > 0 {
		notes = append(notes, fmt.Sprintf("CPU %s: %d bits %s's cpufeatures.h does not have: %s", cpu.Name, len(cpu.Dropped), m.Gen, strings.Join(cpu.Dropped, ", ")))
	}
	boundaries := "boot patching changes instruction boundaries at paravirt direct calls, alternatives, optimize_nops padding, retpolines (unless kept) and returns patched to ret; "
	if !m.Paravirt {
		boundaries = "boot patching changes instruction boundaries at alternatives (pv direct calls included), optimize_nops padding, retpolines (unless kept), returns patched to ret and call-thunk padding; ENDBR sealing keeps them; "
	}
	return append(notes, boundaries+m.NotModelled)
}
