package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/x86"
)

// ProbeTargetName is the name of the i-th generated probe target (0-based).
func ProbeTargetName(i int) string { return fmt.Sprintf("kprobe_many_func_%d", i) }

// AddProbeTargets appends n small generated functions to the core text of
// k, like the kernel's batch kprobe sample builds them into vmlinux
// (P13 in docs/series.md), as gcc compiles them (targetBody). They form one
// object, kprobes_many.o: gas NOPs pad each to the next 16-byte boundary,
// and the linker's int3 fill separates the object from the text before
// it. They add no jump-label, static-call or bug sites. _etext moves past
// them, since they are part of vmlinux's text. truth, when non-nil,
// receives their instruction boundaries and padding. Where they go is
// samplePlace's rule; with CONFIG_CALL_PADDING each is preceded by its
// __pfx_ symbol and 16 NOPs, as gcc's -fpatchable-function-entry emits
// them.
func AddProbeTargets(k *image.Kernel, truth *Truth, n int, traced bool, seed uint64) ([]image.Symbol, error) {
	return addProbeTargets(k, truth, n, traced, PaddingToolchain)
}

// opNOP is the one-byte NOP gcc's -fpatchable-function-entry emits.
const opNOP = 0x90

// PfxName is the name of the call-padding symbol objtool gives the NOPs
// in front of function name (CONFIG_CALL_PADDING): "__pfx_" + name.
func PfxName(name string) string { return "__pfx_" + name }

func addProbeTargets(k *image.Kernel, truth *Truth, n int, traced bool, padding Padding) ([]image.Symbol, error) {
	if n < 0 {
		return nil, cfgErr("probe-targets", "must not be negative (got %d)", n)
	}
	core := k.CoreText()
	if core == nil {
		return nil, fmt.Errorf("probe targets: the image has no core text")
	}
	find := func(name string) (uint64, bool) {
		if s := k.SymbolsByName(name); len(s) > 0 {
			return s[0].Addr, true
		}
		return 0, false
	}
	if _, ok := find(ProbeTargetName(0)); ok {
		return nil, fmt.Errorf("probe targets: the image already has %s", ProbeTargetName(0))
	}
	var fentry, retThunk uint64
	if traced {
		a, ok := find("__fentry__")
		if !ok {
			return nil, fmt.Errorf("probe targets: traced targets need a __fentry__ symbol, the image has none")
		}
		fentry = a
	}
	thunkRet := k.Config.RetThunk && !k.Config.ReturnsPatched
	if thunkRet {
		a, ok := find("__x86_return_thunk")
		if !ok {
			return nil, fmt.Errorf("probe targets: unpatched return thunks need __x86_return_thunk, the image has none")
		}
		retThunk = a
	}

	tb := newTargetBody(k.Config.IBT, traced, k.Config.RetThunk, k.Config.ReturnsPatched)
	size := uint64(len(tb.code))
	// CONFIG_FUNCTION_ALIGNMENT (16 when the image does not say), and
	// with CONFIG_CALL_PADDING the FUNCTION_PADDING_BYTES (= the
	// alignment without CFI_CLANG) of NOPs in front of every function.
	align := uint64(funcAlign)
	if a := k.Config.FunctionAlignment; a > 0 && a&(a-1) == 0 {
		align = uint64(a)
	}
	var prefix uint64
	if k.Config.CallPadding {
		prefix = align
	}
	stride := prefix + alignUp(size, align)

	pl, err := samplePlace(k, core, uint64(n)*stride, align)
	if err != nil {
		return nil, cfgErr("probe-targets", "%d targets: %v", n, err)
	}
	if pl.delta != 0 {
		if err := makeRoom(k, pl.limit, pl.delta); err != nil {
			return nil, fmt.Errorf("probe targets: %v", err)
		}
		k.Notes = append(k.Notes, fmt.Sprintf("the sample's %d functions (%d bytes from %#x) need more room than .text leaves before %#x: everything from there on (.rodata, .data, init text, ...) is moved up by %#x in the model's view, and the moved text's rel32 and RIP-relative references to the text that stays are relocated",
			n, uint64(n)*stride, pl.start, pl.limit, pl.delta))
	}
	start, end := pl.start, pl.start+uint64(n)*stride
	counter := end // a counter word just past the targets, in the model's gap
	grown := make([]byte, pl.coreEnd-core.Start)
	copy(grown, core.Bytes)
	fill(grown[len(core.Bytes):], opINT3)

	syms := make([]image.Symbol, 0, n) // the targets
	var pfxs []image.Symbol            // their __pfx_ symbols
	reg := &image.Region{Start: core.Start, Bytes: grown}
	for i := 0; i < n; i++ {
		p := start + uint64(i)*stride
		a := p + prefix
		if prefix != 0 {
			// gcc's -fpatchable-function-entry=16,16: single-byte NOPs
			// before the entry, which objtool names __pfx_<func>.
			fill(grown[p-core.Start:a-core.Start], opNOP)
			pfx := image.Symbol{Name: PfxName(ProbeTargetName(i)), Addr: p, Size: prefix, Type: 't'}
			pfxs = append(pfxs, pfx)
			if truth != nil {
				truth.Funcs = append(truth.Funcs, pfxTruth(pfx))
			}
		}
		if mc, ok := tb.write(grown[a-core.Start:], a, fentry, retThunk, counter); ok {
			k.McountLocs = append(k.McountLocs, mc)
		}
		sym := image.Symbol{Name: ProbeTargetName(i), Addr: a, Size: size, Type: 't'}
		syms = append(syms, sym)
		ft := tb.padTo(reg, sym.Name, a, align, padFill(padding, i == n-1, FillLinkerINT3))
		if truth != nil {
			truth.Funcs = append(truth.Funcs, ft)
		}
	}
	core.Bytes = grown

	// Symbols: move _etext to the end of the text and insert the targets
	// in order.
	all := make([]image.Symbol, 0, len(k.Symbols)+len(syms)+len(pfxs))
	for _, s := range k.Symbols {
		if s.Name == "_etext" && s.Size == 0 && s.Addr < pl.coreEnd {
			s.Addr = pl.etext
		}
		all = append(all, s)
	}
	all = append(append(all, pfxs...), syms...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Addr < all[j].Addr })
	k.Symbols = all
	sort.Slice(k.McountLocs, func(i, j int) bool { return k.McountLocs[i] < k.McountLocs[j] })
	return syms, nil
}

