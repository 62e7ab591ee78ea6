package alternative

import "fmt"

// moduleFinalize61: apply_paravirt, apply_retpolines (between
// its_init_mod and its_fini_mod), apply_returns, apply_alternatives; no
// IBT sealing (Debian 6.1 has no CONFIG_X86_KERNEL_IBT) and no SMP-lock
// patching on an SMP boot. The order is alternative_instructions'.
//
// Models arch/x86/kernel/module.c:module_finalize (6.1, its patching
// part).
func moduleFinalize61(p *Patcher, t *Tables) error {
	return alternativeInstructions61(p, t)
}

// moduleFinalize612: apply_retpolines (apply_fineibt before it does
// nothing without CONFIG_FINEIBT; its_init_mod / its_fini_mod bracket it:
// Env.ITSThunk is the module's thunk allocator), apply_returns,
// apply_alternatives, callthunks_patch_module_calls over .call_sites and
// the alternative sites, apply_seal_endbr. alternatives_smp_module_add
// changes nothing on an SMP boot (uniproc_patched is false).
//
// Models arch/x86/kernel/module.c:module_finalize (6.12).
func moduleFinalize612(p *Patcher, t *Tables) error {
	if err := p.ApplyRetpolines(t.Retpolines); err != nil {
		return err
	}
	if err := p.ApplyReturns(t.Returns); err != nil {
		return err
	}
	if err := p.model().applyAlternatives(p, t.Alternatives); err != nil {
		return err
	}
	if err := p.CallthunksPatchModuleCalls(t, p.Module); err != nil {
		return err
	}
	return p.ApplySealEndbr(t.EndbrSeal)
}

// moduleFinalize73: apply_retpolines (bracketed by its_init_mod and
// its_fini_mod), apply_returns, callthunks_patch_module_calls over
// .call_sites only, then apply_alternatives, apply_seal_endbr. 7.3 has no
// .smp_locks (alternatives_smp_module_add is gone).
//
// Models arch/x86/kernel/module.c:module_finalize (7.3).
func moduleFinalize73(p *Patcher, t *Tables) error {
	if err := p.ApplyRetpolines(t.Retpolines); err != nil {
		return err
	}
	if err := p.ApplyReturns(t.Returns); err != nil {
		return err
	}
	if err := p.CallthunksPatchModuleCalls(t, p.Module); err != nil {
		return err
	}
	if err := p.model().applyAlternatives(p, t.Alternatives); err != nil {
		return err
	}
	return p.ApplySealEndbr(t.EndbrSeal)
}

// ModuleFinalize patches a module's text as the generation's
// module_finalize does (Model): the tables are the module's own,
// relocated; Module names its MOD_TEXT for the call thunks (6.12, 7.3).
//
// Models arch/x86/kernel/module.c:module_finalize (its patching part).
func (p *Patcher) ModuleFinalize(t *Tables) error {
	if p.CPU.Model() != p.model() {
		return fmt.Errorf("CPU %s is numbered for %s, the patcher models %s (use CPU.ForGen)", p.CPU.Name, p.CPU.Model().Gen, p.model().Gen)
	}
	return p.model().moduleFinalize(p, t)
}
