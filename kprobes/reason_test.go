package kprobes_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kprobes"
	"github.com/kpsim/kpsim/scenarios"
	"github.com/kpsim/kpsim/sim"
	"github.com/kpsim/kpsim/x86"
)

// The reason tests run on one small synthetic image with eight probe
// targets, three of them rewritten so they hold the instruction a case
// needs. A target (no IBT, untraced) is
//
//	+0 mov X(%rip),%eax (6)  +6 add $1,%eax (3)  +9 mov %eax,X(%rip) (6)  +15 ret  +16 int3
const (
	tgtIndirectCall = 2 // +0: call *X(%rip) (ff 15 disp32)
	tgtJcc          = 3 // +9: jne +4; nopl 0x0(%rax)
	tgtJumpIn       = 4 // +9: jmp to +1; nopl 0x0(%rax)
)

var (
	reasonImageOnce sync.Once
	reasonImage     *image.Kernel
	reasonImageErr  error
	// cloneBase is a NOKPROBE_SYMBOL function; cloneFuncs are two other
	// functions renamed to its compiler clones.
	cloneBase  string
	cloneFuncs []string
	// cfiFunc is a plain function renamed to a __pfx_ preamble symbol.
	cfiFunc string
)

func smallConfig(seed uint64) synth.Config { return fixture.SmallConfig(seed) }

func testImage(t testing.TB) *image.Kernel {
	t.Helper()
	reasonImageOnce.Do(func() {
		cfg := smallConfig(11)
		cfg.ProbeTargets = 8
		k, _, err := synth.Generate(cfg)
		if err != nil {
			reasonImageErr = err
			return
		}
		patch := func(i int, off uint64, b ...byte) {
			a := k.SymbolsByName(synth.ProbeTargetName(i))[0].Addr + off
			copy(k.Text(a, len(b)), b)
		}
		patch(tgtIndirectCall, 0, 0xff, 0x15)                   // mov X(%rip),%eax -> call *X(%rip)
		patch(tgtJcc, 9, 0x75, 0x04, 0x0f, 0x1f, 0x40, 0x00)    // jne +15; nopl
		patch(tgtJumpIn, 9, 0xeb, 0xf6, 0x0f, 0x1f, 0x40, 0x00) // jmp +1; nopl
		// Two plain functions become foo.part.0 and foo.cold of a
		// NOKPROBE_SYMBOL function foo.
		base := plainFunctions(k)
		for _, a := range k.Blacklist {
			if s := k.LookupFunction(a); s != nil && s.Addr == a && !strings.Contains(s.Name, ".") && len(k.SymbolsByName(s.Name)) == 1 {
				cloneBase = s.Name
				break
			}
		}
		for i, suffix := range []string{".part.0", ".cold"} {
			s := base[len(base)-1-i]
			for j := range k.Symbols {
				if k.Symbols[j].Addr == s.Addr && k.Symbols[j].Name == s.Name {
					k.Symbols[j].Name = cloneBase + suffix
				}
			}
			cloneFuncs = append(cloneFuncs, cloneBase+suffix)
		}
		pfx := base[len(base)-3]
		for j := range k.Symbols {
			if k.Symbols[j].Addr == pfx.Addr && k.Symbols[j].Name == pfx.Name {
				k.Symbols[j].Name = "__pfx_" + pfx.Name
				cfiFunc = k.Symbols[j].Name
			}
		}
		reasonImage = k
	})
	if reasonImageErr != nil {
		t.Fatal(reasonImageErr)
	}
	if cloneBase == "" {
		t.Fatal("the image has no NOKPROBE_SYMBOL function to clone")
	}
	return reasonImage
}

