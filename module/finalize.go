package module

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/kpsim/kpsim/alternative"
	"github.com/kpsim/kpsim/image"
)

// sites reads a table of s32 self-relative addresses (.return_sites,
// .retpoline_sites, .smp_locks).
func (o *object) sites(mem *Memory, name string) []uint64 {
	at, b, err := o.entries(mem, name, SiteSize)
	if err != nil || b == nil {
		return nil
	}
	out := make([]uint64, 0, len(b)/SiteSize)
	for off := 0; off < len(b); off += SiteSize {
		out = append(out, rel32(b[off:], at+uint64(off)))
	}
	return out
}

// moduleFinalize patches the module's text as x86's module_finalize does,
// for the CPU vmlinux was booted for (k.Config.CPU, the --cpu of the
// image), on the relocated tables and text (package alternative):
//
//   - 6.1: apply_paravirt over .parainstructions, apply_retpolines over
//     .retpoline_sites, apply_returns over .return_sites,
//     apply_alternatives over .altinstructions (12-byte alt_instr). IBT
//     sealing is a no-op (CONFIG_X86_KERNEL_IBT is off in Debian 6.1, no
//     module has .ibt_endbr_seal).
//   - 6.12: apply_retpolines, apply_returns, apply_alternatives (14-byte
//     alt_instr; pv calls are ALT_FLAG_DIRECT_CALL alternatives reading
//     vmlinux's pv_ops), callthunks_patch_module_calls over .call_sites
//     and the alternative sites, apply_seal_endbr over .ibt_endbr_seal.
//   - 7.3: as 6.12, but callthunks_patch_module_calls runs before
//     apply_alternatives and only over .call_sites.
//
// What differs is alternative.Model's (ModelFor(k.Config.Gen): ParseAlt,
// Patcher.ModuleFinalize), and which tables exist is the loader
// generation's (loaderGen.finalizeTables). SMP-lock patching happens only
// on a uniprocessor boot (6.1, 6.12; 7.3 has none). ITS thunks come from
// the static __x86_indirect_its_thunk_array (the per-module
// its_allocate_thunk pages are not modelled: no CPU kpsim names, nor a
// host on the default command line, sends a retpoline site to an ITS
// thunk, and vmlinux's own boot-time ITS pages are not modelled either).
// An image not boot-patched (--cpu none) gets only the return-thunk
// rewrite of apply_returns, when its returns are patched. It returns one
// line per step for the notes.
//
// Models arch/x86/kernel/module.c:module_finalize.
func (l *Loader) moduleFinalize(o *object, lm *Loaded) ([]string, error) {
	if cpu := l.k.Config.CPU; cpu == "" || cpu == alternative.CPUNone {
		if !l.k.Config.ReturnsPatched {
			return nil, nil
		}
		sites := o.sites(lm.mem, ".return_sites")
		n := applyReturns(lm.mem, sites, l.vmlinux["__x86_return_thunk"])
		return []string{fmt.Sprintf("apply_returns: %d of %d return-thunk jumps rewritten to ret; int3", n, len(sites))}, nil
	}
	if l.env == nil {
		env, cpu, err := alternative.KernelEnv(l.k)
		if err != nil {
			return nil, o.errorf("module_finalize: %v", err)
		}
		l.env, l.cpu = env, cpu
	}
	m := l.cpu.Model()
	t, err := l.finalizeTables(o, lm.mem, m)
	if err != nil {
		return nil, err
	}
	if len(t.Para) > 0 && len(l.env.PVOps) == 0 {
		return nil, o.errorf("module_finalize: %d .parainstructions sites but the image has no pv_ops", len(t.Para))
	}
	// The patch functions see the module, vmlinux's pv_ops and the text
	// of vmlinux and of the other modules (finalizeMemory).
	base, size := lm.Mem[ModText].Base, lm.Mem[ModText].Size
	if size == 0 { // 6.1: the core layout's text
		base, size = lm.Core.Base, lm.Core.TextSize
	}
	p := &alternative.Patcher{Model: m, CPU: l.cpu, Env: l.env, Mem: l.finalizeMemory(lm), Record: true,
		Module: &alternative.ModuleText{Name: o.name, Base: base, End: base + size, OtherCore: l.withinModuleCoretext}}
	if err := p.ModuleFinalize(t); err != nil {
		return nil, o.errorf("module_finalize for %s: %v", l.cpu.Name, err)
	}
	lm.Patch = p.Stats
	lm.Sites = l.siteSummary(p.Sites, p.Module)
	if l.opt.RecordSites {
		lm.PatchedSites = p.Sites
	}
	return []string{FinalizeLine(m, l.cpu.Name, &p.Stats)}, nil
}

