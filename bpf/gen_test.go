package bpf_test

import (
	"testing"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/ftrace/fprobe"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/sim"
)

var gens = []image.Generation{image.Gen61, image.Gen612, image.Gen73}

// moduleFunc returns a traceable module function whose name vmlinux does
// not have, its module and address.
func (e *env) moduleFunc(t *testing.T) (mod, fn string, addr uint64) {
	t.Helper()
	for _, m := range e.k.Modules {
		for _, s := range m.Symbols {
			if s.Addr != 0 && (s.Type == 't' || s.Type == 'T') && e.ft.Location(nil, s.Addr) != 0 && len(e.k.SymbolsByName(s.Name)) == 0 {
				return m.Name, s.Name, s.Addr
			}
		}
	}
	t.Skip("no traceable module function")
	return "", "", 0
}

// TestAttachPerGeneration: the same link attr on 6.1.192, 6.12.117 and
// 7.3 — one row per difference of bpf_kprobe_multi_link_attach,
// ftrace_lookup_symbols and register_fprobe_ips — and each generation's
// errno.
func TestAttachPerGeneration(t *testing.T) {
	e := newEnv(t)
	names := e.traced(3)
	_, modFn, _ := e.moduleFunc(t)
	multi := &bpf.Prog{Name: "m", ExpectedAttachType: bpf.AttachKprobeMulti}
	session := &bpf.Prog{Name: "s", ExpectedAttachType: bpf.AttachKprobeSession}
	writeCtx := &bpf.Prog{Name: "w", ExpectedAttachType: bpf.AttachKprobeMulti, KprobeWriteCtx: true}
	for _, tc := range []struct {
		name string
		prog *bpf.Prog
		attr bpf.KprobeMultiAttr
		want [3]error // 6.1, 6.12, 7.3
	}{
		{"kprobe.session (syscall.c:link_create, is_kprobe_multi; 6.12+)", session,
			bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, [3]error{errno.EINVAL, nil, nil}},
		{"link_create.flags (6.12+)", multi,
			bpf.KprobeMultiAttr{Syms: names, Cnt: 3, LinkFlags: 1}, [3]error{nil, errno.EINVAL, errno.EINVAL}},
		{"kprobe_write_ctx (7.3)", writeCtx,
			bpf.KprobeMultiAttr{Syms: names, Cnt: 3}, [3]error{nil, nil, errno.EINVAL}},
		{"cnt > MAX_KPROBE_MULTI_CNT (6.12+)", multi,
			bpf.KprobeMultiAttr{Syms: names, Cnt: bpf.MaxKprobeMultiCnt + 1}, [3]error{errno.EFAULT, errno.E2BIG, errno.E2BIG}},
		{"module symbol (ftrace_lookup_symbols module walk, 6.12+)", multi,
			bpf.KprobeMultiAttr{Syms: []string{modFn}, Cnt: 1}, [3]error{errno.ESRCH, nil, nil}},
		{"module symbol among two (6.12+ walk; 7.3 without the fast path)", multi,
			bpf.KprobeMultiAttr{Syms: []string{modFn, names[0]}, Cnt: 2}, [3]error{errno.ESRCH, nil, nil}},
		{"untraceable address (7.3 fprobe_init: ftrace_location → -ENOENT)", multi,
			bpf.KprobeMultiAttr{Addrs: []uint64{1}, Cnt: 1}, [3]error{errno.EINVAL, errno.EINVAL, errno.ENOENT}},
	} {
		for i, g := range gens {
			k := e.kernel(g, true)
			l, err := k.KprobeMultiLinkAttach(sim.NewCounters(false), tc.prog, tc.attr)
			if err != tc.want[i] {
				t.Errorf("%s on %s: %v, want %v", tc.name, g, err, tc.want[i])
			}
			if l != nil {
				if err := k.ReleaseLink(nil, l); err != nil {
					t.Errorf("%s on %s: release: %v", tc.name, g, err)
				}
			}
		}
	}
}