// placement is where the sample's object goes (samplePlace).
type placement struct {
	start   uint64 // first byte of the object (its first __pfx_ or function)
	coreEnd uint64 // the core text region's end afterwards
	etext   uint64 // _etext afterwards
	limit   uint64 // the first thing after the text, which moves by delta
	delta   uint64 // how far what follows the text moves (0: it stays)
}

// hpage is HPAGE_SIZE (PMD_SIZE), the alignment of .rodata
// (X86_ALIGN_RODATA_BEGIN) and of 6.12's end of .text
// (ALIGN_ENTRY_TEXT_END).
const hpage = 2 << 20

// samplePlace decides where an object of need bytes (the sample's
// functions) goes in k's core text, the way the sample's kprobes_many.o
// has room in vmlinux's .text.
//
// The linker puts kprobes_many.o among .text's other objects (TEXT_TEXT)
// and everything after it, up to the end of the image, moves up. The
// model cannot relink the text, so it puts the object at the end of the
// text instead, where it is the last object the linker placed:
//
//   - When the core text ends at _etext with free space after it (6.1,
//     7.3, synthetic images: _etext is the end of the last text section
//     and .rodata starts at the next 2 MiB boundary, X86_ALIGN_RODATA_BEGIN),
//     the object follows the core text at the next function alignment, as
//     in kpsim before 6.12, and _etext moves past it.
//   - When something starts right at _etext (6.12: ALIGN_ENTRY_TEXT_END
//     pads .text itself to a 2 MiB boundary, _etext is that boundary and
//     .rodata begins there, so __start_rodata and the first rodata objects
//     share _etext's address; System.map-6.12.117+deb13-amd64 has
//     srso_alias_return_thunk at ffffffff81f0410b, then int3 fill, then
//     _etext = __start_rodata = ffffffff82000000), the object goes into
//     that padding after the last function, which must be the linker's
//     int3 fill and free of symbols; _etext stays.
//
// When the object needs more room than there is before what follows the
// text (the sample's 50,000 functions are 1.6 MB, 2.4 MB with call
// padding; 6.12 has 1.0 MB of padding, 7.3 1.0 MB before .rodata), what
// follows moves up, only in the model's view (makeRoom), by whole 2 MiB
// pages, as the linker would move it: .text grows, and _etext with it,
// to the new start of what follows when .text was padded to it (6.12),
// else to the end of the object. On 6.1 the sample fits and nothing moves.
func samplePlace(k *image.Kernel, core *image.Region, need, align uint64) (placement, error) {
	// limit: the first symbol or region at or after the core text's end.
	// Zero-size markers at the end of text (_etext, __indirect_thunk_end)
	// occupy nothing.
	limit := ^uint64(0)
	for _, s := range k.Symbols {
		if s.Addr == core.End() && s.Size == 0 {
			continue
		}
		if s.Addr >= core.End() && s.Addr < limit {
			limit = s.Addr
		}
	}
	for _, r := range k.Regions {
		if r != core && r.Start >= core.End() && r.Start < limit {
			limit = r.Start
		}
	}
	pl := placement{limit: limit}
	padded := limit == core.End()
	if !padded {
		pl.start = alignUp(core.End(), align)
	} else {
		// The end of the last symbol in the core text: the padding after
		// it must be the linker's int3 fill.
		last := core.Start
		for _, s := range k.Symbols {
			if s.Addr >= core.Start && s.Addr < core.End() {
				last = max(last, s.Addr+s.Size)
			}
		}
		pl.start = alignUp(last, align)
		for a := pl.start; a < core.End(); a++ {
			if core.Bytes[a-core.Start] != opINT3 {
				return pl, fmt.Errorf("the padding at the end of the text is not int3 fill at %#x", a)
			}
		}
	}
	end := pl.start + need
	if end > limit {
		pl.delta = alignUp(end-limit, hpage)
	}
	pl.coreEnd, pl.etext = max(end, core.End()), end
	if padded {
		pl.coreEnd, pl.etext = limit+pl.delta, limit+pl.delta
	}
	return pl, nil
}