// finalizeTables reads the generation's module_finalize tables from the
// relocated sections.
func (l *Loader) finalizeTables(o *object, mem *Memory, m *alternative.Model) (*alternative.Tables, error) {
	t := &alternative.Tables{}
	var err error
	for _, name := range l.gen.finalizeTables {
		switch name {
		case ".parainstructions":
			_, b, e := o.entries(mem, name, ParaSiteSize)
			if e != nil {
				return nil, e
			}
			if t.Para, err = alternative.ParseParaInstructions(b); err != nil {
				return nil, o.errorf("%v", err)
			}
		case ".altinstructions":
			at, b, e := o.entries(mem, name, l.gen.altInstrSize)
			if e != nil {
				return nil, e
			}
			if t.Alternatives, err = m.ParseAlt(b, at); err != nil {
				return nil, o.errorf("%v", err)
			}
		default:
			dst := map[string]*[]uint64{".retpoline_sites": &t.Retpolines, ".return_sites": &t.Returns,
				".call_sites": &t.CallSites, ".ibt_endbr_seal": &t.EndbrSeal}[name]
			if dst == nil {
				return nil, o.errorf("module_finalize: no reader for table %s", name)
			}
			at, b, e := o.entries(mem, name, SiteSize)
			if e != nil {
				return nil, e
			}
			if *dst, err = alternative.ParseSites(name, b, at); err != nil {
				return nil, o.errorf("%v", err)
			}
		}
	}
	return t, nil
}

// finalizeMemory is the address space module_finalize's patch functions
// see: the module's blocks, then vmlinux's pv_ops (the slots 6.12's and
// 7.3's alt_replace_call reads, as boot left them: k.PVOps), then the
// text of vmlinux and of the other modules (image.Kernel.Text, aliasing
// it: patch_dest writes call-depth accounting thunks into their padding).
type finalizeMemory struct {
	mod   *Memory
	k     *image.Kernel
	pvAt  uint64
	pvOps []byte
}

func (l *Loader) finalizeMemory(lm *Loaded) *finalizeMemory {
	fm := &finalizeMemory{mod: lm.mem, k: l.k}
	if a, ok := l.vmlinux["pv_ops"]; ok && len(l.k.PVOps) > 0 {
		fm.pvAt = a
		for _, v := range l.k.PVOps {
			fm.pvOps = binary.LittleEndian.AppendUint64(fm.pvOps, v)
		}
	}
	return fm
}

// Text implements alternative.Memory. pv_ops is a copy: nothing writes
// it.
func (m *finalizeMemory) Text(addr uint64, n int) []byte {
	if b := m.mod.Text(addr, n); b != nil {
		return b
	}
	if m.pvOps != nil && addr >= m.pvAt && addr-m.pvAt < uint64(len(m.pvOps)) {
		off := addr - m.pvAt
		end := min(off+uint64(max(n, 0)), uint64(len(m.pvOps)))
		return m.pvOps[off:end:end]
	}
	return m.k.Text(addr, n)
}