// TestModuleRefsPerGeneration: a link on a module address takes a module
// reference from 6.12 on (get_modules_for_addrs), none in 6.1.192.
func TestModuleRefsPerGeneration(t *testing.T) {
	e := newEnv(t)
	mod, _, addr := e.moduleFunc(t)
	for _, tc := range []struct {
		g    image.Generation
		refs int
	}{{image.Gen61, 0}, {image.Gen612, 1}, {image.Gen73, 1}} {
		k := e.kernel(tc.g, true)
		c := sim.NewCounters(false)
		l, err := k.KprobeMultiLinkAttach(c, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Addrs: []uint64{addr}, Cnt: 1})
		if err != nil {
			t.Fatalf("%s: %v", tc.g, err)
		}
		if k.ModuleRefs(mod) != tc.refs || len(l.Mods) != tc.refs {
			t.Errorf("%s: %d references on %s (link mods %v), want %d", tc.g, k.ModuleRefs(mod), mod, l.Mods, tc.refs)
		}
		if bounds := c.Total(bpf.OpModBounds); (bounds > 0) != (tc.refs > 0) {
			t.Errorf("%s: %d __module_address tests", tc.g, bounds)
		}
		if err := k.ReleaseLink(nil, l); err != nil || k.ModuleRefs(mod) != 0 {
			t.Errorf("%s: release %v, %d references left", tc.g, err, k.ModuleRefs(mod))
		}
	}
}

// TestLookupFastPathPerGeneration: one exact name: 6.1.192 and 6.12.117
// walk kallsyms (kallsyms_callback per symbol until found), 7.3's
// ftrace_lookup_symbols takes kallsyms_lookup_name first (no callback);
// with three names every generation walks.
func TestLookupFastPathPerGeneration(t *testing.T) {
	e := newEnv(t)
	names := e.traced(3)
	for _, tc := range []struct {
		syms      []string
		callbacks [3]bool // 6.1, 6.12, 7.3
	}{
		{names[2:], [3]bool{true, true, false}},
		{names, [3]bool{true, true, true}},
	} {
		for i, g := range gens {
			k := e.kernel(g, true)
			c := sim.NewCounters(false)
			l, err := k.KprobeMultiLinkAttach(c, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti},
				bpf.KprobeMultiAttr{Syms: append([]string(nil), tc.syms...), Cnt: uint32(len(tc.syms))})
			if err != nil {
				t.Fatalf("%s: %v", g, err)
			}
			if got := c.Total(ftrace.OpSymsCallback) > 0; got != tc.callbacks[i] {
				t.Errorf("%d names on %s: kallsyms_callback counted %d, want walk=%v", len(tc.syms), g, c.Total(ftrace.OpSymsCallback), tc.callbacks[i])
			}
			_ = k.ReleaseLink(nil, l)
		}
	}
}

