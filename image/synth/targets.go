package synth

import (
	"fmt"
	"sort"

	"github.com/kpsim/kpsim/image"
)

// ProbeTargetName is the name of the i-th generated probe target (0-based).
func ProbeTargetName(i int) string { return fmt.Sprintf("kprobe_many_func_%d", i) }

// AddProbeTargets appends n small generated functions to the core text of
// k, like the kernel's batch kprobe sample builds them into vmlinux
// (kprobes.md §3 P13): each is
//
//	[endbr64] [call __fentry__] mov X(%rip),%eax; add $1,%eax; mov %eax,X(%rip); ret; int3
//
// (the return is "jmp __x86_return_thunk; int3" when the image's returns
// are unpatched thunks). They add no jump-label, static-call or bug sites.
// _etext moves past them, since they are part of vmlinux's text. truth,
// when non-nil, receives their instruction boundaries.
func AddProbeTargets(k *image.Kernel, truth *Truth, n int, traced bool, seed uint64) ([]image.Symbol, error) {
	if n < 0 {
		return nil, cfgErr("probe-targets", "must not be negative (got %d)", n)
	}
	core := k.CoreText()
	if core == nil {
		return nil, fmt.Errorf("probe targets: the image has no core text")
	}
	for _, s := range k.Symbols {
		if s.Name == ProbeTargetName(0) {
			return nil, fmt.Errorf("probe targets: the image already has %s", s.Name)
		}
	}
	find := func(name string) (uint64, bool) {
		for _, s := range k.Symbols {
			if s.Name == name {
				return s.Addr, true
			}
		}
		return 0, false
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

	var body []byte
	var offs []uint32
	add := func(b ...byte) {
		offs = append(offs, uint32(len(body)))
		body = append(body, b...)
	}
	if k.Config.IBT {
		add(bENDBR64...)
	}
	fentryOff := len(body)
	if traced {
		add(opCALL, 0, 0, 0, 0)
	}
	movLoad := len(body)
	add(0x8b, 0x05, 0, 0, 0, 0) // mov X(%rip),%eax
	add(0x83, 0xc0, 0x01)       // add $1,%eax
	movStore := len(body)
	add(0x89, 0x05, 0, 0, 0, 0) // mov %eax,X(%rip)
	retOff := len(body)
	if thunkRet {
		add(opJMP32, 0, 0, 0, 0)
	} else {
		add(0xc3)
	}
	add(opINT3)
	size := uint64(len(body))
	stride := alignUp(size, funcAlign)

	start := alignUp(core.End(), funcAlign)
	end := start + uint64(n)*stride
	// The space after the core text must be free up to the next symbol or region.
	limit := ^uint64(0)
	for _, s := range k.Symbols {
		if s.Addr >= core.End() && s.Name != "_etext" && s.Addr < limit {
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
	for i := 0; i < n; i++ {
		a := start + uint64(i)*stride
		b := grown[a-core.Start:]
		copy(b, body)
		if traced {
			putRel32(b[fentryOff+1:], a+uint64(fentryOff)+5, fentry)
			k.McountLocs = append(k.McountLocs, a+uint64(fentryOff))
		}
		putRel32(b[movLoad+2:], a+uint64(movLoad)+6, counter)
		putRel32(b[movStore+2:], a+uint64(movStore)+6, counter)
		if thunkRet {
			putRel32(b[retOff+1:], a+uint64(retOff)+5, retThunk)
		}
		syms[i] = image.Symbol{Name: ProbeTargetName(i), Addr: a, Size: size, Type: 't'}
		if truth != nil {
			truth.Funcs = append(truth.Funcs, FuncTruth{Name: syms[i].Name, Addr: a, Size: uint32(size),
				Zone: ZoneProbeTarget, Insns: offs, Traced: traced})
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
