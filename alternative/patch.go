package alternative

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/kpsim/kpsim/x86"
)

// MaxPatchLen is MAX_PATCH_LEN, the largest site apply_alternatives and
// apply_paravirt patch.
const MaxPatchLen = 255 - 1

// Memory is the address space the patcher works on: the text it
// rewrites (vmlinux text, or a module's sections after relocation), the
// replacement bytes it copies from and any data it reads.
type Memory interface {
	// Text returns up to n bytes at addr, aliasing the memory so that
	// writes patch it. It returns fewer bytes where the mapping ends and
	// nil when addr is not mapped.
	Text(addr uint64, n int) []byte
}

// Env is what the patch functions read from vmlinux besides the sites
// themselves: the pv_ops table and the addresses of the thunks and stubs
// they emit calls and jumps to. Module patching (module_finalize) uses the
// Env of the vmlinux the module is loaded into.
type Env struct {
	// PVOps is struct paravirt_patch_template pv_ops, one function
	// pointer per slot (a site's type indexes it), as it stands when
	// alternative_instructions runs.
	PVOps []uint64
	// ParavirtNop is _paravirt_nop (paravirt_nop), ParavirtBUG is
	// paravirt_BUG: the two targets paravirt_patch treats specially.
	ParavirtNop, ParavirtBUG uint64
	// IndirectThunkArray is __x86_indirect_thunk_array (one
	// RETPOLINE_THUNK_SIZE = 32-byte thunk per register).
	IndirectThunkArray uint64
	// ITSThunkArray is __x86_indirect_its_thunk_array (ITS_THUNK_SIZE =
	// 64 bytes per register); 0 without CONFIG_MITIGATION_ITS.
	ITSThunkArray uint64
	// ReturnThunk is __x86_return_thunk, the target objtool's
	// .return_sites jump to; XReturnThunk is x86_return_thunk, the thunk
	// the mitigation selection set (set_return_thunk); ITSReturnThunk is
	// its_return_thunk (cpu_wants_rethunk_at compares against it).
	ReturnThunk, XReturnThunk, ITSReturnThunk uint64
	// StaticCallReturn is __static_call_return ("ret; int3"), used by
	// __static_call_transform for Jcc tail sites without RETHUNK.
	StaticCallReturn uint64
	// NopFunc and BUGFunc are nop_func and BUG_func (6.12, 7.3): what
	// alt_replace_call compares a pv_ops target with and the target of
	// an empty slot.
	NopFunc, BUGFunc uint64
	// CallThunkArray and JumpThunkArray are
	// __x86_indirect_call_thunk_array and __x86_indirect_jump_thunk_array
	// (6.12, 7.3): the call-depth-tracking retpolines.
	CallThunkArray, JumpThunkArray uint64
	// CallThunks is what callthunks_patch_builtin_calls reads (6.12,
	// 7.3); nil without CONFIG_CALL_THUNKS.
	CallThunks *CallThunkEnv
	// ITSThunk allocates an ITS thunk ("jmp *%reg; int3" in the upper half
	// of a cache line) as its_allocate_thunk does from module_alloc pages
	// and returns its address. Nil, or false: the allocation failed and
	// emit_its_trampoline falls back to the static array entry.
	ITSThunk func(reg int) (uint64, bool)
}

// SiteKind says which table a patched site came from.
type SiteKind uint8

const (
	SiteParavirt SiteKind = iota
	SiteRetpoline
	SiteReturn
	SiteAlternative
	SiteCallThunk // a call re-aimed at its destination's accounting thunk
	SiteSeal      // an ENDBR poisoned by apply_seal_endbr
)

func (k SiteKind) String() string {
	return [...]string{"paravirt", "retpoline", "return", "alternative", "call-thunk", "seal"}[k]
}

// Site is one site as the patcher left it (Patcher.Record).
type Site struct {
	Kind   SiteKind
	Addr   uint64
	Before []byte // the site's bytes before this patch step
	After  []byte // after (same length)
	Action string // what the kernel did, e.g. "direct call", "nop", "ret", "kept"
}

// Stats counts what one Patcher did, per table.
type Stats struct {
	Paravirt struct {
		Sites, Direct, Nop, BUG int
	}
	Retpolines struct {
		// Indirect: call/jmp *%reg written; Lfence: with lfence in
		// front; ITS: call/jmp to an ITS thunk; Kept: left as the thunk
		// call (RETPOLINE without LFENCE); Unfit: the replacement's
		// length differs from the site's, so nothing is written;
		// Skipped: not a call/jmp/jcc, or not to a thunk (WARN).
		Sites, Indirect, Lfence, ITS, Kept, Unfit, Skipped int
		// Depth: call/jmp to the call-depth-tracking thunk (6.12, 7.3).
		Depth int
	}
	Returns struct {
		// Ret: "ret; int3..." written; Thunk: "jmp x86_return_thunk";
		// Tramp: a static-call trampoline fixed by __static_call_fixup;
		// Skipped: not a jmp to __x86_return_thunk (WARN).
		Sites, Ret, Thunk, Tramp, Skipped int
	}
	Alternatives struct {
		// Replaced: the feature test chose the replacement; CallFixed:
		// its e8 rel32 was re-based; JmpShort / JmpNear: recompute_jump
		// wrote eb rel8 + NOP3 or e9 rel32; NopRuns: runs of >= 2 single
		// NOPs optimize_nops rewrote (patched or not); Undecodable: the
		// optimize_nops walk stopped at an instruction it cannot decode.
		Sites, Replaced, CallFixed, JmpShort, JmpNear, NopRuns, Undecodable int
		// 6.12, 7.3: DirectCall: ALT_FLAG_DIRECT_CALL entries patched
		// to "call <pv_ops target>"; DirectNop: ... whose target is
		// nop_func (the site becomes one NOP); Relocs: immediates and
		// displacements __apply_relocation re-based; Groups: patch
		// sites (7.3: consecutive entries of one site are one group).
		DirectCall, DirectNop, Relocs, Groups int
	}
	CallThunks struct {
		// Sites: .call_sites entries; AltSites: alternative sites
		// looked at (6.12); Patched: calls re-aimed at their
		// destination's padding thunk; Pads: padding areas that got
		// the accounting template; NotCall: no longer a direct call
		// (patched out); Skipped: skip_addr or not core text; BadPad:
		// the padding held no NOPs (pr_warn_once).
		Sites, AltSites, Patched, Pads, NotCall, Skipped, BadPad int
	}
	Seal struct {
		// Sites: .ibt_endbr_seal entries; Poisoned: ENDBR64 replaced
		// by the 4-byte "nopl -42(%rax)"; NotEndbr: WARN, left alone.
		Sites, Poisoned, NotEndbr int
	}
}

