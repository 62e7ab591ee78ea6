package trace

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/machine"
	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

// TestJhashMatchesKernel: jhash gives include/linux/jhash.h's values
// (computed by the C code of jhash.h, x86-64, gcc).
func TestJhashMatchesKernel(t *testing.T) {
	for _, tc := range []struct {
		s        string
		h0, hRnd uint32 // initval 0 and 0x1234567
	}{
		{"", 0xdeadbeef, 0xdfd10456},
		{"a", 0x58d68708, 0x83940b65},
		{"kprobes", 0x81e1de2b, 0xf0d54137},
		{"vfs_read", 0x57f31c38, 0x0d73fee2},
		{"sched_switch", 0x518985f7, 0x4e9f83fb},
		{"do_sys_openat2_xyz", 0x2df8660f, 0xa35ab79c},
		{"a_twelve_byt", 0x20e2c7ce, 0xc53497e7},
		{"this_is_exactly_24_bytes", 0xe745b0a7, 0xa3608a5d},
		{"__x64_sys_clock_nanosleep_time64", 0xc2b2345b, 0x37b57e2b},
	} {
		if h := rhashtable.Jhash(tc.s, 0); h != tc.h0 {
			t.Errorf("jhash(%q, 0) = %#x, want %#x", tc.s, h, tc.h0)
		}
		if h := rhashtable.Jhash(tc.s, 0x1234567); h != tc.hRnd {
			t.Errorf("jhash(%q, 0x1234567) = %#x, want %#x", tc.s, h, tc.hRnd)
		}
	}
}

// fataler is what the helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var idxImage struct {
	once sync.Once
	k    *image.Kernel
	err  error
}

func indexImage(t testing.TB) *image.Kernel {
	t.Helper()
	idxImage.once.Do(func() {
		cfg := synth.DefaultConfig()
		cfg.Seed = 11
		cfg.Functions, cfg.InitFunctions = 2000, 50
		cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys = 800, 200, 200, 30
		cfg.BugEntries, cfg.Blacklist, cfg.Modules, cfg.ModuleFunctions = 400, 40, 1, 30
		cfg.ProbeTargets, cfg.ProbeTargetsTraced = 200, true
		idxImage.k, _, idxImage.err = synth.Generate(cfg)
	})
	if idxImage.err != nil {
		t.Fatal(idxImage.err)
	}
	return idxImage.k
}

// form is one way the kernel answers the lookups: upstream (the switch
// off), the index, and the index whose late-init allocation failed (the
// linear walks answer), or whose growth failed (the old table answers).
type form struct {
	name   string
	sw     sim.Switches
	faults string
}

var forms = []form{
	{"off", 0, ""},
	{"on", sim.Switches(0).With(sim.TraceEventIndex), ""},
	{"alloc-failed", sim.Switches(0).With(sim.TraceEventIndex), "trace.event_index.alloc"},
	{"growth-failed", sim.Switches(0).With(sim.TraceEventIndex), "trace.event_index.alloc@2"},
}

// bootForm boots a machine in the form and its tracing layer, whose late
// initcall runs at once (the machine is past late init).
func bootForm(t fataler, k *image.Kernel, f form) (*machine.Machine, *Tracing) {
	t.Helper()
	faults, err := sim.ParseFaults(f.faults)
	if err != nil {
		t.Fatal(err)
	}
	cfg := machine.DefaultConfig()
	cfg.Switches, cfg.Faults = f.sw, faults
	m, err := machine.Boot(k, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Deps{KP: m.KP, Syms: m.Syms, Ftrace: m.Ftrace, Image: k, C: m.C, Faults: m.Faults}, ConfigFor(k))
	m.AtLateInit(tr.LateInit)
	if (tr.idx != nil) != (f.sw.Has(sim.TraceEventIndex) && f.name != "alloc-failed") {
		t.Fatalf("%s: index built = %v", f.name, tr.idx != nil)
	}
	return m, tr
}