// plainFunctions: core-text functions outside every blacklisted range,
// not NOKPROBE_SYMBOL, with a unique name that has no '.'.
func plainFunctions(k *image.Kernel) []image.Symbol {
	black := map[uint64]bool{}
	for _, a := range k.Blacklist {
		black[a] = true
	}
	var out []image.Symbol
	core := k.CoreText()
	for _, f := range k.Functions() {
		if f.Size == 0 || black[f.Addr] || !core.Contains(f.Addr) || strings.Contains(f.Name, ".") || strings.HasPrefix(f.Name, "kprobe_many_func_") {
			continue
		}
		special := false
		for _, r := range k.Ranges {
			if r.Contains(f.Addr) {
				special = true
			}
		}
		if !special && len(k.SymbolsByName(f.Name)) == 1 {
			out = append(out, f)
		}
	}
	return out
}

func boot(t *testing.T, k *image.Kernel, sw sim.Switches, faults string) *kprobes.Kprobes {
	t.Helper()
	f, err := sim.ParseFaults(faults)
	if err != nil {
		t.Fatal(err)
	}
	b, err := scenarios.Boot(k, sw, 8, f)
	if err != nil {
		t.Fatal(err)
	}
	return b.KP
}

func bootB(b *testing.B, k *image.Kernel, f *sim.Faults) *kprobes.Kprobes {
	b.Helper()
	m, err := scenarios.Boot(k, 0, 8, f)
	if err != nil {
		b.Fatal(err)
	}
	return m.KP
}

func target(k *image.Kernel, i int) uint64 { return k.SymbolsByName(synth.ProbeTargetName(i))[0].Addr }

// inPlain returns a plain function holding addr, or nil.
func inPlain(k *image.Kernel, plain map[uint64]bool, addr uint64) *image.Symbol {
	f := k.LookupFunction(addr)
	if f == nil || !plain[f.Addr] {
		return nil
	}
	return f
}

func jumpSiteAt(k *image.Kernel, addr uint64) (string, bool) {
	for _, e := range k.JumpEntries {
		b := k.Text(e.Code, 5)
		kind, size := "", 0
		switch {
		case bytes.Equal(b, x86.NOP5[:]):
			kind, size = "NOP5", 5
		case bytes.Equal(b[:2], x86.NOP2[:]):
			kind, size = "NOP2", 2
		case b[0] == 0xe9:
			kind, size = "JMP32", 5
		case b[0] == 0xeb:
			kind, size = "JMP8", 2
		}
		if e.Code <= addr && addr < e.Code+uint64(size) {
			return fmt.Sprintf("%s site at +%d", kind, e.Code-k.LookupFunction(addr).Addr), true
		}
	}
	return "", false
}

type reasonCase struct {
	name string
	// probes are registered in order, with the optimizer drained after
	// each; the last one is checked.
	probes []*kprobes.Kprobe
	faults string
	// prep changes the image before boot and returns the undo.
	prep      func() func()
	wantErr   error
	wantState kprobes.State
	check     string
	detail    string // regexp, anchored
	// other, when set, is checked instead of the last probe (a probe
	// whose state a later registration changed).
	other *kprobes.Kprobe
}