// Patcher applies one generation's boot-time text patching for one CPU
// to one address space.
type Patcher struct {
	// Model is the generation's patching (nil: 6.1). CPU must use its
	// feature numbering (CPU.ForGen).
	Model *Model
	CPU   *CPU
	Env   *Env
	Mem   Memory
	// Module is the module ModuleFinalize patches (6.12, 7.3: its
	// MOD_TEXT for callthunks_patch_module_calls); nil at boot.
	Module *ModuleText
	// Record keeps every site's before/after bytes in Sites.
	Record bool
	Sites  []Site
	Stats  Stats
}

// ErrUnmapped is wrapped by errors for a site outside Memory.
var ErrUnmapped = errors.New("site is not in the patched memory")

func (p *Patcher) model() *Model {
	if p.Model == nil {
		return model61
	}
	return p.Model
}

// bits are the feature bits the patch functions test, in the model's
// numbering.
func (p *Patcher) bits() *featureBits { return &p.model().bits }

// AlternativeInstructions patches vmlinux in the generation's boot order
// (Model). SMP-lock patching only happens on a uniprocessor boot and is
// not modelled.
func (p *Patcher) AlternativeInstructions(t *Tables) error {
	if p.CPU.Model() != p.model() {
		return fmt.Errorf("CPU %s is numbered for %s, the patcher models %s (use CPU.ForGen)", p.CPU.Name, p.CPU.Model().Gen, p.model().Gen)
	}
	return p.model().alternativeInstructions(p, t)
}

// alternativeInstructions61: paravirt, retpolines, returns, alternatives
// (IBT sealing is not modelled: Debian 6.1 builds without
// CONFIG_X86_KERNEL_IBT).
//
// Models arch/x86/kernel/alternative.c:alternative_instructions (6.1).
func alternativeInstructions61(p *Patcher, t *Tables) error {
	if err := p.ApplyParavirt(t.Para); err != nil {
		return err
	}
	if err := p.ApplyRetpolines(t.Retpolines); err != nil {
		return err
	}
	if err := p.ApplyReturns(t.Returns); err != nil {
		return err
	}
	return p.ApplyAlternatives(t.Alternatives)
}

// text returns the n bytes at addr or an error naming the site.
func (p *Patcher) text(what string, addr uint64, n int) ([]byte, error) {
	b := p.Mem.Text(addr, n)
	if len(b) < n {
		return nil, fmt.Errorf("%s site %#x (+%d bytes): %w", what, addr, n, ErrUnmapped)
	}
	return b, nil
}

// decodeAt decodes the live instruction at addr (insn_decode_kernel).
func (p *Patcher) decodeAt(addr uint64) (x86.Insn, error) {
	return p.model().Insn.DecodeKernel(nil, p.Mem.Text(addr, 15))
}

// textPokeEarly writes buf at dst (already bounds-checked) and records the
// site.
//
// Models arch/x86/kernel/alternative.c:text_poke_early (a memcpy; the
// sync_core and irq masking have no effect on the model).
func (p *Patcher) textPokeEarly(kind SiteKind, addr uint64, dst, buf []byte, action string) {
	if p.Record {
		p.Sites = append(p.Sites, Site{Kind: kind, Addr: addr, Before: bytes.Clone(dst[:len(buf)]), After: bytes.Clone(buf), Action: action})
	}
	copy(dst, buf)
}

func (p *Patcher) record(kind SiteKind, addr uint64, b []byte, action string) {
	if p.Record {
		p.Sites = append(p.Sites, Site{Kind: kind, Addr: addr, Before: bytes.Clone(b), After: bytes.Clone(b), Action: action})
	}
}

// x86Nops is x86_nops[1..11] (arch/x86/include/asm/nops.h, 64-bit);
// 6.1 stops at 8 (ASM_NOP_MAX, Model.NopMax).
var x86Nops = [12][]byte{
	nil,
	{0x90},
	{0x66, 0x90},
	{0x0f, 0x1f, 0x00},
	{0x0f, 0x1f, 0x40, 0x00},
	{0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00},
	{0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00},
	{0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
	{0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
}

// ASMNopMax is ASM_NOP_MAX: the longest kernel NOP.
const ASMNopMax = 8

// AddNops fills b with kernel NOPs, longest first (8-byte NOPs then the
// remainder).
//
// Models arch/x86/kernel/alternative.c:add_nops.
func AddNops(b []byte) {
	for len(b) > 0 {
		n := min(len(b), ASMNopMax)
		copy(b, x86Nops[n])
		b = b[n:]
	}
}

// Nop returns a copy of x86_nops[n], 1 <= n <= 11.
func Nop(n int) []byte { return bytes.Clone(x86Nops[n]) }