// state is what a form decided, in words: every outcome of the write and
// every live event with its probes.
func state(tr *Tracing, outs []Outcome, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "write: %v\n", err)
	for _, o := range outs {
		fmt.Fprintf(&b, "  %q attempted=%v code=%v addr=%#x reason=%s\n", o.Line, o.Attempted, o.Code, o.Addr, o.Reason)
	}
	for _, ev := range tr.Events() {
		fmt.Fprintf(&b, "  event %s/%s id=%d:", ev.Group, ev.Name, ev.id)
		for _, tk := range ev.probes {
			fmt.Fprintf(&b, " %s(ret=%v,pending=%v,reg=%v)", tk.describe(), tk.Return, tk.pending, tk.Registered())
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  E=%d T=%d log=%q\n", tr.NumEvents(), tr.NumTraceEvents(), tr.ErrorLog())
	return b.String()
}

// sameLookups: in one tracing state, the indexed lookups answer as the
// linear ones for every key: find_trace_kprobe the same trace_kprobe, and
// find_trace_event_call a live event exactly for the live keys (the
// linear model's oracle: the events on ftrace_events, the static ones
// under their placeholders).
func sameLookups(t fataler, tr *Tracing, groups, names []string) {
	t.Helper()
	if err := tr.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, n := range names {
			lin := tr.findTraceKprobe(n, g) // the plain walk
			got := tr.lookup.findTraceKprobe(n, g)
			if got != lin {
				t.Fatalf("find_trace_kprobe(%s/%s): indexed %v, linear %v", g, n, got, lin)
			}
			if tr.idx == nil {
				continue
			}
			ev, found := tr.findTraceEventCallIndexed(g, n)
			want := tr.LookupEvent(g, n)
			static := isStatic(tr, g, n) // on ftrace_events, no kprobe event
			if found != (want != nil || static) || ev != want {
				t.Fatalf("find_trace_event_call(%s/%s): indexed %v (found %v), live %v", g, n, ev, found, want)
			}
		}
	}
}