func reasonCases(t *testing.T, k *image.Kernel) []reasonCase {
	plainList := plainFunctions(k)
	plain := map[uint64]bool{}
	for _, f := range plainList {
		plain[f.Addr] = true
	}
	mcount := map[uint64]bool{}
	for _, a := range k.McountLocs {
		mcount[a] = true
	}
	var cs []reasonCase
	add := func(c reasonCase) { cs = append(cs, c) }

	// Reserved sites: the first candidate in a plain function whose
	// address nothing earlier in check_kprobe_address_safe refuses.
	for _, e := range k.JumpEntries {
		if f := inPlain(k, plain, e.Code); f != nil && !e.Init && !mcount[e.Code] {
			d, _ := jumpSiteAt(k, e.Code)
			add(reasonCase{name: "jump-label site", probes: []*kprobes.Kprobe{{Addr: e.Code}}, wantErr: kprobes.EINVAL,
				check: "check_kprobe_address_safe: jump_label_text_reserved", detail: regexp.QuoteMeta(d) + `( \(key .*\))?`})
			if b := k.Text(e.Code, 5); bytes.Equal(b, x86.NOP5[:]) {
				add(reasonCase{name: "inside a NOP5 jump-label site", probes: []*kprobes.Kprobe{{Addr: e.Code + 2}}, wantErr: kprobes.EINVAL,
					check: "check_kprobe_address_safe: jump_label_text_reserved", detail: regexp.QuoteMeta(d) + `( \(key .*\))?`})
			}
			break
		}
	}
	for _, s := range k.StaticCallSites {
		if f := inPlain(k, plain, s.Addr); f != nil && !s.Init && !mcount[s.Addr] {
			if _, jl := jumpSiteAt(k, s.Addr); jl {
				continue
			}
			kind := "call"
			if s.Tail {
				kind = `tail-call \(jmp\)`
			}
			add(reasonCase{name: "static-call site", probes: []*kprobes.Kprobe{{Addr: s.Addr}}, wantErr: kprobes.EINVAL,
				check: "check_kprobe_address_safe: static_call_text_reserved", detail: fmt.Sprintf(`%s site at \+%d( of static call .*)?`, kind, s.Addr-f.Addr)})
			break
		}
	}
	for _, b := range k.BugEntries {
		if f := inPlain(k, plain, b.Addr); f != nil && !mcount[b.Addr] {
			if _, jl := jumpSiteAt(k, b.Addr); jl {
				continue
			}
			kind := "BUG"
			if b.Flags&1 != 0 {
				kind = "WARN"
			}
			add(reasonCase{name: "bug site", probes: []*kprobes.Kprobe{{Addr: b.Addr}}, wantErr: kprobes.EINVAL,
				check: "check_kprobe_address_safe: find_bug", detail: fmt.Sprintf(`%s at \+%d \(.*\)`, kind, b.Addr-f.Addr)})
			break
		}
	}
	add(reasonCase{name: "NOKPROBE_SYMBOL function", probes: []*kprobes.Kprobe{{SymbolName: cloneBase}}, wantErr: kprobes.EINVAL,
		check: "check_kprobe_address_safe: within_kprobe_blacklist", detail: `blacklisted \(NOKPROBE_SYMBOL\)`})
	for _, name := range cloneFuncs {
		add(reasonCase{name: "clone " + name, probes: []*kprobes.Kprobe{{SymbolName: name}}, wantErr: kprobes.EINVAL,
			check:  "check_kprobe_address_safe: within_kprobe_blacklist",
			detail: regexp.QuoteMeta(fmt.Sprintf("blacklisted (NOKPROBE_SYMBOL) via its base name %s (%s cut at '.')", cloneBase, name))})
	}
	if r, ok := k.Range(image.RangeEntryText); ok {
		add(reasonCase{name: "entry text", probes: []*kprobes.Kprobe{{Addr: r.Start}}, wantErr: kprobes.EINVAL,
			check: "check_kprobe_address_safe: within_kprobe_blacklist", detail: `blacklisted \(entry text\)`})
	}
	if r, ok := k.Range(image.RangeKprobesText); ok {
		add(reasonCase{name: "kprobes text", probes: []*kprobes.Kprobe{{Addr: r.Start}}, wantErr: kprobes.EINVAL,
			check: "check_kprobe_address_safe: within_kprobe_blacklist", detail: `blacklisted \(\.kprobes\.text\)`})
	}
	if it := k.InitText(); it != nil {
		add(reasonCase{name: "freed init text", probes: []*kprobes.Kprobe{{Addr: it.Start + 1}}, wantErr: kprobes.EINVAL,
			check: "check_kprobe_address_safe: __module_text_address", detail: `in \.init\.text, which is freed .*`})
	}
	if len(k.Modules) > 0 {
		m := k.Modules[0]
		var s image.Symbol
		for _, f := range m.Symbols {
			if f.IsText() && f.Size > 0 && m.Text.Contains(f.Addr) {
				s = f
				break
			}
		}
		add(reasonCase{name: "module going away", probes: []*kprobes.Kprobe{{Addr: s.Addr}}, wantErr: kprobes.ENOENT,
			prep:  func() func() { st := m.State; m.State = image.ModuleGoing; return func() { m.State = st } },
			check: "check_kprobe_address_safe: try_module_get", detail: regexp.QuoteMeta("module " + m.Name + " is going away (MODULE_STATE_GOING)")})
	}
	add(reasonCase{name: "CFI preamble symbol", probes: []*kprobes.Kprobe{{SymbolName: cfiFunc}}, wantErr: kprobes.EINVAL,
		check: "check_kprobe_address_safe: is_cfi_preamble_symbol", detail: regexp.QuoteMeta(cfiFunc + " is a CFI/FineIBT preamble")})
	for _, m := range k.Modules {
		if m.Init != nil && m.State == image.ModuleLive {
			add(reasonCase{name: "module init text", probes: []*kprobes.Kprobe{{Addr: m.Init.Start}}, wantErr: kprobes.ENOENT,
				check: "check_kprobe_address_safe: within_module_init", detail: regexp.QuoteMeta("in module "+m.Name+"'s init text") + ".*"})
			break
		}
	}
	add(reasonCase{name: "unknown symbol", probes: []*kprobes.Kprobe{{SymbolName: "no_such_function"}}, wantErr: kprobes.ENOENT,
		check: "_kprobe_addr: kallsyms_lookup_name", detail: `no symbol "no_such_function" in vmlinux or any module`})
	add(reasonCase{name: "symbol and address", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0), Addr: target(k, 0)}}, wantErr: kprobes.EINVAL,
		check: "_kprobe_addr", detail: "both symbol_name and addr are set"})
	add(reasonCase{name: "mid-instruction offset", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0), Offset: 1}}, wantErr: kprobes.EILSEQ,
		check: "arch_prepare_kprobe: can_probe", detail: regexp.QuoteMeta("+1 is not an instruction boundary: the 6-byte mov at +0 spans it")})
	// Past the function end, register_kprobe probes the next symbol.
	stride := uint32(target(k, 1) - target(k, 0))
	add(reasonCase{name: "past the function end", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0), Offset: stride + 7}}, wantErr: kprobes.EILSEQ,
		check: "arch_prepare_kprobe: can_probe", detail: regexp.QuoteMeta("+7 is not an instruction boundary: the 3-byte add at +6 spans it")})
	add(reasonCase{name: "indirect call", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(tgtIndirectCall)}}, wantErr: kprobes.EOPNOTSUPP,
		check: "arch_copy_kprobe: prepare_emulation", detail: "indirect call through memory is not emulated"})
	add(reasonCase{name: "insn slot allocation", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0)}}, faults: "kprobe.insn_slot.alloc", wantErr: kprobes.ENOMEM,
		check: "arch_prepare_kprobe: get_insn_slot", detail: "no insn slot: .*"})
	// By name the second call fails in _kprobe_addr (p->addr is set now);
	// by address it reaches warn_kprobe_rereg.
	again := &kprobes.Kprobe{Addr: target(k, 0)}
	add(reasonCase{name: "registered twice", probes: []*kprobes.Kprobe{again, again}, wantErr: kprobes.EINVAL,
		check: "warn_kprobe_rereg: __get_valid_kprobe", detail: regexp.QuoteMeta("this struct kprobe is already registered at +0")})

	// Registered, not optimized.
	add(reasonCase{name: "optimized", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0)}}, wantState: kprobes.StateOptimized})
	add(reasonCase{name: "post handler", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0), HasPostHandler: true}}, wantState: kprobes.StateInt3,
		check: "optimize_kprobe", detail: `a probe at this address has a post_handler .*`})
	post := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(1), HasPostHandler: true}
	first := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(1)}
	add(reasonCase{name: "post handler joins an optprobe", probes: []*kprobes.Kprobe{first, post}, wantState: kprobes.StateInt3, other: first,
		check: "register_aggr_kprobe: add_new_kprobe", detail: `unoptimized: a probe with a post_handler joined .*`})
	add(reasonCase{name: "jump into the probed bytes", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(tgtJumpIn)}}, wantState: kprobes.StateInt3,
		check: "can_optimize", detail: regexp.QuoteMeta("jump into the probed bytes at +9 (jmp to +1)")})
	add(reasonCase{name: "jcc in the copied bytes", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(tgtJcc), Offset: 6}}, wantState: kprobes.StateInt3,
		check: "copy_optimized_instructions", detail: regexp.QuoteMeta("jcc at +9 is not boostable")})
	add(reasonCase{name: "optinsn slot allocation", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(5)}}, faults: "kprobe.optinsn_slot.alloc", wantState: kprobes.StateInt3,
		check: "arch_prepare_optimized_kprobe: get_optinsn_slot", detail: "no optinsn slot: .*"})
	add(reasonCase{name: "aggregator allocation", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(5)}}, faults: "kprobe.aggr.alloc", wantState: kprobes.StateInt3,
		check: "try_to_optimize_kprobe: alloc_aggr_kprobe", detail: "kzalloc of the optimized_kprobe failed"})
	// A probe at +9 inside the jump of an optprobe at +6 ([+6, +15)).
	outer := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(6), Offset: 6}
	add(reasonCase{name: "probe armed inside an optimized region", probes: []*kprobes.Kprobe{outer, {SymbolName: synth.ProbeTargetName(6), Offset: 9}},
		wantState: kprobes.StateInt3, other: outer,
		check: "__arm_kprobe: get_optimized_kprobe", detail: regexp.QuoteMeta("unoptimized: a probe was armed at +9 inside its jump [+6, +15)")})
	add(reasonCase{name: "optimized region over an armed probe", probes: []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(7), Offset: 9}, {SymbolName: synth.ProbeTargetName(7), Offset: 6}},
		wantState: kprobes.StateInt3,
		check:     "optimize_kprobe: arch_check_optimized_kprobe", detail: regexp.QuoteMeta("armed probe at +9 inside the jump's bytes (+6, +15)")})
	for _, a := range k.McountLocs {
		if inPlain(k, plain, a) != nil {
			add(reasonCase{name: "kprobe on ftrace", probes: []*kprobes.Kprobe{{Addr: a}}, wantState: kprobes.StateFtrace,
				check: "try_to_optimize_kprobe", detail: `a kprobe on ftrace \(KPROBE_FLAG_FTRACE\).*`})
			break
		}
	}
	return cs
}

