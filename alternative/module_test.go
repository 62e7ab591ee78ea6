package alternative

import (
	"bytes"
	"testing"

	"github.com/kpsim/kpsim/image"
)

// A module loaded with call depth tracking: which calls module_finalize
// re-aims at accounting thunks, whose padding it writes, and how 6.12
// (alternatives, then call thunks over .call_sites and the alternative
// sites) and 7.3 (call thunks over .call_sites, then alternatives)
// differ.
func TestModuleFinalizeCallThunks(t *testing.T) {
	const (
		vm     = 0xffffffff81000000 // vmlinux core text [vm, vm+0x1000)
		vf     = vm + 0x100         // a vmlinux function, NOP padding before it
		vf2    = vm + 0x200         // one whose padding boot already patched
		fentry = vm + 0x300         // __fentry__ (skip_addr)
		other  = 0xffffffffc0100000 // another module's core text
		of     = other + 0x40
		mod    = 0xffffffffc0000000 // MOD_TEXT [mod, mod+0x1000)
		mf     = mod + 0x40
		site   = mod + 0x100        // the call sites, 5 bytes apart
		alt    = mod + 0x140        // an alternative: NOP5, or "call vf"
		repl   = mod + 0x800        // .altinstr_replacement (in MOD_TEXT)
		init   = 0xffffffffc0200000 // MOD_INIT_TEXT
		mi     = init + 0x40
		tmplAt = 0xffffffff82000000
	)
	tmpl := hx(t, "48 c1 3c 25 00 10 00 00 05") // sarq $5, (0x1000): 9 bytes, no RIP-relative operand
	call := func(at, dest uint64) []byte { return cat([]byte{x86CALL}, rel32(at, 5, dest)) }
	for _, g := range []image.Generation{image.Gen612, image.Gen73} {
		for _, withRepl := range []bool{false, true} {
			mm := &mem{}
			vt := bytes.Repeat([]byte{x86NOP1}, 0x1000)
			copy(vt[vf2-9-vm:], tmpl)
			ot := bytes.Repeat([]byte{x86NOP1}, 0x100)
			mt := bytes.Repeat([]byte{x86NOP1}, 0x1000)
			it := bytes.Repeat([]byte{x86NOP1}, 0x100)
			dests := []uint64{vf, mf, of, vf2, mi, fentry}
			for i, d := range dests {
				copy(mt[site+5*uint64(i)-mod:], call(site+5*uint64(i), d))
			}
			copy(it[0x10:], call(init+0x10, vf))
			copy(mt[alt-mod:], Nop(5))
			copy(mt[repl-mod:], call(repl, vf))
			mm.add(vm, vt)
			mm.add(other, ot)
			mm.add(mod, mt)
			mm.add(init, it)
			mm.add(tmplAt, tmpl)
			m := ModelFor(g)
			c := genCPU(t, g, "RETPOLINE", "CALL_DEPTH", "ALWAYS")
			env := &Env{CallThunks: &CallThunkEnv{TextStart: vm, TextEnd: vm + 0x1000, Skip: []uint64{fentry}, Template: tmpl, TemplateAddr: tmplAt}}
			tb := &Tables{Alternatives: []AltInstr{{Instr: alt, Repl: repl, CPUID: uint16(mustFeat(t, m, "ALWAYS")), InstrLen: 5, ReplLen: 5}}}
			for i := range dests {
				tb.CallSites = append(tb.CallSites, site+5*uint64(i))
			}
			tb.CallSites = append(tb.CallSites, init+0x10)
			if withRepl {
				tb.CallSites = append(tb.CallSites, repl)
			}
			p := &Patcher{Model: m, CPU: c, Env: env, Mem: mm, Record: true,
				Module: &ModuleText{Name: "test", Base: mod, End: mod + 0x1000, OtherCore: func(a uint64) bool { return a >= other && a < other+0x100 }}}
			if err := p.ModuleFinalize(tb); err != nil {
				t.Fatal(err)
			}
			name := g.String()
			if withRepl {
				name += " with the replacement's call in .call_sites"
			}
			want := map[uint64][]byte{
				site:        call(site, vf-9),      // to vmlinux: its padding written
				site + 5:    call(site+5, mf-9),    // to the module itself
				site + 10:   call(site+10, of-9),   // to another module: its padding written
				site + 15:   call(site+15, vf2-9),  // padding already patched
				site + 20:   call(site+20, mi),     // to init text: not core text
				site + 25:   call(site+25, fentry), // skip_addr
				init + 0x10: call(init+0x10, vf),   // from init text: not in MOD_TEXT
			}
			// 6.12's patch_alt_call_sites re-aims the patched-in call;
			// 7.3 only sees it when .call_sites lists the replacement's
			// call, re-aimed before apply_alternatives copies (and
			// re-bases) it.
			if g == image.Gen612 || withRepl {
				want[alt] = call(alt, vf-9)
			} else {
				want[alt] = call(alt, vf)
			}
			for a, w := range want {
				if got := mm.Text(a, 5); !bytes.Equal(got, w) {
					t.Errorf("%s: call at %#x: % x, want % x", name, a, got, w)
				}
			}
			for _, pad := range []uint64{vf - 9, mf - 9, of - 9, vf2 - 9} {
				if got := mm.Text(pad, 9); !bytes.Equal(got, tmpl) {
					t.Errorf("%s: padding at %#x: % x, want the template", name, pad, got)
				}
			}
			if got := mm.Text(mi-9, 9); !bytes.Equal(got, bytes.Repeat([]byte{x86NOP1}, 9)) {
				t.Errorf("%s: init function's padding written: % x", name, got)
			}
			s := p.Stats.CallThunks
			wantAlt := 0
			if g == image.Gen612 {
				wantAlt = 1
			}
			if s.Pads != 3 || s.AltSites != wantAlt || s.Sites != len(tb.CallSites) {
				t.Errorf("%s: stats %+v", name, s)
			}
		}
	}
}

