// Package resvtest is the conformance suite of the late-init reservation
// indexes (lib.LateIndex): jump_label_text_reserved (P2),
// static_call_text_reserved (P1), find_bug (bug-index) and
// within_kprobe_blacklist (blacklist-index). Each check's package runs it
// through a small adapter (Check); the suite proves that every form of the
// check (linear, indexed, allocation failed, before late init, B-tree)
// answers as the check's oracle does, that the fast scan gives the walk's
// answers and exactly its counts, and that the index's errors and memory
// figures are the ones documented. It also builds the synthetic images
// those packages' tests share.
package resvtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/boot"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/internal/race"
	"github.com/kpsim/kpsim/lib"
	"github.com/kpsim/kpsim/sim"
)

// DefaultImage is the default synthetic image, generated once per test
// binary. Tests must not modify it.
func DefaultImage(t testing.TB) *image.Kernel { return fixture.DefaultImage(t) }

// SmallConfig is a small randomised image (fast to generate and scan);
// a package adjusts the tables it tests before Generate.
func SmallConfig(seed uint64) synth.Config {
	c := synth.DefaultConfig()
	c.Seed = seed
	c.Functions, c.InitFunctions = 2000, 100
	c.JumpEntries, c.JumpKeys = 1000, 300
	c.StaticCallSites, c.StaticCallKeys = 200, 20
	c.BugEntries, c.Blacklist = 600, 30
	c.EntryFunctions, c.IRQEntryFunctions, c.NoinstrFunctions, c.KprobesTextFunctions = 5, 3, 20, 3
	c.Modules, c.ModuleFunctions, c.ModuleInitFunctions = 2, 60, 4
	c.ModuleJumpEntries, c.ModuleStaticCallSites, c.ModuleBugEntries = 40, 6, 10
	return c
}

// SmallImage generates SmallConfig(seed), after adjust (if not nil) set
// the tables the package tests.
func SmallImage(t testing.TB, seed uint64, adjust func(*synth.Config)) *image.Kernel {
	c := SmallConfig(seed)
	if adjust != nil {
		adjust(&c)
	}
	return Generate(t, c)
}

// Reserved is the text_reserved oracles' rule for which sites count at
// system state st: the core's (init sites only while st keeps them), or
// else, when start is in a live module, that module's (sites of gives
// them; init sites while it is coming, none while it is going). hit says
// whether sites meet the range, init sites included when init is set.
func Reserved[S any](k *image.Kernel, st boot.State, start uint64, core []S, sitesOf func(*image.Module) []S, hit func(sites []S, init bool) bool) bool {
	if hit(core, st.InitSitesCount()) {
		return true
	}
	for _, m := range k.Modules {
		if m.State != image.ModuleUnformed && m.Contains(start) {
			return m.State != image.ModuleGoing && hit(sitesOf(m), m.State == image.ModuleComing)
		}
	}
	return false
}

// FastConfig is the image of the fast-scan tests: more functions and
// sites than SmallConfig, fewer than the default.
func FastConfig(seed uint64) synth.Config {
	c := synth.DefaultConfig()
	c.Seed, c.Functions, c.InitFunctions = seed, 2500, 150
	c.JumpEntries, c.JumpKeys, c.StaticCallSites, c.BugEntries, c.Blacklist = 1500, 400, 300, 800, 60
	return c
}

// Generate generates the image of c, failing t on an error.
func Generate(t testing.TB, c synth.Config) *image.Kernel { return fixture.Generate(t, c) }

// Form is one way of running a check.
type Form struct {
	Name     string
	Switches sim.Switches
	Fault    bool // the index allocation fails
	Late     bool // LateInit has run
}