// TestReasons: each refusal and non-optimization class names the check
// that decided it and what it found, under none and the whole series.
func TestReasons(t *testing.T) {
	k := testImage(t)
	cases := reasonCases(t, k)
	want := []string{"jump-label site", "static-call site", "bug site", "entry text", "module init text", "kprobe on ftrace"}
	for _, w := range want {
		found := false
		for _, c := range cases {
			found = found || c.name == w
		}
		if !found {
			t.Fatalf("the image offers no %s case", w)
		}
	}
	for _, sw := range []sim.Switches{0, sim.PresetAll.Set} {
		for _, c := range reasonCases(t, k) { // fresh probes for each set
			t.Run(sw.Name()+"/"+c.name, func(t *testing.T) {
				if c.prep != nil {
					defer c.prep()()
				}
				kp := boot(t, k, sw, c.faults)
				var err error
				for _, p := range c.probes {
					err = kp.RegisterKprobe(p)
					kp.Drain()
				}
				p := c.probes[len(c.probes)-1]
				if c.other != nil {
					p = c.other
				}
				if !errors.Is(err, c.wantErr) && !(err == nil && c.wantErr == nil) {
					t.Fatalf("register: %v, want %v (reason %q)", err, c.wantErr, p.Why())
				}
				why := p.Why()
				if c.wantErr != nil {
					why = c.probes[len(c.probes)-1].Why()
				} else if st := p.State(); st != c.wantState {
					t.Fatalf("state %s, want %s (reason %q)", st, c.wantState, why)
				}
				if why.Check != c.check {
					t.Fatalf("check %q, want %q (detail %q)", why.Check, c.check, why.Detail)
				}
				if !regexp.MustCompile("^(" + c.detail + ")$").MatchString(why.Detail) {
					t.Fatalf("detail %q, want %q", why.Detail, c.detail)
				}
				if why.String() != strings.TrimSuffix(c.check+": "+why.Detail, ": ") {
					t.Fatalf("String() = %q", why.String())
				}
			})
		}
	}
}