// withinModuleCoretext: addr is in the core memory (MOD_TEXT, MOD_DATA,
// MOD_RODATA, MOD_RO_AFTER_INIT; 6.1's core layout) of a module already formed — one this
// loader loaded, or the text of one that was in the image before. The
// module being loaded is still MODULE_STATE_UNFORMED, which
// __module_address skips.
//
// Models arch/x86/kernel/callthunks.c:within_module_coretext.
func (l *Loader) withinModuleCoretext(addr uint64) bool {
	mine := map[*image.Module]bool{}
	for _, lm := range l.loaded {
		mine[lm.Module] = true
		if c := lm.Core; c.Size > 0 && addr >= c.Base && addr-c.Base < c.Size { // 6.1
			return true
		}
		for t, mm := range lm.Mem {
			if !ModMemType(t).IsInit() && mm.Size > 0 && addr >= mm.Base && addr-mm.Base < mm.Size {
				return true
			}
		}
	}
	for _, m := range l.k.Modules {
		if !mine[m] && m.State != image.ModuleComing && m.Text != nil && m.Text.Contains(addr) {
			return true
		}
	}
	return false
}

// applyReturns rewrites "jmp __x86_return_thunk" (e9 rel32) at each site to
// "ret; int3 int3 int3 int3"; anything else is left alone (the kernel
// WARNs and skips it).
//
// Models arch/x86/kernel/alternative.c:apply_returns → patch_return's
// "no return thunk" branch.
func applyReturns(mem *Memory, sites []uint64, thunk uint64) int {
	if thunk == 0 {
		return 0
	}
	n := 0
	for _, a := range sites {
		b := mem.at(a, 5)
		if b == nil || b[0] != 0xe9 || rel32(b[1:], a+1)+4 != thunk {
			continue
		}
		b[0] = 0xc3
		copy(b[1:], []byte{0xcc, 0xcc, 0xcc, 0xcc})
		n++
	}
	return n
}

// nop5 is x86_nops[5], what ftrace_nop_replace writes.
var nop5 = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}

// ftraceModuleInit turns every "call __fentry__" listed in __mcount_loc
// into NOP5. A site that does not hold that call is left alone and
// counted (ftrace_make_nop returns -EINVAL and ftrace_bug reports it).
//
// Models kernel/trace/ftrace.c:ftrace_module_init → ftrace_process_locs →
// ftrace_nop_initialize (arch/x86/kernel/ftrace.c:ftrace_make_nop).
//
// ftrace_process_locs first allocates the module's record groups
// (ftrace_allocate_pages); when that fails (fault ftrace.pages.alloc) it
// returns -ENOMEM before ftrace_update_code, which ftrace_module_init
// ignores: the module loads with its "call __fentry__" sites untouched and
// no ftrace records.
func (l *Loader) ftraceModuleInit(lm *Loaded) {
	if l.ftraceAllocFails(len(lm.Module.McountLocs)) {
		lm.Finalize = append(lm.Finalize, fmt.Sprintf("ftrace_module_init: ftrace_allocate_pages for %d records failed (-ENOMEM, ignored): no records, the __fentry__ calls stay", len(lm.Module.McountLocs)))
		return
	}
	fentry := l.vmlinux["__fentry__"]
	bad := 0
	for _, a := range lm.Module.McountLocs {
		b := lm.mem.at(a, 5)
		if b == nil || b[0] != 0xe8 || int64(a+5)+int64(int32(binary.LittleEndian.Uint32(b[1:]))) != int64(fentry) {
			bad++
			continue
		}
		copy(b, nop5)
	}
	if bad > 0 {
		lm.Finalize = append(lm.Finalize, fmt.Sprintf("ftrace_module_init: %d of %d __mcount_loc sites are not call __fentry__ (ftrace_bug: -EINVAL), left as they are", bad, len(lm.Module.McountLocs)))
	}
}

// SiteCount is how many of a module's sites of one table module_finalize
// left with one result (alternative.Site's Kind and Action).
type SiteCount struct {
	Kind   alternative.SiteKind
	Action string
	N      int
}

// Call-thunk padding written outside the module being loaded
// (patch_dest through text_poke_copy_locked).
const (
	PadInVmlinux     = alternative.CallThunkPad + " in vmlinux padding"
	PadInOtherModule = alternative.CallThunkPad + " in another module's padding"
)

