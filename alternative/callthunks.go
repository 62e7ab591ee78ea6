package alternative

import (
	"bytes"
	"fmt"
)

// Call-thunk site results.
const (
	CallThunkPatched = "call to padding thunk"
	CallThunkPad     = "accounting thunk" // the padding before a function got skl_call_thunk_template
)

// CallthunksPatchBuiltinCalls, with X86_FEATURE_CALL_DEPTH (retbleed=stuff
// or its=stuff), writes the call-depth accounting template
// (INCREMENT_CALL_DEPTH) into the NOP padding in front of every core-text
// function that a direct call in .call_sites reaches (6.12: also every
// alternative site that is a direct call after apply_alternatives) and
// re-aims each such call at that padding. Calls to skip_addr's
// destinations and out of core text stay.
//
// Models arch/x86/kernel/callthunks.c:callthunks_patch_builtin_calls,
// callthunks_setup, patch_call_sites, patch_alt_call_sites (6.12),
// patch_call, call_get_dest, skip_addr and patch_dest.
func (p *Patcher) CallthunksPatchBuiltinCalls(t *Tables) error {
	if !p.model().CallThunks || !p.CPU.Features.Has(p.bits().CALL_DEPTH) {
		return nil
	}
	ct := p.Env.CallThunks
	if ct == nil || len(ct.Template) == 0 || ct.TextEnd <= ct.TextStart {
		return fmt.Errorf("call depth tracking: no skl_call_thunk_template or _text/_etext in the image")
	}
	return p.callthunksSetup(t, coreText{base: ct.TextStart, end: ct.TextEnd}, ct)
}

// ModuleText is what callthunks_patch_module_calls knows of the module
// being loaded: its MOD_TEXT block (struct core_text: only call sites
// there are patched, and a destination there has its padding written
// directly) and which addresses are in another module's core memory
// (within_module_coretext; the module being loaded is not yet in the
// module tree: MODULE_STATE_UNFORMED).
type ModuleText struct {
	Name      string
	Base, End uint64
	// OtherCore is within_module_coretext: addr is in the core memory of
	// a formed module. Nil: there is none.
	OtherCore func(addr uint64) bool
}

// CallthunksPatchModuleCalls, when boot set call depth tracking up
// (thunks_initialized: X86_FEATURE_CALL_DEPTH), re-aims the direct calls
// of a module's .call_sites (6.12: and of its alternative sites) that lie
// in its MOD_TEXT at their destination's accounting thunk, writing the
// template into the destination's padding when it still holds NOPs: in
// the module itself, in vmlinux core text or in another module (there
// through text_poke_copy_locked; the bytes are the same). Calls from
// init text, to init text or to skip_addr's destinations stay.
//
// Models arch/x86/kernel/callthunks.c:callthunks_patch_module_calls,
// callthunks_setup, patch_call_sites, patch_alt_call_sites (6.12),
// patch_call, is_coretext and patch_dest.
func (p *Patcher) CallthunksPatchModuleCalls(t *Tables, mod *ModuleText) error {
	if !p.model().CallThunks || !p.CPU.Features.Has(p.bits().CALL_DEPTH) {
		return nil
	}
	ct := p.Env.CallThunks
	if ct == nil || len(ct.Template) == 0 || ct.TextEnd <= ct.TextStart {
		return fmt.Errorf("call depth tracking: no skl_call_thunk_template or _text/_etext in the image")
	}
	if mod == nil || mod.End <= mod.Base {
		return fmt.Errorf("call depth tracking: no MOD_TEXT for the module's call sites")
	}
	return p.callthunksSetup(t, coreText{base: mod.Base, end: mod.End, other: mod.OtherCore}, ct)
}

// coreText is struct core_text (the text whose call sites are patched)
// with is_coretext's view of the rest of core text.
type coreText struct {
	base, end uint64
	// other is within_module_coretext (nil at boot: no modules yet).
	other func(uint64) bool
}

// within reports a in [base, end).
//
// Models arch/x86/kernel/callthunks.c:within_coretext.
func (c coreText) within(a uint64) bool { return a >= c.base && a < c.end }

// isCoretext: ct, builtin core text [_text, _etext), or a module's core
// memory.
//
// Models arch/x86/kernel/callthunks.c:is_coretext.
func (c coreText) isCoretext(a uint64, env *CallThunkEnv) bool {
	return c.within(a) || env.core(a) || c.other != nil && c.other(a)
}