// TestFprobeBackendPerGeneration: two kretprobe.multi links on the same
// five functions, 4 possible CPUs: 6.1.192 kzallocs 5 × 4 × 2 rethook
// nodes per link and registers one ftrace_ops per link; 6.12.117 puts the
// nodes in an objpool (one slot per CPU) on one ftrace_ops per link; 7.3
// has no rethook, one shared fprobe_graph_ops registered once (by the
// first link; fgraph started once), one fprobe_ip_table node per address.
// Releasing the first link keeps the shared ops; the second unregisters it.
func TestFprobeBackendPerGeneration(t *testing.T) {
	e := newEnv(t)
	names := e.traced(5)
	type want struct {
		rethookNodes, objpoolNodes, objpoolSlots, ipNodes, opsRegister, fgraph uint64
		numOps, opsAfterOne                                                    int
	}
	for _, tc := range []struct {
		g image.Generation
		w want
	}{
		{image.Gen61, want{rethookNodes: 80, opsRegister: 2, numOps: 2, opsAfterOne: 1}},
		{image.Gen612, want{objpoolNodes: 80, objpoolSlots: 8, opsRegister: 2, numOps: 2, opsAfterOne: 1}},
		{image.Gen73, want{ipNodes: 10, opsRegister: 1, fgraph: 1, numOps: 1, opsAfterOne: 1}},
	} {
		k := e.kernel(tc.g, true)
		c := sim.NewCounters(false)
		var links []*bpf.KprobeMultiLink
		for range 2 {
			l, err := k.KprobeMultiLinkAttach(c, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti},
				bpf.KprobeMultiAttr{Syms: append([]string(nil), names...), Cnt: 5, Flags: bpf.FKprobeMultiReturn})
			if err != nil {
				t.Fatalf("%s: %v", tc.g, err)
			}
			links = append(links, l)
		}
		got := want{c.Total(fprobe.OpRethookNode), c.Total(fprobe.OpObjpoolNode), c.Total(fprobe.OpObjpoolSlot),
			c.Total(fprobe.OpIPTableInsert), c.Total(ftrace.OpOpsRegister), c.Total(fprobe.OpFgraphStart), k.Ftrace.NumOps(), 0}
		if err := k.ReleaseLink(c, links[0]); err != nil {
			t.Fatalf("%s: release: %v", tc.g, err)
		}
		got.opsAfterOne = k.Ftrace.NumOps()
		if got != tc.w {
			t.Errorf("%s: %+v, want %+v", tc.g, got, tc.w)
		}
		if err := k.ReleaseLink(c, links[1]); err != nil || k.Ftrace.NumOps() != 0 {
			t.Errorf("%s: second release %v, %d ops left", tc.g, err, k.Ftrace.NumOps())
		}
		// Attach again after everything was released: 7.3 registers the
		// shared ops anew.
		l, err := k.KprobeMultiLinkAttach(nil, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti},
			bpf.KprobeMultiAttr{Syms: append([]string(nil), names...), Cnt: 5})
		if err != nil || k.Ftrace.NumOps() != 1 {
			t.Errorf("%s: re-attach %v, %d ops", tc.g, err, k.Ftrace.NumOps())
		}
		_ = k.ReleaseLink(nil, l)
	}
}

// TestFprobeRegisterPerGeneration: register_fprobe_ips' own refusals on
// the same fprobe and addresses: a second registration (-EBUSY from
// __register_ftrace_function in 6.1.192/6.12.117, -EEXIST from 7.3's
// fprobe_registered); entry_data_size above MAX_FPROBE_DATA_SIZE (-E2BIG,
// 7.3 only); nr_maxactive above OBJPOOL_NR_OBJECT_MAX (6.12.117:
// objpool_init -EINVAL, rethook_alloc -ENOMEM; 6.1.192 kzallocs them;
// 7.3 ignores nr_maxactive); 131071 addresses (7.3: the fprobe_hlist
// kzalloc_flex exceeds KMALLOC_MAX_SIZE, -ENOMEM).
func TestFprobeRegisterPerGeneration(t *testing.T) {
	e := newEnv(t)
	a := e.k.SymbolsByName(e.traced(1)[0])[0].Addr
	many := make([]uint64, 131071)
	for i := range many {
		many[i] = a
	}
	for _, tc := range []struct {
		name  string
		fp    func() *fprobe.Fprobe
		addrs []uint64
		twice bool
		want  [3]error
	}{
		{"registered twice", func() *fprobe.Fprobe { return &fprobe.Fprobe{EntryHandler: true} }, []uint64{a}, true,
			[3]error{errno.EBUSY, errno.EBUSY, errno.EEXIST}},
		{"entry_data_size 128", func() *fprobe.Fprobe {
			return &fprobe.Fprobe{EntryHandler: true, ExitHandler: true, EntryDataSize: 128}
		}, []uint64{a}, false,
			[3]error{nil, nil, errno.E2BIG}},
		{"nr_maxactive 2^24+1", func() *fprobe.Fprobe { return &fprobe.Fprobe{ExitHandler: true, NrMaxActive: 1<<24 + 1} }, []uint64{a}, false,
			[3]error{nil, errno.ENOMEM, nil}},
		{"131071 addresses", func() *fprobe.Fprobe { return &fprobe.Fprobe{EntryHandler: true} }, many, false,
			[3]error{nil, nil, errno.ENOMEM}},
	} {
		for i, g := range gens {
			x := e.at(g)
			env := &fprobe.Env{Ftrace: x.ft, PossibleCPUs: 4}
			fp := tc.fp()
			err := env.RegisterFprobeIPs(nil, fp, tc.addrs)
			if tc.twice && err == nil {
				err = env.RegisterFprobeIPs(nil, fp, tc.addrs)
			}
			if err != tc.want[i] {
				t.Errorf("%s on %s: %v, want %v", tc.name, g, err, tc.want[i])
			}
			if fp.Registered() {
				if err := env.UnregisterFprobe(nil, fp); err != nil {
					t.Errorf("%s on %s: unregister: %v", tc.name, g, err)
				}
			}
			if x.ft.NumOps() != 0 {
				t.Errorf("%s on %s: %d ops left", tc.name, g, x.ft.NumOps())
			}
		}
	}
}

