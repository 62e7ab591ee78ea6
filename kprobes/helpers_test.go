package kprobes

import (
	"flag"
	"os"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// base is a typical x86-64 core kernel text address (_text on a KASLR-off
// kernel).
const base = 0xffffffff81000000

func TestMain(m *testing.M) {
	flag.Parse()
	// The model-based test runs with a fixed seed and enough steps unless
	// the user asks otherwise on the command line.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.seed"] && os.Getenv("RAPID_SEED") == "" {
		_ = flag.Set("rapid.seed", "20261130")
	}
	if !set["rapid.steps"] && os.Getenv("RAPID_STEPS") == "" {
		// rapid runs 1/5 of the checks with half the steps under -short;
		// keep the total above 10,000 either way.
		steps := "300"
		if testing.Short() {
			steps = "3000"
		}
		_ = flag.Set("rapid.steps", steps)
	}
	if !set["rapid.nofailfile"] {
		_ = flag.Set("rapid.nofailfile", "true") // the seed reproduces a failure
	}
	os.Exit(m.Run())
}

// register is the registry part of register_kprobe (6.1): get_kprobe; on a
// hit, register_aggr_kprobe's list work (init_aggr_kprobe the first time,
// then add_new_kprobe); on a miss, hlist_add_head_rcu (+ tree insert).
func register(r *Registry, p *Kprobe, c *sim.Counters) error {
	old := r.GetKprobe(p.Addr, c)
	if old == nil {
		return r.Insert(p, c)
	}
	ap := old
	if !old.IsAggr() {
		ap = &Kprobe{}
		if err := r.InitAggrKprobe(ap, old, c); err != nil {
			return err
		}
	}
	return r.AddNewKprobe(ap, p, c)
}

// build registers one fresh probe per address (repeats aggregate).
func build(t testing.TB, withTree bool, addrs ...uint64) (*Registry, []*Kprobe) {
	t.Helper()
	r := NewRegistry(withTree)
	if withTree && treeDesign != 0 {
		r = NewRegistryFor(sim.Switches(0).With(sim.KprobeTree) | treeDesign)
	}
	var ps []*Kprobe
	for _, a := range addrs {
		p := &Kprobe{Addr: a}
		if err := register(r, p, nil); err != nil {
			t.Fatalf("register %#x: %v", a, err)
		}
		ps = append(ps, p)
	}
	return r, ps
}

// treeDesign is added to the switches of the registries build makes with a
// tree: TestIteratorsOnBtree sets kprobe-btree and reruns the iterator
// semantics tests.
var treeDesign sim.Switches

func addrsOf(ps []*Kprobe) []uint64 {
	out := []uint64{}
	for _, p := range ps {
		out = append(out, p.Addr)
	}
	return out
}

func collect(it RangeIter) ([]uint64, error) {
	out := []uint64{}
	for it.Next() {
		out = append(out, it.Probe().Addr)
	}
	return out, it.Err()
}

// log2ceil returns ceil(log2(n)) for n >= 1.
func log2ceil(n int) int {
	k := 0
	for (1 << k) < n {
		k++
	}
	return k
}

// rbHeightBound is the red-black height bound 2*log2(N+1), in nodes.
func rbHeightBound(n int) int { return 2 * log2ceil(n+1) }