// Without X86_FEATURE_CALL_DEPTH (thunks_initialized false) nothing is
// re-aimed, and a 6.1 model keeps module_finalize's 6.1 order.
func TestModuleFinalizeNoCallDepth(t *testing.T) {
	const mod = 0xffffffffc0000000
	mt := cat([]byte{x86CALL}, rel32(mod, 5, mod+0x40), bytes.Repeat([]byte{x86NOP1}, 0x100))
	before := bytes.Clone(mt)
	mm := &mem{}
	mm.add(mod, mt)
	c, _ := cpuWith(t).ForGen(image.Gen612)
	p := &Patcher{Model: ModelFor(image.Gen612), CPU: c, Env: &Env{}, Mem: mm, Module: &ModuleText{Base: mod, End: mod + 0x1000}}
	if err := p.ModuleFinalize(&Tables{CallSites: []uint64{mod}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mt, before) || p.Stats.CallThunks.Sites != 0 {
		t.Errorf("text changed or sites visited: %+v", p.Stats.CallThunks)
	}
	// A call-depth CPU without the module's MOD_TEXT is an error, not a
	// panic.
	c2 := genCPU(t, image.Gen73, "CALL_DEPTH")
	p = &Patcher{Model: ModelFor(image.Gen73), CPU: c2, Env: &Env{CallThunks: &CallThunkEnv{TextStart: 1, TextEnd: 2, Template: []byte{0x90}}}, Mem: mm}
	if err := p.ModuleFinalize(&Tables{CallSites: []uint64{mod}}); err == nil {
		t.Error("no error without ModuleText")
	}
	// The CPU must be numbered for the model.
	p = &Patcher{Model: ModelFor(image.Gen73), CPU: cpuWith(t), Env: &Env{}, Mem: mm}
	if err := p.ModuleFinalize(&Tables{}); err == nil {
		t.Error("6.1-numbered CPU accepted by the 7.3 model")
	}
}

func mustFeat(t *testing.T, m *Model, n string) Feature {
	t.Helper()
	f, ok := m.FeatureByName(n)
	if !ok {
		t.Fatalf("%s has no %s", m.Gen, n)
	}
	return f
}

// genCPU is a CPU of generation g's numbering with exactly the named bits.
func genCPU(t *testing.T, g image.Generation, names ...string) *CPU {
	t.Helper()
	c, _ := cpuWith(t).ForGen(g)
	for _, n := range names {
		c.Features.Set(mustFeat(t, c.Model(), n))
	}
	return c
}