// TestFilterFunctionsAddrsPerGeneration: tracefs has
// available_filter_functions_addrs from v6.5 (6.12.117, 7.3), not in
// 6.1.192: libbpf's pattern path reads it only there.
func TestFilterFunctionsAddrsPerGeneration(t *testing.T) {
	e := newEnv(t)
	names := e.traced(1)
	for _, tc := range []struct {
		g    image.Generation
		want bool
	}{{image.Gen61, false}, {image.Gen612, true}, {image.Gen73, true}} {
		x := e.at(tc.g)
		s := bpf.NewSystem(e.kernel(tc.g, true), x.syms, nil)
		if got := s.Access(nil, bpf.PathFilterFunctionsAddr); got != tc.want {
			t.Errorf("%s: access(available_filter_functions_addrs) = %v, want %v", tc.g, got, tc.want)
		}
		// libbpf 1.8's pattern path (libbpf_available_kprobes_parse when
		// the _addrs file exists, else available_filter_functions +
		// /proc/kallsyms): the same pattern, two paths, the same links.
		lib := libbpf.New(s, 0)
		l, err := lib.AttachKprobeMultiOpts(nil, &bpf.Prog{Name: "p", ExpectedAttachType: bpf.AttachKprobeMulti}, names[0], true, libbpf.KprobeMultiOpts{})
		path := map[bool]string{false: "filter+kallsyms", true: "filter-addrs"}[tc.want]
		if err != nil || l.Path != path {
			t.Errorf("%s: pattern %q: %v, path %v, want %s", tc.g, names[0], err, l, path)
		}
	}
}

// TestFprobeSharedFilterRelease73: two entry links on overlapping
// functions share 7.3's fprobe_ftrace_ops; releasing the first takes only
// the addresses no other node holds off the shared filter
// (fprobe_exists_on_hash, ftrace_set_filter_ips remove=1): their records'
// counts drop to 0, the shared ones stay at 1. In 6.12.117 each link has
// its own ops: a shared function's record counts 2, then 1.
func TestFprobeSharedFilterRelease73(t *testing.T) {
	e := newEnv(t)
	names := e.traced(5)
	for _, tc := range []struct {
		g                 image.Generation
		sharedBefore      int
		onlyAfter, shared int
	}{{image.Gen612, 2, 0, 1}, {image.Gen73, 1, 0, 1}} {
		k := e.kernel(tc.g, true)
		prog := &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}
		a, err := k.KprobeMultiLinkAttach(nil, prog, bpf.KprobeMultiAttr{Syms: append([]string(nil), names[:3]...), Cnt: 3})
		if err != nil {
			t.Fatal(err)
		}
		b, err := k.KprobeMultiLinkAttach(nil, prog, bpf.KprobeMultiAttr{Syms: append([]string(nil), names[2:]...), Cnt: 3})
		if err != nil {
			t.Fatal(err)
		}
		count := func(name string) int {
			ip := k.Ftrace.Location(nil, e.k.SymbolsByName(name)[0].Addr)
			r, _ := k.Ftrace.Record(ip)
			return r.Count()
		}
		if got := count(names[2]); got != tc.sharedBefore {
			t.Errorf("%s: shared function's record count %d, want %d", tc.g, got, tc.sharedBefore)
		}
		if err := k.ReleaseLink(sim.NewCounters(false), a); err != nil {
			t.Fatal(err)
		}
		if got, sh := count(names[0]), count(names[2]); got != tc.onlyAfter || sh != tc.shared {
			t.Errorf("%s: after the first release counts %d (its own) and %d (shared), want %d and %d", tc.g, got, sh, tc.onlyAfter, tc.shared)
		}
		if err := k.ReleaseLink(nil, b); err != nil || count(names[3]) != 0 || k.Ftrace.NumOps() != 0 {
			t.Errorf("%s: second release %v, count %d, %d ops", tc.g, err, count(names[3]), k.Ftrace.NumOps())
		}
	}
}