// TestEventIndexEquivalence: a script of creates, appends, duplicates,
// refusals and deletes decides the same in every form, and in the indexed
// forms every lookup answers as the linear walk would.
func TestEventIndexEquivalence(t *testing.T) {
	k := indexImage(t)
	tg := func(i int) string { return synth.ProbeTargetName(i) }
	var bulk []string
	for i := range 60 {
		bulk = append(bulk, fmt.Sprintf("p:bulk/e%d %s", i, tg(10+i%20)))
	}
	var bulkDel []string
	for i := 0; i < 60; i += 2 {
		bulkDel = append(bulkDel, fmt.Sprintf("-:bulk/e%d", i))
	}
	steps := []struct {
		lines string
		want  errno.Errno
	}{
		{"p:g1/a " + tg(0), 0},
		{"p:g2/a " + tg(1), 0},            // the same name in another group
		{"p:g1/a " + tg(2), 0},            // appended to g1/a
		{"p:g1/a " + tg(0), errno.EEXIST}, // the same probe again
		{"r:g1/a " + tg(3), errno.EEXIST}, // the other probe type
		{"p:g1/b no_such_function_kpsim", errno.ENOENT},
		{"p " + tg(4), 0}, // kprobes/p_<sym>_0
		{"-:g1/a", 0},     // both probes of g1/a
		{"-:g1/a", errno.ENOENT},
		{"p:g1/a " + tg(5), 0}, // re-created
		{"-:a", 0},             // g1/a and g2/a
		{"p:g3/c " + tg(6) + "\np:g3/c " + tg(6), errno.EEXIST},
		{strings.Join(bulk, "\n"), 0}, // the tables grow
		{strings.Join(bulkDel, "\n"), 0},
		{"p:bulk/e0 " + tg(7), 0}, // a deleted name again
		{"-:bulk/", 0},            // the whole group
		{"-:g3/c\n-:kprobes/p_" + tg(4) + "_0", 0},
		{"p:sched/sched_switch " + tg(8), errno.EEXIST}, // a static event of vmlinux
		{"p:sched/a " + tg(8), 0},                       // in the static group sched
		{"-:sched/a", 0},
	}
	groups := []string{"g1", "g2", "g3", "kprobes", "bulk", "nogroup", "sched", staticGroup}
	names := []string{"a", "b", "c", "e0", "e1", "e59", "p_" + tg(4) + "_0", "missing", "sched_switch", "0", "1506"}
	trs := make([]*Tracing, len(forms))
	for i, f := range forms {
		_, trs[i] = bootForm(t, k, f)
	}
	for si, st := range steps {
		var want string
		for i, f := range forms {
			outs, err := trs[i].WriteKprobeEvents(st.lines + "\n")
			got := state(trs[i], outs, err)
			if i == 0 {
				want = got
				if code, _ := err.(errno.Errno); code != st.want && !(st.want == 0 && err == nil) {
					t.Fatalf("step %d: %v, want %v\n%s", si, err, st.want, got)
				}
			} else if got != want {
				t.Fatalf("step %d: %s decides otherwise than off:\n%s\nwant:\n%s", si, f.name, got, want)
			}
			sameLookups(t, trs[i], groups, names)
		}
	}
	for i, f := range forms {
		if err := trs[i].CheckTeardown(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
}

// TestEventIndexEquivalenceRapid: random sequences of writes (creates of
// duplicate names in a few groups, appends, missing symbols, return
// probes, deletes by GRP/EVENT, by EVENT and by GRP/, bursts that make the
// tables grow) decide the same in every form, and every lookup of the
// indexed forms answers as the linear walk.
func TestEventIndexEquivalenceRapid(t *testing.T) {
	race.RapidChecks(t, 20)
	k := indexImage(t)
	groups, names := eventGroups, eventNames
	rapid.Check(t, func(rt *rapid.T) {
		trs := make([]*Tracing, len(forms))
		for i, f := range forms {
			_, trs[i] = bootForm(rt, k, f)
		}
		burst := 0
		nw := rapid.IntRange(1, 25).Draw(rt, "writes")
		for w := range nw {
			buf := drawEventWrite(rt, 3, &burst)
			var want string
			for i, f := range forms {
				outs, err := trs[i].WriteKprobeEvents(buf)
				got := state(trs[i], outs, err)
				if i == 0 {
					want = got
				} else if got != want {
					rt.Fatalf("write %d %q: %s decides otherwise than off:\n%s\nwant:\n%s", w, buf, f.name, got, want)
				}
				sameLookups(rt, trs[i], append(groups, "burst", "none"), append(names, "b0", "b31", "missing"))
			}
		}
	})
}

// bucketLen is the chain a lookup of (group, name) walks on a miss.
func bucketLen(tb *nameTable, group, name string) uint64 {
	return uint64(len(tb.chains[tb.bucket(rhashtable.Jhash(name, rhashtable.Jhash(group, 0)))]))
}

// TestEventIndexCounts: the late-init build hashes and links every static
// event into tables sized for 3/4 load; then each new event costs
// upstream a walk of all of dyn_event_list (E entries) and of ftrace_events
// (T_s + E), and the index one bucket per table and the nodes of those two
// buckets, whatever E; inserts past 3/4 load double a table and move
// every node once; a delete unlinks without hashing or walking.
func TestEventIndexCounts(t *testing.T) {
	k := indexImage(t)
	mLin, lin := bootForm(t, k, forms[0])
	mIdx, idx := bootForm(t, k, forms[1])
	ts := idx.cfg.StaticEvents
	if want := DebianStaticEvents + SyntheticModuleEvents*len(k.Modules); ts != want {
		t.Fatalf("synthetic image: %d static events, want Debian's vmlinux and %d per module: %d", ts, SyntheticModuleEvents, want)
	}
	late := func(op sim.Op) uint64 { return mIdx.C.Get(machine.PhaseLateInit, op) }
	// Debian's vmlinux events under their system and name, the synthetic
	// modules' under the placeholder.
	hashed := uint64(0)
	for _, e := range debian61Events() {
		hashed += uint64(len(e.System) + len(e.Name))
	}
	for i := DebianStaticEvents; i < ts; i++ {
		hashed += uint64(len(staticGroup) + len(strconv.Itoa(i)))
	}
	if idx.idx.calls.size() != 2048 || idx.idx.dyn.size() != indexMinSize ||
		late(opIdxBucketInit) != 2048+indexMinSize || late(opIdxLink) != uint64(ts) ||
		late(opIdxBucket) != uint64(ts) || late(opIdxHashByte) != hashed || late(opKmalloc) != 2 {
		t.Fatalf("late init: sizes %d+%d, bucket.init %d, link %d, bucket %d, hash bytes %d (want %d), kmalloc %d",
			idx.idx.calls.size(), idx.idx.dyn.size(), late(opIdxBucketInit), late(opIdxLink), late(opIdxBucket), late(opIdxHashByte), hashed, late(opKmalloc))
	}
	if got := mLin.C.PhaseTotal(machine.PhaseLateInit); got != 0 {
		t.Fatalf("the switch off counted %d late-init ops", got)
	}
	rehash0 := mIdx.C.Total(opIdxRehash)
	const E = 120
	var maxVisits, sumVisits uint64
	for i := range E {
		name := fmt.Sprintf("p_%s_0", synth.ProbeTargetName(i))
		wantVisits := bucketLen(idx.idx.dyn, KprobeEventSystem, name) + bucketLen(idx.idx.calls, KprobeEventSystem, name)
		line := "p " + synth.ProbeTargetName(i) + "\n"
		for _, f := range []struct {
			m  *machine.Machine
			tr *Tracing
		}{{mLin, lin}, {mIdx, idx}} {
			before := f.m.C.Snapshot()
			if out, err := f.tr.WriteKprobeEvents(line); err != nil {
				t.Fatalf("line %d: %v (%s)", i, err, out[0].Reason)
			}
			d := f.m.C.Since(before)
			got := func(op sim.Op) uint64 { return d[op] }
			if f.tr == lin {
				if got(opDynVisit) != uint64(i) || got(opEvVisit) != uint64(ts+i) || got(opIdxVisit)+got(opIdxBucket) != 0 {
					t.Fatalf("line %d upstream: %d dyn_event_list and %d ftrace_events visits, want %d and %d; index ops %d",
						i, got(opDynVisit), got(opEvVisit), i, ts+i, got(opIdxVisit)+got(opIdxBucket))
				}
				continue
			}
			if got(opDynVisit) != 0 || got(opEvVisit) != 0 {
				t.Fatalf("line %d indexed: walked the lists (%d, %d)", i, got(opDynVisit), got(opEvVisit))
			}
			// Two lookups (a bucket each) and two inserts (a bucket each).
			if got(opIdxBucket) != 4 || got(opIdxVisit) != wantVisits || got(opIdxLink) != 2 {
				t.Fatalf("line %d indexed: %d buckets, %d visits (want 4, %d), %d links", i, got(opIdxBucket), got(opIdxVisit), wantVisits, got(opIdxLink))
			}
			if want := uint64(4 * (len(KprobeEventSystem) + len(name))); got(opIdxHashByte) != want {
				t.Fatalf("line %d indexed: %d bytes hashed, want %d", i, got(opIdxHashByte), want)
			}
			maxVisits = max(maxVisits, wantVisits)
			sumVisits += wantVisits
		}
	}
	if maxVisits > 10 || sumVisits > 3*E {
		t.Fatalf("indexed lookups: at most %d nodes, %d in all for %d lines: chains too long for 3/4 load", maxVisits, sumVisits, E)
	}
	// Growth: dyn 64 → 128 at its 49th event, → 256 at its 97th; calls
	// 2048 → 4096 at T_s + 30 = 1537 entries, every node moved once.
	if got, want := mIdx.C.Total(opIdxRehash)-rehash0, uint64(49+97+1537); got != want || idx.idx.dyn.size() != 256 || idx.idx.calls.size() != 4096 {
		t.Fatalf("growth: %d nodes moved (want %d), sizes %d and %d", got, want, idx.idx.dyn.size(), idx.idx.calls.size())
	}
	if got, want := mIdx.C.Get(PhaseLookup, opIdxBucket), uint64(2*E); got != want {
		t.Fatalf("event.lookup: %d buckets loaded, want %d", got, want)
	}
	// A delete: two unlinks, nothing hashed or walked in the index.
	before := mIdx.C.Snapshot()
	if _, err := idx.WriteKprobeEvents(fmt.Sprintf("-:kprobes/p_%s_0\n", synth.ProbeTargetName(0))); err != nil {
		t.Fatal(err)
	}
	d := mIdx.C.Since(before)
	if d[opIdxLink] != 2 || d[opIdxHashByte]+d[opIdxBucket]+d[opIdxVisit] != 0 {
		t.Fatalf("delete: %d unlinks, %d hash bytes, %d buckets, %d visits", d[opIdxLink], d[opIdxHashByte], d[opIdxBucket], d[opIdxVisit])
	}
	if want := idx.idx.bytes(); want != int64(8*(256+4096)+indexNodeBytes*(ts+2*(E-1))) {
		t.Fatalf("index bytes %d", want)
	}
	for _, nb := range mIdx.C.Bytes() {
		if nb.Name == "trace.event_index.bytes" && nb.Bytes != idx.idx.bytes() {
			t.Fatalf("trace.event_index.bytes = %d, want %d", nb.Bytes, idx.idx.bytes())
		}
	}
}

// The groups, names and symbols the rapid tests write kprobe events with:
// shared names across groups, and one symbol that does not exist.
var (
	eventGroups = []string{"g1", "g2", "kprobes", "sched"} // sched: a static system
	eventNames  = []string{"a", "b", "c", "d", "sched_switch"}
	eventSyms   = []string{synth.ProbeTargetName(0), synth.ProbeTargetName(1), synth.ProbeTargetName(2), synth.ProbeTargetName(3), "no_such_function_kpsim"}
)

// drawEventWrite draws one kprobe_events write of 1 to maxLines lines:
// creates (p or r, possibly of a missing symbol), deletes by GRP/EVENT, by
// EVENT and by GRP/, and, when burst is not nil, bursts of 30 creates in
// a group of their own that make the tables grow (*burst numbers them).
func drawEventWrite(rt *rapid.T, maxLines int, burst *int) string {
	var lines []string
	for range rapid.IntRange(1, maxLines).Draw(rt, "lines") {
		g := rapid.SampledFrom(eventGroups).Draw(rt, "group")
		n := rapid.SampledFrom(eventNames).Draw(rt, "name")
		switch rapid.IntRange(0, 5).Draw(rt, "kind") {
		case 0, 1, 2:
			kind := "p"
			if rapid.Bool().Draw(rt, "ret") {
				kind = "r"
			}
			lines = append(lines, fmt.Sprintf("%s:%s/%s %s", kind, g, n, rapid.SampledFrom(eventSyms).Draw(rt, "sym")))
		case 3:
			lines = append(lines, fmt.Sprintf("-:%s/%s", g, n))
		case 4:
			lines = append(lines, "-:"+n)
		case 5:
			if burst != nil && rapid.Bool().Draw(rt, "burst") {
				for range 30 {
					lines = append(lines, fmt.Sprintf("p:burst/b%d %s", *burst, eventSyms[*burst%4]))
					*burst++
				}
			} else {
				lines = append(lines, "-:"+g+"/")
			}
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// isStatic reports whether g/n is a static event as the index holds it:
// under its system and name, or an unnamed one's placeholder.
func isStatic(tr *Tracing, g, n string) bool {
	i := 0
	for _, seg := range tr.cfg.Static {
		for j := range seg.len() {
			if seg.Events != nil && seg.Events[j].System != "" {
				if seg.Events[j].System == g && seg.Events[j].Name == n {
					return true
				}
			} else if g == staticGroup && n == strconv.Itoa(i) {
				return true
			}
			i++
		}
	}
	return false
}
