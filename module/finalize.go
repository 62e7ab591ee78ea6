package module

import (
	"encoding/binary"
	"fmt"

	"github.com/kpsim/kpsim/alternative"
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
// image): apply_paravirt over .parainstructions, apply_retpolines over
// .retpoline_sites, apply_returns over .return_sites, apply_alternatives
// over .altinstructions, all on the relocated tables and text (package
// alternative). IBT sealing is a no-op (CONFIG_X86_KERNEL_IBT is off in
// Debian 6.1, no module has .ibt_endbr_seal); SMP-lock patching happens
// only on a uniprocessor boot; ITS thunks come from the static array (the
// per-module its_allocate_thunk pages are not modelled: neither named CPU
// has the ITS bug). An image not boot-patched (--cpu none) gets only the
// return-thunk rewrite of apply_returns, when its returns are patched.
// It returns one line per step for the notes.
//
// Models arch/x86/kernel/module.c:module_finalize.
func (l *Loader) moduleFinalize(o *object, lm *Loaded) ([]string, error) {
	if cpu := l.k.Config.CPU; cpu != "" && cpu != alternative.CPUNone && !l.gen.finalizeModelled {
		return []string{fmt.Sprintf("module_finalize (%s) is not modelled for %s modules (%d-byte alt_instr, call thunks, IBT sealing): the module text stays as built", cpu, l.gen.gen, l.gen.altInstrSize)}, nil
	}
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
	var t alternative.Tables
	var err error
	if _, b, e := o.entries(lm.mem, ".parainstructions", ParaSiteSize); e != nil {
		return nil, e
	} else if t.Para, err = alternative.ParseParaInstructions(b); err != nil {
		return nil, o.errorf("%v", err)
	}
	for _, tb := range []struct {
		name string
		dst  *[]uint64
	}{{".retpoline_sites", &t.Retpolines}, {".return_sites", &t.Returns}} {
		at, b, e := o.entries(lm.mem, tb.name, SiteSize)
		if e != nil {
			return nil, e
		}
		if *tb.dst, err = alternative.ParseSites(tb.name, b, at); err != nil {
			return nil, o.errorf("%v", err)
		}
	}
	if at, b, e := o.entries(lm.mem, ".altinstructions", AltInstrSize); e != nil {
		return nil, e
	} else if t.Alternatives, err = alternative.ParseAltInstructions(b, at); err != nil {
		return nil, o.errorf("%v", err)
	}
	if len(t.Para) > 0 && len(l.env.PVOps) == 0 {
		return nil, o.errorf("module_finalize: %d .parainstructions sites but the image has no pv_ops", len(t.Para))
	}
	p := &alternative.Patcher{CPU: l.cpu, Env: l.env, Mem: lm.mem}
	if err := p.ModuleFinalize(&t); err != nil {
		return nil, o.errorf("module_finalize for %s: %v", l.cpu.Name, err)
	}
	lm.Patch = p.Stats
	s := &p.Stats
	return []string{fmt.Sprintf("module_finalize (%s): paravirt %d (%d direct, %d nop), retpolines %d (%d indirect, %d kept), returns %d (%d ret, %d thunk), alternatives %d (%d replaced)",
		l.cpu.Name, s.Paravirt.Sites, s.Paravirt.Direct, s.Paravirt.Nop, s.Retpolines.Sites, s.Retpolines.Indirect, s.Retpolines.Kept,
		s.Returns.Sites, s.Returns.Ret, s.Returns.Thunk, s.Alternatives.Sites, s.Alternatives.Replaced)}, nil
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
