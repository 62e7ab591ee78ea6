package scenarios

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/bpf"
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/libbpf"
	"github.com/kpsim/kpsim/sim"
)

func bpfImage(t testing.TB, ibt bool) *image.Kernel {
	t.Helper()
	cfg := smallImage(7)
	cfg.IBT = ibt
	cfg.DupNamePercent, cfg.ClonePercent = 8, 8
	k := fixture.Generate(t, cfg)
	// The BPF paths follow the image's generation: 6.12 is the model
	// these tests were written on (kprobe.session, the module walk).
	k.Config.Gen = image.Gen612
	return k
}

func bootTest(t testing.TB, k *image.Kernel, sw sim.Switches) *bpfRun {
	t.Helper()
	r, _, err := bootBPF(k, sw, DefaultBPFOptions(), sim.NewCounters(false))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// namePool draws the property test's cases from the image: unique
// traceable functions, duplicated names whose lowest-address copy is not
// traceable but a later one is, module symbols, compiler-clone names
// (.part.0, .isra.0, .cold, ...), untraceable names, and misses.
func namePool(k *image.Kernel, ft *ftrace.Ftrace) map[string][]string {
	pool := map[string][]string{}
	byName := map[string][]image.Symbol{}
	for _, s := range k.Symbols {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for name, ss := range byName {
		if name == "" {
			continue
		}
		tr := func(s image.Symbol) bool { return ft.Location(nil, s.Addr) != 0 }
		switch {
		case len(ss) > 1 && !tr(ss[0]) && slices.ContainsFunc(ss[1:], tr):
			pool["dup-untraceable-first"] = append(pool["dup-untraceable-first"], name)
		case len(ss) > 1:
			pool["dup"] = append(pool["dup"], name)
		case hasCloneSuffix(name):
			pool["clone"] = append(pool["clone"], name)
		case ss[0].IsText() && tr(ss[0]):
			pool["hit"] = append(pool["hit"], name)
		default:
			pool["untraceable"] = append(pool["untraceable"], name)
		}
	}
	for _, m := range k.Modules {
		for _, s := range m.Symbols {
			if s.Addr != 0 && len(byName[s.Name]) == 0 {
				pool["module"] = append(pool["module"], s.Name)
			}
		}
	}
	for i := 0; i < 20; i++ {
		pool["miss"] = append(pool["miss"], fmt.Sprintf("kpsim_missing_%d", i))
	}
	for c := range pool {
		sort.Strings(pool[c])
	}
	return pool
}

func hasCloneSuffix(n string) bool {
	for _, s := range []string{".part.", ".isra.", ".cold", ".constprop.", ".llvm."} {
		for i := 0; i+len(s) <= len(n); i++ {
			if n[i:i+len(s)] == s {
				return true
			}
		}
	}
	return false
}

type lookupOutcome struct {
	addrs []uint64
	err   error
}

// TestLookupSymbolsEquivalence: ftrace_lookup_symbols gives the same
// addresses and error under every switch set (kallsyms variants, the
// merged fast path, libbpf's switch), and the RFC v1 fast path too when
// the patch site is the symbol (no IBT).
func TestLookupSymbolsEquivalence(t *testing.T) {
	for _, ibt := range []bool{false, true} {
		t.Run(fmt.Sprintf("ibt=%v", ibt), func(t *testing.T) {
			k := bpfImage(t, ibt)
			sets := []sim.Switches{0,
				sim.Switches(0).With(sim.FtraceSingleLookup),
				sim.Switches(0).With(sim.FtraceSingleLookup).With(sim.KallsymsOffsetIndex).With(sim.KallsymsTokenCmp),
				sim.Switches(0).With(sim.KallsymsTokenCmp).With(sim.LibbpfExactSyms),
			}
			if !ibt {
				sets = append(sets, sim.Switches(0).With(sim.FtraceSingleLookupV1))
			}
			var runs []*bpfRun
			for _, sw := range sets {
				runs = append(runs, bootTest(t, k, sw))
			}
			v1 := bootTest(t, k, sim.Switches(0).With(sim.FtraceSingleLookupV1))
			pool := namePool(k, runs[0].ft)
			var classes []string
			for c, names := range pool {
				if len(names) > 0 {
					classes = append(classes, c)
				}
			}
			sort.Strings(classes)
			for _, need := range []string{"hit", "miss", "dup-untraceable-first", "module", "clone"} {
				if len(pool[need]) == 0 {
					t.Fatalf("image has no %q names: the test would not cover them", need)
				}
			}
			v1Differed := false
			rapid.Check(t, func(rt *rapid.T) {
				n := rapid.IntRange(1, 4).Draw(rt, "cnt")
				seen := map[string]bool{}
				var names []string
				for len(names) < n {
					cl := rapid.SampledFrom(classes).Draw(rt, "class")
					nm := rapid.SampledFrom(pool[cl]).Draw(rt, "name")
					if !seen[nm] {
						seen[nm] = true
						names = append(names, nm)
					}
				}
				sort.Strings(names)
				var outs []lookupOutcome
				for _, r := range runs {
					a := make([]uint64, len(names))
					err := r.ft.LookupSymbols(nil, names, a, r.kern.Lookup)
					outs = append(outs, lookupOutcome{a, err})
				}
				for i, o := range outs[1:] {
					if !slices.Equal(o.addrs, outs[0].addrs) || !errors.Is(o.err, outs[0].err) && o.err != outs[0].err {
						rt.Fatalf("%v: set %s gives %x %v, none gives %x %v", names, sets[i+1].Name(), o.addrs, o.err, outs[0].addrs, outs[0].err)
					}
				}
				a := make([]uint64, len(names))
				err := v1.ft.LookupSymbols(nil, names, a, ftrace.LookupSingleV1)
				if !slices.Equal(a, outs[0].addrs) || err != outs[0].err {
					if !ibt {
						rt.Fatalf("%v: v1 differs without IBT: %x %v vs %x %v", names, a, err, outs[0].addrs, outs[0].err)
					}
					// Under IBT v1 may only move a single hit to its patch site.
					if len(names) != 1 || err != nil || a[0] != runs[0].ft.Location(nil, outs[0].addrs[0]) {
						rt.Fatalf("%v: v1 differs beyond the patch site: %x %v vs %x %v", names, a, err, outs[0].addrs, outs[0].err)
					}
					v1Differed = true
				}
			})
			if ibt && !v1Differed {
				t.Error("under IBT the v1 fast path never stored a patch site")
			}
		})
	}
}

// TestKernelESRCHLibbpfENOENT: the kernel reports a missing name as
// -ESRCH (ftrace_lookup_symbols); libbpf's pattern path (user space) and,
// with the exact-syms change, its exact path both report -ENOENT.
func TestKernelESRCHLibbpfENOENT(t *testing.T) {
	k := bpfImage(t, false)
	for _, sw := range []sim.Switches{0, sim.Switches(0).With(sim.LibbpfExactSyms), sim.Switches(0).With(sim.LibbpfExactSyms).With(sim.FtraceSingleLookup)} {
		r := bootTest(t, k, sw)
		prog := &bpf.Prog{Name: "p", ExpectedAttachType: bpf.AttachKprobeSession}
		_, err := r.kern.KprobeMultiLinkAttach(nil, prog, bpf.KprobeMultiAttr{Syms: []string{"kpsim_no_such_fn"}, Cnt: 1})
		if err != errno.ESRCH {
			t.Errorf("%s: kernel gives %v, want -ESRCH", sw.Name(), err)
		}
		for _, sec := range []string{"kprobe.session/kpsim_no_such_fn", "kprobe.multi/kpsim_no_such_fn", "kprobe.session/kpsim_no_such_*"} {
			if _, err := r.lib.Attach(nil, "p", sec); err != errno.ENOENT {
				t.Errorf("%s: libbpf %s gives %v, want -ENOENT", sw.Name(), sec, err)
			}
		}
	}
}

// TestSessionDigests: the default runs reach identical decisions; under
// IBT the v1 fast path changes them and kpsim names the attaches.
func TestSessionDigests(t *testing.T) {
	for _, ibt := range []bool{false, true} {
		k := bpfImage(t, ibt)
		var runs []RunSpec
		for _, p := range []string{"none", "libbpf-exact-syms", "libbpf-exact-syms,ftrace-single-lookup", "libbpf-exact-syms,ftrace-single-lookup-v1"} {
			ss, err := sim.ParseSwitches(p)
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, RunSpec{Name: ss.Name(), Switches: ss})
		}
		rep, err := RunSession(k, SessionOptions{BPF: DefaultBPFOptions(), Programs: 12, Runs: runs}, sim.DefaultCosts())
		if err != nil {
			t.Fatal(err)
		}
		// Kernel-resolved runs (exact-syms, with and without the merged
		// fast path) store symbol addresses.
		exact, merged, v1 := rep.Runs[1], rep.Runs[2], rep.Runs[3]
		if merged.Digest != exact.Digest || merged.OK != 12 || exact.OK != 12 {
			t.Errorf("ibt=%v: merged %s vs exact %s", ibt, merged.Digest[:12], exact.Digest[:12])
		}
		// The pattern path reads available_filter_functions_addrs, which
		// prints rec->ip: under IBT the patch site, so the libbpf change
		// moves the link's addresses by the ENDBR (and v1 moves them back).
		none := rep.Runs[0]
		if ibt != (none.Digest != exact.Digest) {
			t.Errorf("ibt=%v: none vs exact-syms digests differ=%v", ibt, none.Digest != exact.Digest)
		}
		if ibt != (v1.Digest != merged.Digest) || v1.Digest != none.Digest {
			t.Errorf("ibt=%v: v1 %s merged %s none %s", ibt, v1.Digest[:12], merged.Digest[:12], none.Digest[:12])
		}
		// The fast path must not resolve with a walk, and libbpf's switch
		// must skip the files.
		st := map[string]float64{}
		for _, s := range rep.Runs[2].Stages {
			st[s.Phase] = s.Cycles
		}
		if st["libbpf.read.filter_functions"] != 0 || st["bpf.resolve"] == 0 {
			t.Errorf("exact+fast run stages %v", st)
		}
	}
}

// TestLookupSymbolsEquivalenceDebian: the same property on the pinned
// Debian kernel (no modules are loaded from a real image), over a fixed
// sample of each class.
func TestLookupSymbolsEquivalenceDebian(t *testing.T) {
	k := longRealKernel(t, "walks the Debian kernel's symbol table many times")
	sets := []sim.Switches{0,
		sim.Switches(0).With(sim.FtraceSingleLookupV1), // Debian 6.1 has no IBT: v1 is equivalent too
		sim.Switches(0).With(sim.FtraceSingleLookup).With(sim.KallsymsOffsetIndex).With(sim.KallsymsTokenCmp),
	}
	var runs []*bpfRun
	for _, sw := range sets {
		runs = append(runs, bootTest(t, k, sw))
	}
	pool := namePool(k, runs[0].ft)
	for _, need := range []string{"hit", "miss", "dup-untraceable-first", "clone"} {
		if len(pool[need]) == 0 {
			t.Fatalf("Debian kernel has no %q names", need)
		}
	}
	per := 4
	if race.Enabled {
		per = 1 // each walk is ~10x slower under the race detector
	}
	var cases [][]string
	for _, cl := range []string{"hit", "miss", "dup-untraceable-first", "dup", "clone", "untraceable"} {
		ns := pool[cl]
		for i := 0; i < per && i < len(ns); i++ {
			cases = append(cases, []string{ns[(i*7919)%len(ns)]})
		}
	}
	cases = append(cases, []string{pool["hit"][0], pool["dup-untraceable-first"][0]}, []string{pool["clone"][0], pool["miss"][0]})
	for _, names := range cases {
		sort.Strings(names)
		var first lookupOutcome
		for i, r := range runs {
			a := make([]uint64, len(names))
			err := r.ft.LookupSymbols(nil, names, a, r.kern.Lookup)
			if i == 0 {
				first = lookupOutcome{a, err}
				continue
			}
			if !slices.Equal(a, first.addrs) || err != first.err {
				t.Errorf("%v: %s gives %x %v, none %x %v", names, sets[i].Name(), a, err, first.addrs, first.err)
			}
		}
	}
}

// TestExactSymsDuplicateName: a wildcard-free pattern naming a static
// function with several traceable copies attaches to every copy on the
// pattern path (one line of available_filter_functions_addrs each) and to
// one copy — the lowest-address traceable one — on libbpf's exact-syms
// path (kernel/trace/ftrace.c:kallsyms_callback, 6.1, keeps the first copy
// with an ftrace location): the one decision the libbpf change makes
// differently (docs/series.md §3); with unique_match it is -EINVAL instead.
func TestExactSymsDuplicateName(t *testing.T) {
	k := bpfImage(t, false)
	none := bootTest(t, k, 0)
	exact := bootTest(t, k, sim.Switches(0).With(sim.LibbpfExactSyms))
	var name string
	var copies []uint64
	for _, n := range namePool(k, none.ft)["dup"] {
		var tr []uint64
		for _, s := range k.SymbolsByName(n) {
			if s.IsText() && none.ft.Location(nil, s.Addr) != 0 {
				tr = append(tr, s.Addr)
			}
		}
		if len(tr) >= 2 {
			name, copies = n, tr
			break
		}
	}
	if name == "" {
		t.Skip("no name with two traceable copies")
	}
	if _, err := none.lib.Attach(nil, "p", "kprobe.multi/"+name); err != nil {
		t.Fatal(err)
	}
	if got := none.lastLinkAddrs(); len(got) != len(copies) {
		t.Errorf("pattern path: %d addresses, want every traceable copy (%d)", len(got), len(copies))
	}
	if _, err := exact.lib.Attach(nil, "p", "kprobe.multi/"+name); err != nil {
		t.Fatal(err)
	}
	if got := exact.lastLinkAddrs(); len(got) != 1 || got[0] != copies[0] {
		t.Errorf("exact-syms path: %x, want the first traceable copy %#x", got, copies[0])
	}
	_, err := exact.lib.AttachKprobeMultiOpts(nil, &bpf.Prog{Name: "u"}, name, true, libbpf.KprobeMultiOpts{UniqueMatch: true})
	if err != errno.EINVAL {
		t.Errorf("unique_match on %d copies: %v, want -EINVAL", len(copies), err)
	}
}

// TestFastPathFallsBack: with either fast-path form, a name whose
// lowest-address copy is not traceable, and a missing name, pay the fast
// path and then the full walk; a traceable unique name walks nothing.
func TestFastPathFallsBack(t *testing.T) {
	k := bpfImage(t, false)
	for _, sw := range []sim.Switches{sim.Switches(0).With(sim.FtraceSingleLookup), sim.Switches(0).With(sim.FtraceSingleLookupV1)} {
		r := bootTest(t, k, sw)
		pool := namePool(k, r.ft)
		visit, _ := sim.LookupOp("kallsyms.visit")
		cmp, _ := sim.LookupOp("kallsyms.cmp")
		for _, tc := range []struct {
			name string
			walk bool
			err  error
		}{
			{pool["hit"][0], false, nil},
			{pool["dup-untraceable-first"][0], true, nil},
			{pool["miss"][0], true, errno.ESRCH},
		} {
			c := sim.NewCounters(false)
			a := make([]uint64, 1)
			err := r.ft.LookupSymbols(c, []string{tc.name}, a, r.kern.Lookup)
			if err != tc.err || (c.Total(visit) > 0) != tc.walk || c.Total(cmp) == 0 {
				t.Errorf("%s %s: err %v, walked %d symbols after %d name comparisons; want err %v, walk %v",
					sw.Name(), tc.name, err, c.Total(visit), c.Total(cmp), tc.err, tc.walk)
			}
			if tc.name == pool["dup-untraceable-first"][0] {
				ss := k.SymbolsByName(tc.name)
				if a[0] == ss[0].Addr || r.ft.Location(nil, a[0]) == 0 {
					t.Errorf("%s: resolved %#x, want a later traceable copy", tc.name, a[0])
				}
			}
		}
	}
}

func FuzzParseKconfig(f *testing.F) {
	for _, s := range []string{"FPROBE=y", "CONFIG_FPROBE=n", "FPROBE=y,FPROBE=n", "", "FPROBE", "X=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseKconfig(s)
		if err != nil {
			return
		}
		for k := range m {
			if k != "FPROBE" {
				t.Fatalf("%q: accepted option %q", s, k)
			}
		}
	})
}