// TestReasonsPastTheEndTrail: an offset past the function lands in the
// next symbol, and the trail says so.
func TestReasonsPastTheEndTrail(t *testing.T) {
	k := testImage(t)
	kp := boot(t, k, 0, "")
	tr := &kprobes.Trail{}
	kp.Trail = tr
	stride := uint32(target(k, 1) - target(k, 0))
	p := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(0), Offset: stride + 6}
	if err := kp.RegisterKprobe(p); err != nil {
		t.Fatal(err)
	}
	if p.Addr != target(k, 1)+6 {
		t.Fatalf("probe at %#x, want %s+6", p.Addr, synth.ProbeTargetName(1))
	}
	var b strings.Builder
	_, _ = tr.WriteTo(&b)
	if want := fmt.Sprintf("offset %d is past the end of %s", stride+6, synth.ProbeTargetName(0)); !strings.Contains(b.String(), want) {
		t.Fatalf("trail does not say %q:\n%s", want, b.String())
	}
}

// TestReasonsEnable: a probe registered disabled (as tracefs and perf
// register theirs) is left unoptimized because it is disabled, and loses
// that reason once enable_kprobe arms it and the optimizer runs.
func TestReasonsEnable(t *testing.T) {
	k := testImage(t)
	for _, sw := range []sim.Switches{0, sim.PresetAll.Set} {
		kp := boot(t, k, sw, "")
		p := &kprobes.Kprobe{SymbolName: synth.ProbeTargetName(0), Flags: kprobes.KprobeFlagDisabled}
		if err := kp.RegisterKprobe(p); err != nil {
			t.Fatal(err)
		}
		kp.Drain()
		if st, why := p.State(), p.Why(); st != kprobes.StateDisabled || why.String() != "optimize_kprobe: the probe is disabled (KPROBE_FLAG_DISABLED)" {
			t.Fatalf("%s: registered disabled: %s, %q", sw.Name(), st, why)
		}
		if err := kp.EnableKprobe(p); err != nil {
			t.Fatal(err)
		}
		kp.Drain()
		if st, why := p.State(), p.Why(); st != kprobes.StateOptimized || !why.IsZero() {
			t.Fatalf("%s: enabled: %s, %q", sw.Name(), st, why)
		}
		stray := &kprobes.Kprobe{Addr: target(k, 1)}
		if err := kp.EnableKprobe(stray); !errors.Is(err, kprobes.EINVAL) || stray.Why().String() != "enable_kprobe: __get_valid_kprobe: the probe is not registered" {
			t.Fatalf("%s: enabling an unregistered probe: %v, %q", sw.Name(), err, stray.Why())
		}
	}
}