// siteSummary counts the recorded sites by kind and result; accounting
// thunks written outside mod's MOD_TEXT are told apart.
func (l *Loader) siteSummary(sites []alternative.Site, mod *alternative.ModuleText) []SiteCount {
	idx := map[[2]string]int{}
	var out []SiteCount
	for _, s := range sites {
		a := s.Action
		if s.Kind == alternative.SiteCallThunk && a == alternative.CallThunkPad && mod != nil && (s.Addr < mod.Base || s.Addr >= mod.End) {
			a = PadInOtherModule
			if r := l.k.RegionAt(s.Addr); r != nil && (r.Kind == image.CoreText || r.Kind == image.InitText) {
				a = PadInVmlinux
			}
		}
		key := [2]string{s.Kind.String(), a}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, SiteCount{Kind: s.Kind, Action: a})
		}
		out[i].N++
	}
	slices.SortFunc(out, func(a, b SiteCount) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		return strings.Compare(a.Action, b.Action)
	})
	return out
}

// SumPatch adds up what module_finalize did to every module in ls.
func SumPatch(ls []*Loaded) alternative.Stats {
	var t alternative.Stats
	for _, m := range ls {
		p := &m.Patch
		t.Paravirt.Sites += p.Paravirt.Sites
		t.Paravirt.Direct += p.Paravirt.Direct
		t.Paravirt.Nop += p.Paravirt.Nop
		t.Paravirt.BUG += p.Paravirt.BUG
		r, pr := &t.Retpolines, &p.Retpolines
		r.Sites, r.Indirect, r.Lfence, r.ITS, r.Kept, r.Unfit, r.Skipped, r.Depth = r.Sites+pr.Sites, r.Indirect+pr.Indirect,
			r.Lfence+pr.Lfence, r.ITS+pr.ITS, r.Kept+pr.Kept, r.Unfit+pr.Unfit, r.Skipped+pr.Skipped, r.Depth+pr.Depth
		re, pre := &t.Returns, &p.Returns
		re.Sites, re.Ret, re.Thunk, re.Tramp, re.Skipped = re.Sites+pre.Sites, re.Ret+pre.Ret, re.Thunk+pre.Thunk, re.Tramp+pre.Tramp, re.Skipped+pre.Skipped
		a, pa := &t.Alternatives, &p.Alternatives
		a.Sites, a.Replaced, a.CallFixed, a.JmpShort, a.JmpNear, a.NopRuns, a.Undecodable = a.Sites+pa.Sites, a.Replaced+pa.Replaced,
			a.CallFixed+pa.CallFixed, a.JmpShort+pa.JmpShort, a.JmpNear+pa.JmpNear, a.NopRuns+pa.NopRuns, a.Undecodable+pa.Undecodable
		a.DirectCall, a.DirectNop, a.Relocs, a.Groups = a.DirectCall+pa.DirectCall, a.DirectNop+pa.DirectNop, a.Relocs+pa.Relocs, a.Groups+pa.Groups
		c, pc := &t.CallThunks, &p.CallThunks
		c.Sites, c.AltSites, c.Patched, c.Pads, c.NotCall, c.Skipped, c.BadPad = c.Sites+pc.Sites, c.AltSites+pc.AltSites,
			c.Patched+pc.Patched, c.Pads+pc.Pads, c.NotCall+pc.NotCall, c.Skipped+pc.Skipped, c.BadPad+pc.BadPad
		t.Seal.Sites += p.Seal.Sites
		t.Seal.Poisoned += p.Seal.Poisoned
		t.Seal.NotEndbr += p.Seal.NotEndbr
	}
	return t
}

// FinalizeLine says what module_finalize did for cpu, in the terms of
// model m's tables (one module's Stats, or SumPatch's).
func FinalizeLine(m *alternative.Model, cpu string, s *alternative.Stats) string {
	return finalizeLine(m, cpu, "", s)
}

