package sim

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var (
	testOpA  = NewOp("test.a", 2, "test weight", "test op a")
	testOpB  = NewOp("test.b", 10, "test weight", "test op b")
	testPh1  = NewPhase("test.phase1", "test phase")
	testPh2  = NewPhase("test.phase2", "test phase")
	testFail = NewFaultPoint("test.alloc", "test fault point")
)

func TestCountersPhases(t *testing.T) {
	c := NewCounters(true)
	c.Inc(testOpA) // phase other
	prev := c.Enter(testPh1)
	if prev != PhaseOther {
		t.Fatalf("Enter returned %v, want other", prev)
	}
	c.Add(testOpA, 5)
	c.Inc(testOpB)
	c.Enter(testPh2)
	c.Add(testOpB, 3)
	c.Enter(prev)

	checks := []struct {
		ph   Phase
		op   Op
		want uint64
	}{
		{PhaseOther, testOpA, 1}, {testPh1, testOpA, 5}, {testPh1, testOpB, 1},
		{testPh2, testOpB, 3}, {testPh2, testOpA, 0},
	}
	for _, ck := range checks {
		if got := c.Get(ck.ph, ck.op); got != ck.want {
			t.Errorf("Get(%s, %s) = %d, want %d", ck.ph.Name(), ck.op.Name(), got, ck.want)
		}
	}
	if got := c.Total(testOpB); got != 4 {
		t.Errorf("Total(b) = %d, want 4", got)
	}
	if got := c.PhaseTotal(testPh1); got != 6 {
		t.Errorf("PhaseTotal(ph1) = %d, want 6", got)
	}
	if got := c.Sum(); got != 10 {
		t.Errorf("Sum = %d, want 10", got)
	}
	cost := DefaultCosts()
	if got, want := cost.PhaseCycles(c, testPh1), 5*2.0+10; got != want {
		t.Errorf("PhaseCycles(ph1) = %g, want %g", got, want)
	}
	if got, want := cost.Cycles(c), 6*2.0+4*10; got != want {
		t.Errorf("Cycles = %g, want %g", got, want)
	}
	snap := c.Snapshot()
	c.Add(testOpA, 7)
	if d := c.Since(snap); d[testOpA] != 7 || len(d) != 1 {
		t.Errorf("Since = %v, want only test.a=7", d)
	}
	c.Reset()
	if c.Sum() != 0 || c.Current() != PhaseOther {
		t.Errorf("Reset left counts or phase")
	}
}

func TestNilCountersCountNothing(t *testing.T) {
	var c *Counters
	c.Inc(testOpA)
	c.Add(testOpB, 3)
	c.Enter(testPh1)
	c.SetBytes("x", 1)
	if c.Sum() != 0 || c.Get(testPh1, testOpA) != 0 || c.NonZero() != nil {
		t.Fatal("nil counters counted something")
	}
}

