package module

import (
	"encoding/binary"
	"fmt"
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
// as far as kpsim models boot-time patching: the return thunks, when the
// image's own returns are patched (a CPU that needs no return thunk).
// It returns one line per step for the notes.
//
// Models arch/x86/kernel/module.c:module_finalize (apply_returns; see the
// notes for what is not modelled yet).
func (l *Loader) moduleFinalize(o *object, lm *Loaded) []string {
	var out []string
	if l.k.Config.ReturnsPatched {
		sites := o.sites(lm.mem, ".return_sites")
		n := applyReturns(lm.mem, sites, l.vmlinux["__x86_return_thunk"])
		out = append(out, fmt.Sprintf("apply_returns: %d of %d return-thunk jumps rewritten to ret; int3", n, len(sites)))
	}
	return out
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
func (l *Loader) ftraceModuleInit(lm *Loaded) {
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
