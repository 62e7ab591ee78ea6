package synth

import (
	"errors"
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/image"
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
// receives their instruction boundaries and padding.
func AddProbeTargets(k *image.Kernel, truth *Truth, n int, traced bool, seed uint64) ([]image.Symbol, error) {
	return addProbeTargets(k, truth, n, traced, PaddingToolchain)
}

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
	stride := alignUp(size, funcAlign)

	start := alignUp(core.End(), funcAlign)
	end := start + uint64(n)*stride
	// The space after the core text must be free up to the next symbol or region.
	limit := ^uint64(0)
	for _, s := range k.Symbols {
		// Zero-size markers at the end of text (_etext,
		// __indirect_thunk_end) occupy nothing.
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
	if end > limit {
		return nil, cfgErr("probe-targets", "%d targets need %d bytes after the core text, only %d are free", n, end-core.End(), limit-core.End())
	}
	counter := end // a counter word just past the targets, in the model's gap
	grown := make([]byte, end-core.Start)
	copy(grown, core.Bytes)
	fill(grown[len(core.Bytes):], opINT3)

	syms := make([]image.Symbol, n)
	reg := &image.Region{Start: core.Start, Bytes: grown}
	for i := 0; i < n; i++ {
		a := start + uint64(i)*stride
		if mc, ok := tb.write(grown[a-core.Start:], a, fentry, retThunk, counter); ok {
			k.McountLocs = append(k.McountLocs, mc)
		}
		syms[i] = image.Symbol{Name: ProbeTargetName(i), Addr: a, Size: size, Type: 't'}
		ft := tb.pad(reg, syms[i].Name, a, padFill(padding, i == n-1, FillLinkerINT3))
		if truth != nil {
			truth.Funcs = append(truth.Funcs, ft)
		}
	}
	core.Bytes = grown

	// Symbols: move _etext past the targets and insert them in order.
	all := make([]image.Symbol, 0, len(k.Symbols)+n)
	for _, s := range k.Symbols {
		if s.Name == "_etext" && s.Size == 0 {
			s.Addr = end
		}
		all = append(all, s)
	}
	all = append(all, syms...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].Addr < all[j].Addr })
	k.Symbols = all
	sort.Slice(k.McountLocs, func(i, j int) bool { return k.McountLocs[i] < k.McountLocs[j] })
	return syms, nil
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
	ft := t.truth(name, a)
	size := uint64(len(t.code))
	padAfter(&ft, reg, int(alignUp(size, funcAlign)-size), f)
	return ft
}