// TestRecorderIndent: a front door's steps and the core's, nested.
func TestRecorderIndent(t *testing.T) {
	k := testImage(t)
	kp := boot(t, k, 0, "")
	tr := &kprobes.Trail{}
	tr.Record(kprobes.Step{Check: "trace_kprobe_create", Args: `"p:kprobes/f0 kprobe_many_func_0+1"`, Result: "register_trace_kprobe"})
	kp.Trail = kprobes.Indent(tr, 1)
	_ = kp.RegisterKprobe(&kprobes.Kprobe{SymbolName: synth.ProbeTargetName(0), Offset: 1})
	var b strings.Builder
	_, _ = tr.WriteTo(&b)
	lines := strings.Split(b.String(), "\n")
	if lines[0] != `trace_kprobe_create("p:kprobes/f0 kprobe_many_func_0+1") = register_trace_kprobe` ||
		lines[1] != `  register_kprobe(symbol_name="kprobe_many_func_0", offset=1)` || !strings.HasPrefix(lines[2], "    _kprobe_addr") {
		t.Fatalf("trail:\n%s", b.String())
	}
}

func TestReasonAndStateJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		Why   kprobes.Reason
		State kprobes.State
	}{kprobes.Reason{Check: "can_optimize", Detail: "indirect jump at +12"}, kprobes.StateInt3})
	if err != nil || string(b) != `{"Why":{"check":"can_optimize","detail":"indirect jump at +12"},"State":"int3"}` {
		t.Fatalf("%s %v", b, err)
	}
	if s := (kprobes.Reason{Check: "can_optimize"}).String(); s != "can_optimize" {
		t.Fatal(s)
	}
	if !(kprobes.Reason{}).IsZero() || (kprobes.Reason{}).String() != "" {
		t.Fatal("zero Reason")
	}
}