// Forms are the forms every check runs in: linear, indexed, indexed with
// its allocation failing, indexed before late init, indexed in a B-tree
// (reservation-btree); each again with every switch of extra on.
func Forms(index sim.Switch, extra ...sim.Switch) []Form {
	on := sim.Switches(0).With(index)
	base := []Form{
		{"linear", 0, false, true},
		{"indexed", on, false, true},
		{"indexed-allocfail", on, true, true},
		{"indexed-before-lateinit", on, false, false},
		{"indexed-btree", on.With(sim.ReservationBtree), false, true},
	}
	out := slices.Clone(base)
	for _, x := range extra {
		for _, f := range base {
			f.Name += "+" + x.String()
			f.Switches = f.Switches.With(x)
			out = append(out, f)
		}
	}
	return out
}

// Table is what the suite asks of one table of a check (through the
// package's adapter).
type Table[Q any, A comparable] interface {
	LateInit(c *sim.Counters) error
	Indexed() bool
	EnableFastScan()
	// Ask runs the check on query q.
	Ask(c *sim.Counters, q Q) (A, error)
	// IndexInfo is what Index() returns: its index's Len() and Bytes(),
	// or its error (Info turns one into the other).
	IndexInfo() (n int, bytes int64, err error)
}

// Info is IndexInfo from what a package's Index() returns.
func Info[X indexInfo](x X, err error) (int, int64, error) {
	if err != nil {
		return 0, 0, err
	}
	return x.Len(), x.Bytes(), nil
}

// Check is one reservation check, as its package's adapter presents it.
type Check[Q any, A comparable] struct {
	// Index is the index switch; Fault its allocation fault point; Extra
	// switches that change the check's walk (each form runs with them too).
	Index sim.Switch
	Fault sim.FaultPoint
	Extra []sim.Switch
	// Name prefixes the memory figures (Name+".index.bytes"); EntryBytes is
	// the default bytes per indexed entry.
	Name       string
	EntryBytes int
	// ErrNotLateInit, ErrIndexOff, ErrIndexAlloc are the package's errors.
	ErrNotLateInit, ErrIndexOff, ErrIndexAlloc error

	// New returns a table of the check over k (LateInit not run).
	New func(t testing.TB, k *image.Kernel, sw sim.Switches, f *sim.Faults) Table[Q, A]
	// Oracle returns the check's answers for k from first principles.
	Oracle func(t testing.TB, k *image.Kernel) func(q Q) A

	// Images and Queries are the equivalence test's images and queries.
	Images  func(t testing.TB) []*image.Kernel
	Queries func(k *image.Kernel) []Q
	// RapidImages and Draw are the property test's images and queries.
	RapidImages func(t testing.TB) []*image.Kernel
	Draw        func(rt *rapid.T, k *image.Kernel) Q
	// FastImage and FastQueries are the fast-scan test's image and queries;
	// it runs linear and indexed, each with every switch of Extra.
	FastImage   func(t testing.TB) *image.Kernel
	FastQueries func(k *image.Kernel) []Q
}

