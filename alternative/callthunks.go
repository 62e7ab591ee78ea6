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
	st := &p.Stats.CallThunks
	for _, a := range t.CallSites {
		st.Sites++
		if err := p.patchCall(a, ct); err != nil {
			return err
		}
	}
	if p.model().callThunkAltSites {
		for _, a := range t.Alternatives {
			st.AltSites++
			if err := p.patchCall(a.Instr, ct); err != nil {
				return err
			}
		}
	}
	return nil
}

func (ct *CallThunkEnv) core(a uint64) bool { return a >= ct.TextStart && a < ct.TextEnd }

// skipAddr is skip_addr: destinations whose callers must not be
// accounted (entry code that does its own RSB handling, __fentry__,
// relocate_kernel's page).
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

func (p *Patcher) patchCall(addr uint64, ct *CallThunkEnv) error {
	st := &p.Stats.CallThunks
	if !ct.core(addr) {
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
	if ct.skipAddr(dest) || !ct.core(dest) {
		st.Skipped++
		return nil
	}
	pad, ok, err := p.patchDest(dest, ct)
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
	if _, err := applyRelocation(buf, pad, n, ct.TemplateAddr, n); err != nil {
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