// makeRoom moves everything of vmlinux at or above limit up by delta bytes,
// in the model's view only, so that .text can grow into [limit,
// limit+delta): what follows the text (.rodata, .data, init text, .bss ...)
// keeps its order and its alignment modulo 2 MiB, as when the linker lays
// out a larger .text. It moves symbols (but _etext, which addProbeTargets
// sets), text regions, section ranges and the addresses in every table
// (jump entries, static-call sites and their keys, bug and exception
// entries, the kprobe blacklist, __mcount_loc, return sites, pv_ops),
// modules' references to vmlinux static keys and static calls included.
//
// Code is not relinked, with one exception that keeps the moved text
// consistent with itself: in the moved text regions (.init.text,
// .exit.text) every rel32 branch or call and every RIP-relative operand
// whose target stays below limit (the core text: __fentry__,
// __x86_return_thunk, the static-call trampolines, the called functions) is
// adjusted by -delta, as the linker's relocation would have computed it.
// References from the core text into what moved (RIP-relative data,
// absolute addresses) keep their old values: the model reads no data.
func makeRoom(k *image.Kernel, limit, delta uint64) error {
	top := limit
	for _, s := range k.Symbols {
		top = max(top, s.Addr+1)
	}
	for _, r := range k.Regions {
		top = max(top, r.End())
	}
	in := func(a uint64) bool { return a >= limit && a < top }
	mv := func(a uint64) uint64 {
		if in(a) {
			return a + delta
		}
		return a
	}
	// Everything is copied before it changes: the image's slices and
	// regions may be shared with a cached copy.
	d := x86.For(k.Config.Gen)
	bottom := limit
	for _, r := range k.Regions {
		bottom = min(bottom, r.Start)
	}
	stays := func(a uint64) bool { return a >= bottom && a < limit }
	regions := make([]*image.Region, len(k.Regions))
	for i, r := range k.Regions {
		regions[i] = r
		if in(r.Start) {
			nr := *r
			nr.Bytes = append([]byte(nil), r.Bytes...)
			if err := relocateText(k, d, &nr, stays, delta); err != nil {
				return err
			}
			nr.Start += delta
			regions[i] = &nr
		}
	}
	k.Regions = regions
	syms := append([]image.Symbol(nil), k.Symbols...)
	for i := range syms {
		if syms[i].Name != "_etext" {
			syms[i].Addr = mv(syms[i].Addr)
		}
	}
	k.Symbols = syms
	ranges := append([]image.Range(nil), k.Ranges...)
	for i := range ranges {
		switch r := &ranges[i]; {
		case in(r.Start):
			r.Start, r.End = r.Start+delta, r.End+delta
		case r.End > limit && r.End <= top:
			r.End += delta
		}
	}
	k.Ranges = ranges
	jumps := func(e []image.JumpEntry) []image.JumpEntry {
		e = append([]image.JumpEntry(nil), e...)
		for i := range e {
			e[i].Code, e[i].Target, e[i].Key = mv(e[i].Code), mv(e[i].Target), mv(e[i].Key)
		}
		return e
	}
	calls := func(e []image.StaticCallSite) []image.StaticCallSite {
		e = append([]image.StaticCallSite(nil), e...)
		for i := range e {
			e[i].Addr, e[i].Key = mv(e[i].Addr), mv(e[i].Key)
		}
		return e
	}
	addrs := func(a []uint64) []uint64 {
		a = append([]uint64(nil), a...)
		for i := range a {
			a[i] = mv(a[i])
		}
		return a
	}
	k.JumpEntries = jumps(k.JumpEntries)
	k.StaticCallSites = calls(k.StaticCallSites)
	k.BugEntries = append([]image.BugEntry(nil), k.BugEntries...)
	for i := range k.BugEntries {
		k.BugEntries[i].Addr = mv(k.BugEntries[i].Addr)
	}
	k.ExTable = append([]image.ExEntry(nil), k.ExTable...)
	for i := range k.ExTable {
		k.ExTable[i].Insn, k.ExTable[i].Fixup = mv(k.ExTable[i].Insn), mv(k.ExTable[i].Fixup)
	}
	k.Blacklist, k.McountLocs, k.ReturnSites = addrs(k.Blacklist), addrs(k.McountLocs), addrs(k.ReturnSites)
	if k.PVOps != nil {
		k.PVOps = addrs(k.PVOps)
	}
	mods := make([]*image.Module, len(k.Modules))
	for i, m := range k.Modules {
		// A module's sites are its own; the keys it uses may be vmlinux's.
		nm := *m
		nm.JumpEntries, nm.StaticCallSites = jumps(m.JumpEntries), calls(m.StaticCallSites)
		mods[i] = &nm
	}
	k.Modules = mods
	return nil
}

