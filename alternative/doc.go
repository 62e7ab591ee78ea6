// Package alternative applies the boot-time text patching of x86-64 Linux
// 6.1 to a kernel image or a module: paravirt patching, retpoline and
// return-thunk rewriting and alternatives, for a chosen CPU.
//
// # What Linux does
//
// The kernel is built for every x86-64 CPU and hypervisor at once; objtool
// and the asm macros record every place whose best code depends on the
// machine, and alternative_instructions (arch/x86/kernel/alternative.c)
// rewrites them once, at boot, before SMP is up, with text_poke_early
// (a memcpy). The order matters, since each step sees the bytes the
// previous one left:
//
//  1. paravirt_set_cap sets PVUNLOCK / VCPUPREEMPT when the spinlock
//     ops are not native (never on bare metal).
//  2. apply_paravirt (.parainstructions): every "call *pv_ops+off(%rip)"
//     (ff 15 disp32, 6 bytes) becomes, by paravirt_patch, a direct
//     "call <slot>" + NOP1, or six bytes of NOPs when the slot is
//     _paravirt_nop, or "call paravirt_BUG" for an empty slot. 6.1 has
//     no inline native templates any more: the native inline code (cli,
//     sti, pushf; pop, mov %cr2, ...) comes from alternatives wrapped
//     around the pv call under ALT_NOT(X86_FEATURE_XENPV).
//  3. apply_retpolines (.retpoline_sites): calls and jumps to
//     __x86_indirect_thunk_<reg> stay (spectre_v2=retpoline), become
//     "lfence; call *%reg" (RETPOLINE_LFENCE) or "call *%reg" / "jmp
//     *%reg; int3" padded with NOPs (eIBRS, IBRS, off), or a rel32 to an
//     ITS thunk (ITS mitigation, branch in the lower half of a cache line).
//  4. apply_returns (.return_sites): "jmp __x86_return_thunk" becomes
//     "jmp x86_return_thunk" (the thunk the mitigations chose:
//     retbleed_return_thunk, srso_return_thunk, ...) when
//     X86_FEATURE_RETHUNK is set, else "ret; int3; int3; int3; int3".
//     Static-call trampolines found there are fixed by
//     __static_call_fixup.
//  5. apply_alternatives (.altinstructions): for each entry in table
//     order, if the CPU has the feature (or lacks it, ALT_NOT), the
//     replacement is copied over the original, a 5-byte "call rel32"
//     re-based, a 5-byte jmp re-targeted and shrunk to "jmp rel8" + NOP3
//     when it fits (recompute_jump), and the rest padded with 0x90. Then,
//     patched or not, optimize_nops rewrites each run of two or more 0x90
//     in the site into the kernel's multi-byte NOPs.
//
// Modules get the same four steps in module_finalize
// (arch/x86/kernel/module.c), over their own relocated tables, with the
// vmlinux pv_ops and thunks: Patcher.ModuleFinalize. In 6.12 and 7.3
// (Model) module_finalize runs apply_retpolines, apply_returns,
// apply_alternatives, callthunks_patch_module_calls and apply_seal_endbr
// (7.3: the call thunks before the alternatives, over .call_sites only);
// the call thunks patch only calls in the module's MOD_TEXT
// (Patcher.Module) and may write the accounting template into the
// padding of a vmlinux or another module's function.
//
// # Which patchings change instruction boundaries
//
// kprobes decodes the live text (can_probe walks from the symbol,
// can_optimize decodes the whole function, prepare_emulation refuses some
// instructions), so a patch that changes where instructions start changes
// decisions:
//
//   - paravirt, direct call: ff 15 (6) becomes e8 rel32 (5) + 90: changes.
//   - paravirt, nop slot: ff 15 (6) becomes one 6-byte NOP: same span, one
//     instruction, but no longer an indirect call (prepare_emulation
//     refuses "call *disp32(%rip)" with EOPNOTSUPP; it accepts the patched
//     forms).
//   - alternatives: any original becomes the replacement + NOPs: changes.
//   - optimize_nops: N x 90 becomes multi-byte NOPs, even at sites whose
//     feature test failed: changes.
//   - retpolines under eIBRS/lfence: e8 rel32 becomes ff d0+r + NOP3 (or
//     41 ff d0+r + NOP2, lfence + call): changes. Under retpoline: none.
//     ITS thunk calls keep the 5-byte form: bytes only.
//   - returns without rethunk: e9 rel32 becomes c3 cc cc cc cc: changes.
//     With rethunk: e9 to another thunk: bytes only.
//
// Jump labels, static calls (except a tail call with a NULL function),
// ftrace's NOPing of __fentry__ calls, SMP locks and IBT sealing keep
// lengths; they are not this package's.
//
// # CPUs
//
// A CPU (LookupCPU, CPUNames) is the feature set the patch decisions
// read, with every bit documented by the reason it is set (CPUID, vendor
// init, or the mitigation cpu_select_mitigations chose on the default
// command line). DefaultCPU is what the loaders assume; CPUNone means the
// text as built.
package alternative