// finalizeLine is FinalizeLine with what the counts cover ("": one
// module) after the CPU and generation (6.12, 7.3).
func finalizeLine(m *alternative.Model, cpu, of string, s *alternative.Stats) string {
	if m.Paravirt {
		return fmt.Sprintf("module_finalize (%s): paravirt %d (%d direct, %d nop), retpolines %d (%d indirect, %d kept), returns %d (%d ret, %d thunk), alternatives %d (%d replaced)",
			cpu, s.Paravirt.Sites, s.Paravirt.Direct, s.Paravirt.Nop, s.Retpolines.Sites, s.Retpolines.Indirect, s.Retpolines.Kept,
			s.Returns.Sites, s.Returns.Ret, s.Returns.Thunk, s.Alternatives.Sites, s.Alternatives.Replaced)
	}
	r, re, a, c := &s.Retpolines, &s.Returns, &s.Alternatives, &s.CallThunks
	parts := []string{
		fmt.Sprintf("retpolines %d (%d call/jmp *%%reg, %d lfence, %d ITS thunk, %d call-depth thunk, %d kept, %d unfit, %d skipped)",
			r.Sites, r.Indirect, r.Lfence, r.ITS, r.Depth, r.Kept, r.Unfit, r.Skipped),
		fmt.Sprintf("returns %d (%d ret, %d jmp return thunk, %d static-call trampolines, %d skipped)", re.Sites, re.Ret, re.Thunk, re.Tramp, re.Skipped),
		fmt.Sprintf("alternatives %d (%d replaced, of which %d pv direct calls and %d pv calls to nop_func; %d fields relocated, %d NOP runs optimized, %d undecodable walks)",
			a.Sites, a.Replaced, a.DirectCall, a.DirectNop, a.Relocs, a.NopRuns, a.Undecodable),
	}
	if c.Sites+c.AltSites == 0 {
		parts = append(parts, "call thunks: none (no X86_FEATURE_CALL_DEPTH)")
	} else {
		parts = append(parts, fmt.Sprintf("call thunks %d call sites + %d alternative sites (%d calls re-aimed at %d accounting pads, %d not calls, %d skipped, %d bad padding)",
			c.Sites, c.AltSites, c.Patched, c.Pads, c.NotCall, c.Skipped, c.BadPad))
	}
	parts = append(parts, fmt.Sprintf("ENDBR sealing %d (%d poisoned, %d not ENDBR)", s.Seal.Sites, s.Seal.Poisoned, s.Seal.NotEndbr))
	return fmt.Sprintf("module_finalize (%s, %s)%s: %s", cpu, m.Gen, of, strings.Join(parts, "; "))
}

// FinalizeNote says what module_finalize did to all of ls for cpu, in the
// terms of model m's tables (the image note of kpsim --modules).
func FinalizeNote(m *alternative.Model, cpu string, ls []*Loaded) string {
	s := SumPatch(ls)
	if m.Paravirt {
		return fmt.Sprintf("module_finalize (%s), all modules: paravirt %d (%d direct calls, %d nops), retpolines %d (%d call/jmp *%%reg, %d kept), returns %d (%d ret, %d thunk, %d static-call trampolines), alternatives %d (%d replaced)",
			cpu, s.Paravirt.Sites, s.Paravirt.Direct, s.Paravirt.Nop, s.Retpolines.Sites, s.Retpolines.Indirect, s.Retpolines.Kept,
			s.Returns.Sites, s.Returns.Ret, s.Returns.Thunk, s.Returns.Tramp, s.Alternatives.Sites, s.Alternatives.Replaced)
	}
	line := finalizeLine(m, cpu, ", all modules", &s)
	pads := map[string]int{}
	for _, l := range ls {
		for _, c := range l.Sites {
			if c.Action == PadInVmlinux || c.Action == PadInOtherModule {
				pads[c.Action] += c.N
			}
		}
	}
	if len(pads) > 0 {
		line += fmt.Sprintf(" (accounting thunks written into vmlinux padding: %d, into other modules' padding: %d)", pads[PadInVmlinux], pads[PadInOtherModule])
	}
	return line
}