// relocateText adjusts, in text region r about to move by delta, the rel32
// branches and calls and the RIP-relative operands whose targets are in
// the part of vmlinux that stays (stays reports it: the core text and
// what precedes limit; not an address outside the image, which no
// relocation produced). It sweeps the region from each symbol
// to the next one (not to the symbol's size: a debug vmlinux has init
// functions without symbols of their own after a sized one), restarting
// at every symbol and stopping a sweep where the decoder does.
func relocateText(k *image.Kernel, d *x86.Decoder, r *image.Region, stays func(uint64) bool, delta uint64) error {
	starts := []uint64{r.Start}
	for _, s := range k.Symbols {
		if r.Contains(s.Addr) && s.Addr != starts[len(starts)-1] {
			starts = append(starts, s.Addr)
		}
	}
	starts = append(starts, r.End())
	for i := 0; i+1 < len(starts); i++ {
		code := r.Bytes[starts[i]-r.Start : starts[i+1]-r.Start]
		for off := 0; off < len(code); {
			in, err := d.DecodeKernel(nil, code[off:])
			if err != nil {
				break // truncated at the next symbol, or not code
			}
			at := starts[i] + uint64(off)
			next := at + uint64(in.Len)
			var field int
			var target uint64
			switch {
			case in.HasRel && in.ImmLen == 4:
				field, target = in.Len-4, next+uint64(in.Rel)
			case in.RIPRelative() && in.DispLen == 4:
				field, target = in.Len-in.ImmLen-4, next+uint64(int64(in.Disp))
			}
			if field != 0 && stays(target) {
				v := int64(int32(binary.LittleEndian.Uint32(code[off+field:]))) - int64(delta)
				if v != int64(int32(v)) {
					return fmt.Errorf("%#x: moving %s by %#x puts its target %#x out of rel32 reach", at, r.Name, delta, target)
				}
				binary.LittleEndian.PutUint32(code[off+field:], uint32(int32(v)))
			}
			off += in.Len
		}
	}
	return nil
}

// pfxTruth is the truth of a __pfx_ symbol: its NOPs.
func pfxTruth(s image.Symbol) FuncTruth {
	ft := FuncTruth{Name: s.Name, Addr: s.Addr, Size: uint32(s.Size), Zone: ZoneProbeTarget}
	for i := uint32(0); i < ft.Size; i++ {
		ft.Insns = append(ft.Insns, i)
	}
	return ft
}