// callthunksSetup patches the call sites and (6.12) the alternative
// sites of ct.
//
// Models arch/x86/kernel/callthunks.c:callthunks_setup.
func (p *Patcher) callthunksSetup(t *Tables, ct coreText, env *CallThunkEnv) error {
	st := &p.Stats.CallThunks
	for _, a := range t.CallSites {
		st.Sites++
		if err := p.patchCall(a, ct, env); err != nil {
			return err
		}
	}
	if p.model().callThunkAltSites {
		for _, a := range t.Alternatives {
			st.AltSites++
			if err := p.patchCall(a.Instr, ct, env); err != nil {
				return err
			}
		}
	}
	return nil
}

// core reports a in builtin_coretext, [_text, _etext).
//
// Models arch/x86/kernel/callthunks.c:within_coretext (on
// builtin_coretext).
func (ct *CallThunkEnv) core(a uint64) bool { return a >= ct.TextStart && a < ct.TextEnd }

// skipAddr is skip_addr: destinations whose callers must not be
// accounted (entry code that does its own RSB handling, __fentry__,
// relocate_kernel's page: the Model's kexecRange).
//
// Models arch/x86/kernel/callthunks.c:skip_addr (6.12, 7.3).
func (ct *CallThunkEnv) skipAddr(dest uint64) bool {
	for _, s := range ct.Skip {
		if dest == s {
			return true
		}
	}
	for _, r := range ct.SkipRanges {
		if dest >= r[0] && dest < r[1] {
			return true
		}
	}
	return false
}

// patchCall re-aims the call at addr, when addr is in ct, at its
// destination's accounting thunk (patch_dest). A site that no longer
// decodes as a direct call (patched out), a call to a skip_addr
// destination and a call out of core text stay as they are.
//
// Models arch/x86/kernel/callthunks.c:patch_call and call_get_dest
// (6.12, 7.3).
func (p *Patcher) patchCall(addr uint64, ct coreText, env *CallThunkEnv) error {
	st := &p.Stats.CallThunks
	if !ct.within(addr) {
		st.Skipped++
		return nil
	}
	in, err := p.decodeAt(addr)
	if err != nil {
		st.Skipped++ // WARN_ON_ONCE(IS_ERR(dest))
		return nil
	}
	if in.Opcode[0] != x86CALL {
		st.NotCall++ // patched out call
		return nil
	}
	dest := in.Target(addr)
	if env.skipAddr(dest) || !ct.isCoretext(dest, env) {
		st.Skipped++
		return nil
	}
	pad, ok, err := p.patchDest(dest, env)
	if err != nil {
		return err
	}
	if !ok {
		st.BadPad++
		return nil
	}
	var b [5]byte
	genInsn(b[:], x86CALL, addr, pad)
	dst, err := p.text("call", addr, 5)
	if err != nil {
		return err
	}
	st.Patched++
	p.textPokeEarly(SiteCallThunk, addr, dst, b[:], CallThunkPatched)
	return nil
}

// patchDest returns dest's accounting thunk, the template's length in
// front of dest, writing it first when the padding still holds NOPs.
//
// Models arch/x86/kernel/callthunks.c:patch_dest (direct: core text).
func (p *Patcher) patchDest(dest uint64, ct *CallThunkEnv) (uint64, bool, error) {
	n := len(ct.Template)
	pad := dest - uint64(n)
	buf := make([]byte, MaxPatchLen)
	copy(buf, ct.Template)
	// text_poke_apply_relocation(insn_buff, pad, tsize, template, tsize)
	if _, err := p.model().applyRelocation(buf, pad, n, ct.TemplateAddr, n); err != nil {
		return 0, false, fmt.Errorf("call thunk for %#x: %w", dest, err)
	}
	p.model().optimizeNops(buf, n)
	cur, err := p.text("call thunk padding", pad, n)
	if err != nil {
		return 0, false, err
	}
	if bytes.Equal(cur, buf[:n]) {
		return pad, true, nil // already patched
	}
	for _, c := range cur {
		if c != x86NOP1 {
			return 0, false, nil // pr_warn_once("Invalid padding area")
		}
	}
	p.Stats.CallThunks.Pads++
	p.textPokeEarly(SiteCallThunk, pad, cur, buf[:n], CallThunkPad)
	return pad, true, nil
}