func TestParseCosts(t *testing.T) {
	tests := []struct {
		name, in, err string
		op            Op
		want          float64
	}{
		{"override", "test.a 7.5 # comment\n\n", "", testOpA, 7.5},
		{"default kept", "test.a 1\n", "", testOpB, 10},
		{"unknown op", "test.nope 1\n", "in.txt:1: unknown op", Op{}, 0},
		{"bad number", "test.a x\n", "in.txt:1: op test.a: weight", Op{}, 0},
		{"negative", "\ntest.a -1\n", "in.txt:2: op test.a: weight", Op{}, 0},
		{"nan", "test.a NaN\n", "not a finite", Op{}, 0},
		{"fields", "test.a 1 2\n", "want \"OP CYCLES\"", Op{}, 0},
		{"duplicate", "test.a 1\ntest.a 2\n", "in.txt:2: op test.a already set on line 1", Op{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := ParseCosts("in.txt", strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ct.Weight(tc.op); got != tc.want {
				t.Errorf("weight = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestParseCostsHeader(t *testing.T) {
	in := "# kpsim cost file\n#: format: kpsim-costs 1\n#: cpu: CPU A\n#: compiler: cc 12\n#: date: 2026-12-01T00:00:00Z\n" +
		"#: regime: cold\n#: clock: rdtsc\n#: l2: 2097152\ntest.a 3.5 # measured: bench_a (cold)\n"
	ct, err := ParseCosts("c.costs", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	m := ct.Meta
	if m.Format != "kpsim-costs 1" || m.CPU != "CPU A" || m.Compiler != "cc 12" || m.Regime != "cold" || m.Clock != "rdtsc" || m.Extra["l2"] != "2097152" {
		t.Errorf("meta = %+v", m)
	}
	if ct.Weight(testOpA) != 3.5 || ct.Note(testOpA) != "measured: bench_a (cold)" || ct.Source(testOpA) != "c.costs:9" {
		t.Errorf("op a: %g %q %q", ct.Weight(testOpA), ct.Note(testOpA), ct.Source(testOpA))
	}
	if w := ct.ForeignCPU("CPU B"); !strings.Contains(w, `"CPU A"`) || !strings.Contains(w, `"CPU B"`) || !strings.Contains(w, "c.costs") {
		t.Errorf("ForeignCPU = %q, want both CPUs and the file named", w)
	}
	if w := ct.ForeignCPU("CPU A"); w != "" {
		t.Errorf("ForeignCPU on the same CPU = %q", w)
	}
	if _, err := ParseCosts("x", strings.NewReader("#: regime: tepid\n")); err == nil || !strings.Contains(err.Error(), "x:1: regime") {
		t.Errorf("bad regime: err = %v", err)
	}
	if _, err := ParseCosts("x", strings.NewReader("#: no colon here\n")); err == nil {
		t.Error("header without a value accepted")
	}
	// An old-style file (no header) still parses, and a file parsed over
	// a base keeps the base's other weights.
	base, err := ParseCosts("base", strings.NewReader("test.b 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	over, err := ParseCostsOver(base, "over", strings.NewReader("test.a 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	if over.Weight(testOpA) != 9 || over.Weight(testOpB) != 4 || over.Source(testOpB) != "base:1" || base.Weight(testOpA) == 9 {
		t.Errorf("ParseCostsOver: a=%g b=%g src=%q base a=%g", over.Weight(testOpA), over.Weight(testOpB), over.Source(testOpB), base.Weight(testOpA))
	}
}

func TestCPUModel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\ncpu MHz\t: 2600.000\n", "Intel(R) Xeon(R) Processor"},
		{"processor\t: 0\nHardware\t: BCM2835\n", "BCM2835"},
		{"cpu\t\t: POWER9 (raw), altivec supported\n", "POWER9 (raw), altivec supported"},
		{"", ""},
	} {
		if got := CPUModel(tc.in); got != tc.want {
			t.Errorf("CPUModel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseCosts(f *testing.F) {
	f.Add("test.a 7.5 # c\n")
	f.Add("test.b 0\ntest.a 1e3\n")
	f.Add("# only a comment\n")
	f.Add("#: cpu: Some CPU\n#: regime: hot\ntest.a 2 # measured: x\n")
	f.Add("#: regime: lukewarm\n")
	f.Fuzz(func(t *testing.T, in string) {
		ct, err := ParseCosts("fuzz", strings.NewReader(in))
		if err != nil {
			return
		}
		for _, o := range Ops() {
			op, _ := LookupOp(o.Name)
			if w := ct.Weight(op); w < 0 || math.IsNaN(w) {
				t.Fatalf("accepted weight %g for %s", w, o.Name)
			}
		}
	})
}

func TestParseSwitches(t *testing.T) {
	tests := []struct {
		in, err string
		want    Switches
	}{
		{"none", "", 0},
		{"series", "", PresetSeries.Set},
		{"all", "", PresetAll.Set},
		{"series,bug-index", "", PresetSeries.Set.With(BugIndex)},
		{"jump-label-index, jump-size-opcode", "", setOf(JumpLabelIndex, JumpSizeOpcode)},
		{"kprobe-tree,iter-can-probe", "", setOf(KprobeTree, IterCanProbe)},
		{"iter-can-probe", "iter-can-probe requires kprobe-tree", 0},
		{"no-such", `unknown patch switch or preset "no-such"`, 0},
		{"", "empty patch list", 0},
	}
	for _, tc := range tests {
		got, err := ParseSwitches(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSwitches(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSwitches(%q) = %v, %v; want %v", tc.in, got.Names(), err, tc.want.Names())
		}
	}
	if PresetSeries.Set.Has(BugIndex) || PresetSeries.Set.Has(BlacklistIndex) {
		t.Error("series must hold P1-P12 only")
	}
	if len(PresetSeries.Set.List()) != 10 {
		t.Errorf("series has %d switches, want the 10 of P1-P12", len(PresetSeries.Set.List()))
	}
}

func TestSwitchClosureAndDependents(t *testing.T) {
	if got := IterCanOptimize.Closure(); got != setOf(IterCanOptimize, KprobeTree) {
		t.Errorf("closure = %v", got.Names())
	}
	deps := KprobeTree.Dependents()
	for _, s := range []Switch{IterGetOptimized, IterRecoverOptprobed, IterCheckOptimized, IterCanOptimize, IterCanProbe, IterCopyOptimized} {
		if !deps.Has(s) {
			t.Errorf("%s should depend on kprobe-tree", s)
		}
	}
	if deps.Has(JumpLabelIndex) {
		t.Error("jump-label-index does not depend on kprobe-tree")
	}
	if got := PresetSeries.Set.Name(); got != "series" {
		t.Errorf("Name = %q", got)
	}
	if got := setOf(KprobeTree, IterCanProbe).Name(); got != "kprobe-tree+iter-can-probe" {
		t.Errorf("Name = %q", got)
	}
	if got := PresetSeries.Set.With(BugIndex).Name(); got != "series+bug-index" {
		t.Errorf("Name = %q", got)
	}
}

func TestFaults(t *testing.T) {
	f, err := ParseFaults("test.alloc@2")
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{f.Fail(testFail), f.Fail(testFail), f.Fail(testFail)}
	if fmt.Sprint(got) != "[false true false]" {
		t.Errorf("@2 plan failed on %v", got)
	}
	f, _ = ParseFaults("test.alloc")
	first, second := f.Fail(testFail), f.Fail(testFail)
	if !first || !second {
		t.Error("plain plan must fail every hit")
	}
	var none *Faults
	if none.Fail(testFail) {
		t.Error("nil plan failed")
	}
	for _, bad := range []string{"nope", "test.alloc@0", "test.alloc@x"} {
		if _, err := ParseFaults(bad); err == nil {
			t.Errorf("ParseFaults(%q) accepted", bad)
		}
	}
}

func TestRNGDeterministicAndIndependent(t *testing.T) {
	a, b := NewRNG(7, "s"), NewRNG(7, "s")
	c := NewRNG(7, "t")
	same, diff := true, false
	for i := 0; i < 100; i++ {
		x, y, z := a.Uint64(), b.Uint64(), c.Uint64()
		same = same && x == y
		diff = diff || x != z
	}
	if !same || !diff {
		t.Errorf("same stream equal = %v, other stream differs = %v", same, diff)
	}
}

func BenchmarkCountersInc(b *testing.B) {
	c := NewCounters(false)
	c.Enter(testPh1)
	for i := 0; i < b.N; i++ {
		c.Inc(testOpA)
	}
}

func ExampleCounters() {
	c := NewCounters(false)
	prev := c.Enter(testPh1)
	c.Add(testOpA, 3) // three test.a operations in test.phase1
	c.Enter(prev)
	fmt.Println(c.Get(testPh1, testOpA), DefaultCosts().Cycles(c))
	// Output: 3 6
}

func ExampleParseSwitches() {
	ss, err := ParseSwitches("series,bug-index")
	fmt.Println(len(ss.List()), ss.Has(BugIndex), err)
	_, err = ParseSwitches("iter-can-probe")
	fmt.Println(err)
	// Output:
	// 11 true <nil>
	// patch switch iter-can-probe requires kprobe-tree (add it explicitly; kpsim does not enable it for you)
}

func FuzzParseSwitches(f *testing.F) {
	for _, s := range []string{"none", "series", "all", "series,bug-index", "kprobe-tree,iter-can-probe", "iter-can-probe", "", "series,kprobe-hash-bits=12", "kprobe-rhashtable,kprobe-hash-bits=7", "series,kprobe-btree,reservation-btree"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ss, err := ParseSwitches(spec)
		if err != nil {
			return
		}
		if ss.Validate() != nil {
			t.Fatalf("%q: accepted a set that does not validate: %v", spec, ss.Names())
		}
		again, err := ParseSwitches(strings.Join(append([]string{"none"}, ss.Names()...), ","))
		if err != nil || again != ss {
			t.Fatalf("%q: names %v do not parse back (%v)", spec, ss.Names(), err)
		}
	})
}

func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{"", "test.alloc", "test.alloc@3", "test.alloc@0", "x@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fl, err := ParseFaults(spec)
		if err != nil {
			return
		}
		if _, err := ParseFaults(fl.String()); err != nil {
			t.Fatalf("%q: String() %q does not parse back: %v", spec, fl.String(), err)
		}
	})
}

// TestIdentityIsNameOrder: op and phase indexes follow their names, not the
// order packages registered them in, and every handle round-trips.
func TestIdentityIsNameOrder(t *testing.T) {
	ops := Ops()
	for i, o := range ops {
		if i > 0 && ops[i-1].Name >= o.Name {
			t.Fatalf("ops %d and %d out of name order: %s, %s", i-1, i, ops[i-1].Name, o.Name)
		}
		op := OpAt(i)
		if op.Index() != i || op.Name() != o.Name {
			t.Fatalf("OpAt(%d) = %s (index %d)", i, op.Name(), op.Index())
		}
		if l, ok := LookupOp(o.Name); !ok || l != op {
			t.Fatalf("LookupOp(%s) is not OpAt(%d)", o.Name, i)
		}
	}
	phs := Phases()
	for i, p := range phs {
		if i > 0 && phs[i-1].Name >= p.Name {
			t.Fatalf("phases %d and %d out of name order", i-1, i)
		}
		if ph := PhaseAt(i); ph.Index() != i || ph.Name() != p.Name {
			t.Fatalf("PhaseAt(%d) = %s (index %d)", i, ph.Name(), ph.Index())
		}
	}
	var c *Counters
	if c.Current() != PhaseOther || NewCounters(false).Current() != PhaseOther {
		t.Fatal("a run does not start in PhaseOther")
	}
}

// TestFsumExactAndOrderFree: the sum of n*w products is the correctly
// rounded exact sum (checked with big.Float), whatever the order.
func TestFsumExactAndOrderFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type term struct {
			n uint64
			w float64
		}
		terms := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) term {
			return term{
				n: rapid.Uint64Range(0, 1<<40).Draw(t, "n"),
				w: rapid.Float64Range(0, 1e4).Draw(t, "w"),
			}
		}), 0, 60).Draw(t, "terms")
		exact := new(big.Float).SetPrec(4096)
		var a fsum
		for _, x := range terms {
			a.addProduct(x.n, x.w)
			p := new(big.Float).SetPrec(4096).SetUint64(x.n)
			p.Mul(p, new(big.Float).SetPrec(4096).SetFloat64(x.w))
			exact.Add(exact, p)
		}
		want, _ := exact.Float64()
		if got := a.value(); got != want {
			t.Fatalf("fsum %v, exact %v", got, want)
		}
		perm := rapid.Permutation(terms).Draw(t, "perm")
		var b fsum
		for _, x := range perm {
			b.addProduct(x.n, x.w)
		}
		if b.value() != a.value() {
			t.Fatalf("order changed the sum: %v vs %v", b.value(), a.value())
		}
	})
	var s fsum
	s.add(1e100)
	s.add(1)
	s.add(-1e100)
	if v := s.value(); v != 1 || math.IsNaN(v) {
		t.Fatalf("1e100 + 1 - 1e100 = %v", v)
	}
}
