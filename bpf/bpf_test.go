package bpf_test

import (
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/ftrace/fprobe"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/ftboot"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/kallsyms/ktab"
	"github.com/kpsim/kpsim/sim"
)

type env struct {
	t    testing.TB
	k    *image.Kernel
	syms *kallsyms.Compressed
	ft   *ftrace.Ftrace
	gens map[image.Generation]*env
}

// newEnv boots the test image as generated (no generation: 6.1).
func newEnv(t testing.TB) *env { return bootEnv(t, image.GenUnknown) }

// bootEnv boots the test image with its generation set to gen.
func bootEnv(t testing.TB, gen image.Generation) *env {
	t.Helper()
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions, cfg.Modules, cfg.ModuleFunctions = 2000, 100, 2, 60
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys, cfg.BugEntries, cfg.Blacklist = 500, 100, 100, 20, 200, 20
	k := fixture.Generate(t, cfg)
	k.Config.Gen = gen
	tab := fixture.KallsymsTables(t, k, ktab.Options{AllSymbols: true, AbsolutePercpu: true, BaseRelative: true})
	syms, ft := ftboot.New(t, k, tab)
	ft.FreeInitMem()
	return &env{t: t, k: k, syms: syms, ft: ft}
}

// at is the same image booted as generation gen (the image's own for
// 6.1 and a generation-less image).
func (e *env) at(gen image.Generation) *env {
	if gen.Effective() == e.k.Config.Gen.Effective() {
		return e
	}
	if e.gens == nil {
		e.gens = map[image.Generation]*env{}
	}
	if e.gens[gen] == nil {
		e.gens[gen] = bootEnv(e.t, gen)
	}
	return e.gens[gen]
}

// kernel is the BPF layer on the image booted as generation gen.
func (e *env) kernel(gen image.Generation, fp bool) *bpf.Kernel {
	x := e.at(gen)
	return &bpf.Kernel{Gen: x.k.Config.Gen, Kconfig: bpf.Kconfig{FPROBE: fp}, Ftrace: x.ft,
		Fprobe: &fprobe.Env{Ftrace: x.ft, PossibleCPUs: 4}, Syms: x.syms, Modules: x.k.Modules}
}

// traced returns n uniquely named traceable functions.
func (e *env) traced(n int) []string {
	count := map[string]int{}
	at := map[uint64]int{}
	for _, s := range e.k.Symbols {
		count[s.Name]++
		at[s.Addr]++
	}
	var out []string
	for _, s := range e.k.Functions() {
		if len(out) == n {
			break
		}
		if count[s.Name] == 1 && at[s.Addr] == 1 && e.ft.Location(nil, s.Addr) != 0 {
			out = append(out, s.Name)
		}
	}
	return out
}

func TestAttachErrors(t *testing.T) {
	e := newEnv(t)
	names := e.traced(3)
	multi := &bpf.Prog{Name: "m", ExpectedAttachType: bpf.AttachKprobeMulti}
	session := &bpf.Prog{Name: "s", ExpectedAttachType: bpf.AttachKprobeSession}
	for _, tc := range []struct {
		name string
		gen  image.Generation
		fp   bool
		prog *bpf.Prog
		attr bpf.KprobeMultiAttr
		want error
	}{
		{"FPROBE=n", image.Gen612, false, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EOPNOTSUPP},
		{"FPROBE=n 6.1", image.Gen61, false, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EOPNOTSUPP},
		{"session FPROBE=n 6.1: link_create refuses the attach type first", image.Gen61, false, session, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EINVAL},
		{"session FPROBE=n 6.12", image.Gen612, false, session, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EOPNOTSUPP},
		{"perf attach type", image.Gen612, true, &bpf.Prog{ExpectedAttachType: bpf.AttachPerfEvent}, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EINVAL},
		{"ok", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, nil},
		{"session on 6.1", image.Gen61, true, session, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EINVAL},
		{"session", image.Gen612, true, session, bpf.KprobeMultiAttr{Syms: names[:1], Cnt: 1}, nil},
		{"cnt 0", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 0}, errno.EINVAL},
		{"both", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Addrs: []uint64{1}, Cnt: 1}, errno.EINVAL},
		{"neither", image.Gen612, true, multi, bpf.KprobeMultiAttr{Cnt: 1}, errno.EINVAL},
		{"flags", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 3, Flags: 2}, errno.EINVAL},
		{"link flags", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: 3, LinkFlags: 1}, errno.EINVAL},
		{"E2BIG", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: bpf.MaxKprobeMultiCnt + 1}, errno.E2BIG},
		{"no E2BIG in 6.1", image.Gen61, true, multi, bpf.KprobeMultiAttr{Syms: names, Cnt: bpf.MaxKprobeMultiCnt + 1}, errno.EFAULT},
		{"missing", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: []string{names[0], "kpsim_missing"}, Cnt: 2}, errno.ESRCH},
		{"duplicate names", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: []string{names[0], names[0]}, Cnt: 2}, errno.ESRCH},
		{"long name", image.Gen612, true, multi, bpf.KprobeMultiAttr{Syms: []string{string(make([]byte, 600))[:0] + longName()}, Cnt: 1}, errno.E2BIG},
		{"untraceable addr", image.Gen612, true, multi, bpf.KprobeMultiAttr{Addrs: []uint64{1}, Cnt: 1}, errno.EINVAL},
		{"sleepable", image.Gen612, true, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti, Sleepable: true}, bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, errno.EINVAL},
	} {
		k := e.kernel(tc.gen, tc.fp)
		l, err := k.KprobeMultiLinkAttach(sim.NewCounters(false), tc.prog, tc.attr)
		if err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if l != nil {
			if err := k.ReleaseLink(nil, l); err != nil {
				t.Errorf("%s: release: %v", tc.name, err)
			}
		}
	}
}