// Run runs the suite on check c.
func Run[Q any, A comparable](t *testing.T, c Check[Q, A]) {
	t.Run("Equivalence", func(t *testing.T) { c.equivalence(t) })
	t.Run("Rapid", func(t *testing.T) { c.rapid(t) })
	t.Run("Errors", func(t *testing.T) { c.errors(t) })
	t.Run("Memory", func(t *testing.T) { c.memory(t) })
	t.Run("FastScan", func(t *testing.T) { c.fastScan(t) })
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Tables returns one table of every form over k (Forms), LateInit run
// where the form says.
func (c Check[Q, A]) Tables(t testing.TB, k *image.Kernel) ([]Form, []Table[Q, A]) {
	forms := Forms(c.Index, c.Extra...)
	out := make([]Table[Q, A], len(forms))
	for i, f := range forms {
		var faults *sim.Faults
		if f.Fault {
			faults = &sim.Faults{}
			faults.Set(c.Fault, 0)
		}
		out[i] = c.New(t, k, f.Switches, faults)
		if f.Late {
			if err := out[i].LateInit(nil); err != nil {
				t.Fatalf("%s: LateInit: %v", f.Name, err)
			}
		}
		if want := f.Late && !f.Fault && f.Switches.Has(c.Index); out[i].Indexed() != want {
			t.Fatalf("%s: Indexed() = %v, want %v", f.Name, !want, want)
		}
	}
	return forms, out
}

// Unwrapped returns c's tables over k in every form but the B-tree one
// (linear, indexed, indexed with its allocation failing, indexed before
// late init), as the package's own table type R.
func Unwrapped[R any, Q any, A comparable](t testing.TB, c Check[Q, A], k *image.Kernel) []R {
	fs, tbs := c.Tables(t, k)
	var out []R
	for i, f := range fs {
		if f.Name != "indexed-btree" {
			out = append(out, Unwrap[R](tbs[i]))
		}
	}
	return out
}

// AskAll asks every table q and fails t unless each answers want.
func (c Check[Q, A]) AskAll(t fataler, forms []Form, tbs []Table[Q, A], want A, q Q) {
	t.Helper()
	for i, tb := range tbs {
		got, err := tb.Ask(nil, q)
		if err != nil || got != want {
			t.Fatalf("%s %+v: got %v (%v), oracle %v", forms[i].Name, q, got, err, want)
		}
	}
}

// equivalence: every form answers every query as the oracle does.
func (c Check[Q, A]) equivalence(t *testing.T) {
	for _, k := range c.Images(t) {
		forms, tbs := c.Tables(t, k)
		oracle := c.Oracle(t, k)
		for _, q := range c.Queries(k) {
			c.AskAll(t, forms, tbs, oracle(q), q)
		}
	}
}

// rapid: the same on drawn queries.
func (c Check[Q, A]) rapid(t *testing.T) {
	imgs := c.RapidImages(t)
	forms := make([][]Form, len(imgs))
	tbs := make([][]Table[Q, A], len(imgs))
	oracles := make([]func(Q) A, len(imgs))
	for i, k := range imgs {
		forms[i], tbs[i] = c.Tables(t, k)
		oracles[i] = c.Oracle(t, k)
	}
	rapid.Check(t, func(rt *rapid.T) {
		i := rapid.IntRange(0, len(imgs)-1).Draw(rt, "img")
		q := c.Draw(rt, imgs[i])
		c.AskAll(rt, forms[i], tbs[i], oracles[i](q), q)
	})
}

// errors: Index() says why there is no index, with the package's errors
// (which match lib's shared reasons too).
func (c Check[Q, A]) errors(t *testing.T) {
	k := c.RapidImages(t)[0]
	on := sim.Switches(0).With(c.Index)
	is := func(name string, err, pkg, shared error) {
		t.Helper()
		if !errors.Is(err, pkg) || !errors.Is(err, shared) {
			t.Fatalf("%s: %v, want %v (and %v)", name, err, pkg, shared)
		}
	}
	tb := c.New(t, k, on, nil)
	_, _, err := tb.IndexInfo()
	is("before late init", err, c.ErrNotLateInit, lib.ErrNotLateInit)
	if tb.Indexed() {
		t.Fatal("indexed before late init")
	}
	if err := tb.LateInit(nil); err != nil {
		t.Fatal(err)
	}
	if n, _, err := tb.IndexInfo(); err != nil || !tb.Indexed() || n == 0 {
		t.Fatalf("after late init: %v, indexed %v, %d entries", err, tb.Indexed(), n)
	}
	off := c.New(t, k, 0, nil)
	if err := off.LateInit(nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = off.IndexInfo()
	is("switch off", err, c.ErrIndexOff, lib.ErrIndexOff)
	if off.Indexed() {
		t.Fatal("indexed with the switch off")
	}
	f, err := sim.ParseFaults(c.Fault.Name())
	if err != nil {
		t.Fatal(err)
	}
	failed := c.New(t, k, on, f)
	if err := failed.LateInit(nil); err != nil {
		t.Fatalf("alloc failure: LateInit returned %v, want nil (the check stays linear)", err)
	}
	_, _, err = failed.IndexInfo()
	is("alloc failure", err, c.ErrIndexAlloc, lib.ErrIndexAlloc)
	if failed.Indexed() {
		t.Fatal("indexed after the allocation failed")
	}
}

// memory: the index's figures, as a sorted array and as a B-tree.
func (c Check[Q, A]) memory(t *testing.T) {
	k := c.RapidImages(t)[0]
	figure := func(cs *sim.Counters, name string) int64 {
		for _, nb := range cs.Bytes() {
			if nb.Name == name {
				return nb.Bytes
			}
		}
		t.Fatalf("%s not recorded: %v", name, cs.Bytes())
		return 0
	}
	on := sim.Switches(0).With(c.Index)
	for _, sw := range []sim.Switches{on, on.With(sim.ReservationBtree)} {
		tb := c.New(t, k, sw, nil)
		cs := sim.NewCounters(false)
		if err := tb.LateInit(cs); err != nil {
			t.Fatal(err)
		}
		n, b, err := tb.IndexInfo()
		if err != nil {
			t.Fatal(err)
		}
		if got := figure(cs, c.Name+".index.bytes"); got != b || b == 0 {
			t.Errorf("%v: %s.index.bytes %d, index %d bytes", sw.Names(), c.Name, got, b)
		}
		wantPer := int64(c.EntryBytes)
		if sw.Has(sim.ReservationBtree) {
			wantPer = b / int64(max(1, n))
		} else if b != int64(n*c.EntryBytes) {
			t.Errorf("index of %d entries is %d bytes, want %d each", n, b, c.EntryBytes)
		}
		if got := figure(cs, c.Name+".index.bytes_per_entry"); got != wantPer {
			t.Errorf("%v: bytes_per_entry %d, want %d", sw.Names(), got, wantPer)
		}
	}
}

// fastScan: the simulator's fast path gives the walk's answers and
// exactly its counts (kernel work is unchanged by simulator shortcuts).
func (c Check[Q, A]) fastScan(t *testing.T) {
	k := c.FastImage(t)
	qs := c.FastQueries(k)
	if race.Enabled { // the walk form scans the whole table per query: sample
		qs = every(qs, 4)
	}
	var zero A
	for _, sw := range c.fastSwitches() {
		t.Run(fmt.Sprint(sw.Names()), func(t *testing.T) {
			walk, fast := c.New(t, k, sw, nil), c.New(t, k, sw, nil)
			if err := walk.LateInit(nil); err != nil {
				t.Fatal(err)
			}
			if err := fast.LateInit(nil); err != nil {
				t.Fatal(err)
			}
			fast.EnableFastScan()
			cw, cf := sim.NewCounters(false), sim.NewCounters(false)
			hits := 0
			for _, q := range qs {
				rw, ew := walk.Ask(cw, q)
				rf, ef := fast.Ask(cf, q)
				if rw != rf || (ew == nil) != (ef == nil) {
					t.Fatalf("%+v: walk %v %v, fast %v %v", q, rw, ew, rf, ef)
				}
				// Per query the phase totals (one row, cheap); the whole
				// matrix once at the end (a copy per query was most of
				// the suite's time under -race).
				if cw.PhaseTotal(cw.Current()) != cf.PhaseTotal(cf.Current()) {
					t.Fatalf("%+v: counts differ: walk\n%s fast\n%s", q, cw, cf)
				}
				if rw != zero {
					hits++
				}
			}
			if !slices.Equal(cw.Snapshot(), cf.Snapshot()) {
				t.Fatalf("counts differ: walk\n%s fast\n%s", cw, cf)
			}
			if cw.Sum() == 0 || hits == 0 {
				t.Fatalf("%d counted, %d hits among %d queries: the queries test nothing", cw.Sum(), hits, len(qs))
			}
		})
	}
}

// fastSwitches: linear and indexed, each alone and with every Extra switch.
func (c Check[Q, A]) fastSwitches() []sim.Switches {
	base := []sim.Switches{0, sim.Switches(0).With(c.Index)}
	out := slices.Clone(base)
	for _, x := range c.Extra {
		for _, sw := range base {
			out = append(out, sw.With(x))
		}
	}
	return out
}

// ExampleImage is the small image the packages' examples run on; it
// panics if the image cannot be generated.
func ExampleImage() *image.Kernel {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.JumpEntries, cfg.JumpKeys, cfg.Blacklist = 2000, 1000, 300, 30
	cfg.NoinstrFunctions, cfg.StaticCallSites, cfg.BugEntries = 20, 200, 600
	k, _, err := synth.Generate(cfg)
	if err != nil {
		panic(err)
	}
	return k
}

// Range is one text-reservation question ([Start, End], inclusive) at a
// system_state, for the checks whose answer depends on it
// (jump_label_text_reserved, static_call_text_reserved).
type Range struct {
	St         boot.State
	Start, End uint64
}

// Base is what every reservation table has.
type Base interface {
	LateInit(c *sim.Counters) error
	Indexed() bool
	EnableFastScan()
}

// Reserver is a text-reservation table.
type Reserver interface {
	Base
	TextReserved(c *sim.Counters, start, end uint64) (bool, error)
}

// indexInfo is what the suite reads of a package's Index.
type indexInfo interface {
	Len() int
	Bytes() int64
}

// NewReserved is Check.New for a text-reservation check: newTable is the
// package's New, index its Table's Index method. The table reads the
// system_state each query carries.
func NewReserved[R Reserver, X indexInfo](newTable func(*image.Kernel, sim.Switches, *sim.Faults, func() boot.State) (R, error), index func(R) (X, error),
) func(testing.TB, *image.Kernel, sim.Switches, *sim.Faults) Table[Range, bool] {
	return func(t testing.TB, k *image.Kernel, sw sim.Switches, f *sim.Faults) Table[Range, bool] {
		st := boot.Running
		r, err := newTable(k, sw, f, func() boot.State { return st })
		if err != nil {
			t.Fatal(err)
		}
		return &reserved[R, X]{r: r, st: &st, index: func() (X, error) { return index(r) }}
	}
}

type reserved[R Reserver, X indexInfo] struct {
	r     R
	st    *boot.State
	index func() (X, error)
}

func (t *reserved[R, X]) LateInit(c *sim.Counters) error { return t.r.LateInit(c) }
func (t *reserved[R, X]) Indexed() bool                  { return t.r.Indexed() }
func (t *reserved[R, X]) EnableFastScan()                { t.r.EnableFastScan() }
func (t *reserved[R, X]) IndexInfo() (int, int64, error) { return Info(t.index()) }

func (t *reserved[R, X]) Ask(c *sim.Counters, q Range) (bool, error) {
	*t.st = q.St
	return t.r.TextReserved(c, q.Start, q.End)
}

// Lookup adapts a table whose check answers one address (find_bug,
// within_kprobe_blacklist) to the suite: ask is the check, index the
// table's Index method.
func Lookup[R Base, A comparable, X indexInfo](r R, ask func(R, *sim.Counters, uint64) A, index func(R) (X, error)) Table[uint64, A] {
	return &lookup[R, A, X]{r: r, ask: ask, index: index}
}

type lookup[R Base, A comparable, X indexInfo] struct {
	r     R
	ask   func(R, *sim.Counters, uint64) A
	index func(R) (X, error)
}

func (t *lookup[R, A, X]) LateInit(c *sim.Counters) error { return t.r.LateInit(c) }
func (t *lookup[R, A, X]) Indexed() bool                  { return t.r.Indexed() }
func (t *lookup[R, A, X]) EnableFastScan()                { t.r.EnableFastScan() }
func (t *lookup[R, A, X]) IndexInfo() (int, int64, error) { return Info(t.index(t.r)) }
func (t *lookup[R, A, X]) Unwrap() R                      { return t.r }

func (t *lookup[R, A, X]) Ask(c *sim.Counters, addr uint64) (A, error) {
	return t.ask(t.r, c, addr), nil
}

// Unwrap returns the package's table a Lookup adapts.
func Unwrap[R any](t any) R { return t.(interface{ Unwrap() R }).Unwrap() }

// every returns every n-th element of qs.
func every[Q any](qs []Q, n int) []Q {
	var out []Q
	for i := 0; i < len(qs); i += n {
		out = append(out, qs[i])
	}
	return out
}