// HoldTrail puts a front door's summary, noted after the call, before the
// call's own steps.
func TestHoldTrail(t *testing.T) {
	k := testImage(t)
	kp := boot(t, k, 0, "")
	kp.HoldTrail()() // no trail: a no-op
	tr := &kprobes.Trail{}
	kp.Trail = tr
	flush := kp.HoldTrail()
	saved := kp.Trail
	kp.Trail = kprobes.Indent(saved, 1)
	_, _ = kp.KprobeAddr(0, synth.ProbeTargetName(0), 0)
	kp.Trail = saved
	kp.Trail.Record(kprobes.Step{Check: "kprobe_on_func_entry", Result: "0"})
	flush()
	if len(tr.Steps) < 3 || tr.Steps[0].Check != "kprobe_on_func_entry" || tr.Steps[1].Depth != 1 || tr.Steps[1].Check != "_kprobe_addr" {
		t.Fatalf("%+v", tr.Steps)
	}
}

// register_kprobes is all or nothing: the probes before the failing one
// are rolled back, the ones after it never tried, and each says so.
func TestReasonsBatch(t *testing.T) {
	k := testImage(t)
	kp := boot(t, k, sim.PresetSeries.Set, "")
	ps := []*kprobes.Kprobe{{SymbolName: synth.ProbeTargetName(0)}, {SymbolName: synth.ProbeTargetName(1), Offset: 1}, {SymbolName: synth.ProbeTargetName(5)}}
	if i, err := kp.RegisterKprobes(ps); i != 1 || !errors.Is(err, kprobes.EILSEQ) {
		t.Fatalf("RegisterKprobes = %d, %v", i, err)
	}
	want := []string{
		"register_kprobes: rolled back: kps[1] failed with -EILSEQ (arch_prepare_kprobe: can_probe: +1 is not an instruction boundary: the 6-byte mov at +0 spans it)",
		"arch_prepare_kprobe: can_probe: +1 is not an instruction boundary: the 6-byte mov at +0 spans it",
		"register_kprobes: not attempted: kps[1] failed with -EILSEQ (arch_prepare_kprobe: can_probe: +1 is not an instruction boundary: the 6-byte mov at +0 spans it)",
	}
	for i, p := range ps {
		if p.State() != kprobes.StateUnregistered || p.Why().String() != want[i] {
			t.Errorf("kps[%d]: %s, %q; want unregistered, %q", i, p.State(), p.Why(), want[i])
		}
	}
}