func longName() string {
	b := make([]byte, kallsyms.KsymNameLen)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}

// TestSessionRethookNodes: a session link (entry + exit handlers)
// preallocates num × CPUs × 2 rethook nodes (6.12.117's rethook-based
// fprobe, on an objpool: one slot per possible CPU), a kprobe.multi entry
// link none; the link stores symbol addresses.
func TestSessionRethookNodes(t *testing.T) {
	e := newEnv(t)
	k := e.kernel(image.Gen612, true)
	names := e.traced(5)
	c := sim.NewCounters(false)
	l, err := k.KprobeMultiLinkAttach(c, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeSession}, bpf.KprobeMultiAttr{Syms: names, Cnt: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Fprobe.RethookNodes(); got != 5*4*2 {
		t.Errorf("%d rethook nodes, want 40", got)
	}
	if !l.Fprobe.EntryHandler || !l.Fprobe.ExitHandler {
		t.Error("session link must have entry and exit handlers")
	}
	for i, a := range l.Addrs {
		if len(e.k.SymbolsByName(names[i])) == 0 {
			continue
		}
		found := false
		for _, n := range names {
			if s := e.k.SymbolsByName(n); len(s) == 1 && s[0].Addr == a {
				found = true
			}
		}
		if !found {
			t.Errorf("link address %#x is not a symbol address", a)
		}
	}
	if c.Total(fprobe.OpObjpoolNode) != 40 || c.Total(fprobe.OpObjpoolSlot) != 4 || c.Total(fprobe.OpRethookNode) != 0 {
		t.Errorf("counted %d objpool nodes in %d slots, %d kzalloc'd nodes; want 40 in 4, 0 (6.12 rethook_alloc → objpool_init)",
			c.Total(fprobe.OpObjpoolNode), c.Total(fprobe.OpObjpoolSlot), c.Total(fprobe.OpRethookNode))
	}
	l2, err := k.KprobeMultiLinkAttach(nil, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Syms: names, Cnt: 5})
	if err != nil || l2.Fprobe.RethookNodes() != 0 || l2.Fprobe.ExitHandler {
		t.Errorf("entry link: %v nodes %d", err, l2.Fprobe.RethookNodes())
	}
	if k.Ftrace.NumOps() != 2 {
		t.Errorf("%d ftrace_ops registered, want one per link (2)", k.Ftrace.NumOps())
	}
}

// TestModuleSymbols: 6.1.192's ftrace_lookup_symbols never looks at
// modules (-ESRCH for a module function); 6.12.117's finds it and the
// link takes a reference on the module.
func TestModuleSymbols(t *testing.T) {
	e := newEnv(t)
	var mod, fn string
	for _, m := range e.k.Modules {
		for _, s := range m.Symbols {
			if s.Addr != 0 && (s.Type == 't' || s.Type == 'T') {
				if e.ft.Location(nil, s.Addr) != 0 && len(e.k.SymbolsByName(s.Name)) == 0 {
					mod, fn = m.Name, s.Name
				}
			}
		}
	}
	if fn == "" {
		t.Skip("no traceable module function")
	}
	prog := &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}
	attr := bpf.KprobeMultiAttr{Syms: []string{fn}, Cnt: 1}
	if _, err := e.kernel(image.Gen61, true).KprobeMultiLinkAttach(nil, prog, attr); err != errno.ESRCH {
		t.Errorf("6.1: %v, want -ESRCH", err)
	}
	k := e.kernel(image.Gen612, true)
	l, err := k.KprobeMultiLinkAttach(nil, prog, attr)
	if err != nil {
		t.Fatalf("6.12: %v", err)
	}
	if len(l.Mods) != 1 || l.Mods[0] != mod || k.ModuleRefs(mod) != 1 {
		t.Errorf("module refs %v (%d)", l.Mods, k.ModuleRefs(mod))
	}
	if err := k.ReleaseLink(nil, l); err != nil || k.ModuleRefs(mod) != 0 {
		t.Errorf("release: %v, refs %d", err, k.ModuleRefs(mod))
	}
	// The cnt == 1 fast path backported to 6.1 finds it through
	// kallsyms_lookup_name's module search: a decision the 6.1 walk never
	// makes.
	k61 := e.kernel(image.Gen61, true)
	k61.Lookup = ftrace.LookupSingle
	if _, err := k61.KprobeMultiLinkAttach(nil, prog, attr); err != nil {
		t.Errorf("6.1 + fast path: %v, want success (kallsyms_lookup_name searches modules)", err)
	}
}

// TestCookiesFollowSort: cookies are sorted with the names, then with
// the addresses.
func TestCookiesFollowSort(t *testing.T) {
	e := newEnv(t)
	k := e.kernel(image.Gen612, true)
	names := e.traced(6)
	rev := make([]string, len(names))
	cookies := make([]uint64, len(names))
	for i := range names {
		rev[i] = names[len(names)-1-i]
		cookies[i] = uint64(100 + i)
	}
	l, err := k.KprobeMultiLinkAttach(nil, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Syms: rev, Cookies: cookies, Cnt: 6})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Addrs {
		if i > 0 && l.Addrs[i] < l.Addrs[i-1] {
			t.Fatalf("addresses not sorted: %x", l.Addrs)
		}
		// Find the name at this address; its cookie must be the one the
		// user gave it.
		for j, n := range rev {
			if s := e.k.SymbolsByName(n); len(s) == 1 && s[0].Addr == l.Addrs[i] && l.Cookies[i] != cookies[j] {
				t.Errorf("%s: cookie %d, want %d", n, l.Cookies[i], cookies[j])
			}
		}
	}
}