// AddSample appends the batch sample's targets to a loaded kernel for a
// run that probes n of them: SampleSize(c, n) functions, as AddProbeTargets
// lays them out. Errors name --sample-functions.
func AddSample(k *image.Kernel, c Config, n int, traced bool, seed uint64) error {
	if c.SampleFunctions < 0 || c.SampleFunctions > 1_000_000 {
		return cfgErr("sample-functions", "must be in [0, 1000000] (got %d)", c.SampleFunctions)
	}
	if err := c.Padding.validate(); err != nil {
		return err
	}
	_, err := addProbeTargets(k, nil, SampleSize(c, n), traced, c.Padding)
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Flag == "probe-targets" {
		return cfgErr("sample-functions", "%s", ce.Msg)
	}
	return err
}

// targetBody is the code of one generated probe target, what gcc 12 emits
// with the kernel's flags for the sample's
//
//	noinline void kprobe_many_func_N(void)
//	{ WRITE_ONCE(counter, READ_ONCE(counter) + 1); }
//
// (TestTargetsMatchGCC compiles it):
//
//	[endbr64] [call __fentry__] mov X(%rip),%eax; add $1,%eax; mov %eax,X(%rip); RET
//
// where RET is "jmp __x86_return_thunk" with CONFIG_RETHUNK (no int3
// after it), "ret; int3 x4" once apply_returns has patched it, and "ret;
// int3" (SLS) without RETHUNK.
type targetBody struct {
	code                                 []byte
	offs                                 []uint32
	traced, thunkRet                     bool
	fentryOff, loadOff, storeOff, retOff int
}

func newTargetBody(ibt, traced, retThunk, returnsPatched bool) *targetBody {
	thunkRet := retThunk && !returnsPatched
	t := &targetBody{traced: traced, thunkRet: thunkRet}
	add := func(b ...byte) int {
		off := len(t.code)
		t.offs = append(t.offs, uint32(off))
		t.code = append(t.code, b...)
		return off
	}
	if ibt {
		add(bENDBR64...)
	}
	if traced {
		t.fentryOff = add(opCALL, 0, 0, 0, 0)
	}
	t.loadOff = add(0x8b, 0x05, 0, 0, 0, 0)  // mov X(%rip),%eax
	add(0x83, 0xc0, 0x01)                    // add $1,%eax
	t.storeOff = add(0x89, 0x05, 0, 0, 0, 0) // mov %eax,X(%rip)
	ret := bRET
	switch {
	case thunkRet:
		ret = []byte{opJMP32, 0, 0, 0, 0}
	case retThunk:
		ret = bRETPatched
	}
	t.retOff = len(t.code)
	for _, o := range retOffs(ret) {
		t.offs = append(t.offs, uint32(t.retOff)+o)
	}
	t.code = append(t.code, ret...)
	return t
}

// write emits one target at address a into b, resolving its relative
// operands; it returns the __fentry__ call site when the target is traced.
func (t *targetBody) write(b []byte, a, fentry, retThunk, counter uint64) (uint64, bool) {
	copy(b, t.code)
	putRel32(b[t.loadOff+2:], a+uint64(t.loadOff)+6, counter)
	putRel32(b[t.storeOff+2:], a+uint64(t.storeOff)+6, counter)
	if t.thunkRet {
		putRel32(b[t.retOff+1:], a+uint64(t.retOff)+5, retThunk)
	}
	if t.traced {
		putRel32(b[t.fentryOff+1:], a+uint64(t.fentryOff)+5, fentry)
		return a + uint64(t.fentryOff), true
	}
	return 0, false
}

func (t *targetBody) truth(name string, a uint64) FuncTruth {
	return FuncTruth{Name: name, Addr: a, Size: uint32(len(t.code)), Zone: ZoneProbeTarget, Insns: t.offs, Traced: t.traced}
}

// pad writes the gap after the target at a (in reg) up to the next
// 16-byte boundary with f (padFill) and returns the target's truth.
func (t *targetBody) pad(reg *image.Region, name string, a uint64, f Fill) FuncTruth {
	return t.padTo(reg, name, a, funcAlign, f)
}

// padTo is pad to the next align boundary (CONFIG_FUNCTION_ALIGNMENT).
func (t *targetBody) padTo(reg *image.Region, name string, a, align uint64, f Fill) FuncTruth {
	ft := t.truth(name, a)
	size := uint64(len(t.code))
	padAfter(&ft, reg, int(alignUp(size, align)-size), f)
	return ft
}