// TestRefusalNamesGeneration: a refusal that exists only in some
// generations says which, and the kernel function; a refusal every
// generation makes has no such reason.
func TestRefusalNamesGeneration(t *testing.T) {
	e := newEnv(t)
	names := e.traced(2)
	for _, tc := range []struct {
		g    image.Generation
		prog *bpf.Prog
		attr bpf.KprobeMultiAttr
		want string
	}{
		{image.Gen61, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeSession}, bpf.KprobeMultiAttr{Syms: names, Cnt: 2}, "link_create (6.1.192"},
		{image.Gen73, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti, KprobeWriteCtx: true}, bpf.KprobeMultiAttr{Syms: names, Cnt: 2}, "bpf_kprobe_multi_link_attach (7.3): prog->aux->kprobe_write_ctx"},
		{image.Gen612, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Syms: names, Cnt: bpf.MaxKprobeMultiCnt + 1}, "bpf_kprobe_multi_link_attach (6.12, 6.12+)"},
		{image.Gen73, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Addrs: []uint64{1}, Cnt: 1}, "fprobe_init (7.3): ftrace_location(0x1) == 0"},
		{image.Gen612, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Addrs: []uint64{1}, Cnt: 1}, ""},
		{image.Gen73, &bpf.Prog{ExpectedAttachType: bpf.AttachKprobeMulti}, bpf.KprobeMultiAttr{Syms: []string{"kpsim_missing"}, Cnt: 1}, ""},
	} {
		k := e.kernel(tc.g, true)
		if _, err := k.KprobeMultiLinkAttach(nil, tc.prog, tc.attr); err == nil {
			t.Fatalf("%s: attached", tc.g)
		}
		if got := k.LastRefusal(); len(got) < len(tc.want) || got[:len(tc.want)] != tc.want || (tc.want == "") != (got == "") {
			t.Errorf("%s: reason %q, want %q…", tc.g, got, tc.want)
		}
	}
}

// TestSingleLookupBackportDecision61: the one switch that does not keep a
// generation's decisions. On 6.1.192 ftrace_lookup_symbols stops after
// vmlinux, so a kprobe.multi link naming one module function is refused
// with -ESRCH; the cnt == 1 fast path backported as written resolves it
// through kallsyms_lookup_name's module lookup and attaches. On 6.12.117
// (module walk) and 7.3 (fast path upstream) both attach.
// sim.Switch.On("6.1").Decision says so in every report.
func TestSingleLookupBackportDecision61(t *testing.T) {
	e := newEnv(t)
	_, fn, _ := e.moduleFunc(t)
	for _, tc := range []struct {
		gen  image.Generation
		mode ftrace.LookupMode
		want error
	}{
		{image.Gen61, ftrace.LookupWalk, errno.ESRCH},
		{image.Gen61, ftrace.LookupSingle, nil},
		{image.Gen61, ftrace.LookupSingleV1, nil},
		{image.Gen612, ftrace.LookupWalk, nil},
		{image.Gen612, ftrace.LookupSingle, nil},
		{image.Gen73, ftrace.LookupWalk, nil},
	} {
		x := e.at(tc.gen)
		addrs := make([]uint64, 1)
		err := x.ft.LookupSymbols(sim.NewCounters(false), []string{fn}, addrs, tc.mode)
		if err != tc.want {
			t.Errorf("%s mode %d: ftrace_lookup_symbols(%s) = %v, want %v", tc.gen, tc.mode, fn, err, tc.want)
		}
	}
	if sim.FtraceSingleLookup.On("6.1").Decision == "" || sim.FtraceSingleLookup.On("6.12").Decision != "" {
		t.Error("sim.Switch.On does not say that ftrace-single-lookup changes a 6.1 decision (and only there)")
	}
}
