package kprobes

import (
	"errors"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

func inTree(r *Registry, addr uint64) *Kprobe {
	it := r.RangeClosed(addr, addr, nil)
	if it.Next() {
		return it.Probe()
	}
	return nil
}

func TestUnregisterPlain(t *testing.T) {
	r, ps := build(t, true, base, base+1)
	var removed []*Kprobe
	ops := &UnregisterOps{
		DisarmKprobe:     func(p *Kprobe) error { return nil },
		ArchRemoveKprobe: func(p *Kprobe) { removed = append(removed, p) },
	}
	c := sim.NewCounters(false)
	if err := r.UnregisterKprobe(ps[0], ops, c); err != nil {
		t.Fatal(err)
	}
	if r.GetKprobe(base, nil) != nil || inTree(r, base) != nil || r.Len() != 1 {
		t.Fatal("probe still in table or tree")
	}
	if len(removed) != 1 || removed[0] != ps[0] || !ps[0].Disabled() || ps[0].Registered() {
		t.Fatal("arch_remove_kprobe not called or flags wrong")
	}
	// __get_valid_kprobe is one get_kprobe.
	if c.Total(opHashLookup) != 1 || c.Total(opHashDel) != 1 || c.Total(opTreeErase) != 1 {
		t.Fatalf("counts: %v", c)
	}
	if err := r.UnregisterKprobe(ps[0], ops, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second unregister: %v", err)
	}
}

func TestUnregisterAggregatorShrinks(t *testing.T) {
	r, ps := build(t, true, base, base, base)
	ap := r.GetKprobe(base, nil)
	if !ap.IsAggr() || ap.NumChildren() != 3 {
		t.Fatal("no aggregator")
	}
	var freed []*Kprobe
	var reopt int
	ops := &UnregisterOps{
		OptimizeKprobe: func(*Kprobe) { reopt++ },
		FreeAggrKprobe: func(a *Kprobe) { freed = append(freed, a) },
	}
	for i, p := range ps[:2] {
		if err := r.UnregisterKprobe(p, ops, nil); err != nil {
			t.Fatal(err)
		}
		if r.GetKprobe(base, nil) != ap || inTree(r, base) != ap || ap.NumChildren() != 2-i {
			t.Fatalf("after %d: aggregator not kept with %d children", i+1, 2-i)
		}
		if ap.Disabled() {
			t.Fatal("aggregator disabled while a child is enabled")
		}
	}
	if reopt != 2 {
		t.Fatalf("optimize_kprobe(ap) called %d times, want 2", reopt)
	}
	if err := r.UnregisterKprobe(ps[2], ops, nil); err != nil {
		t.Fatal(err)
	}
	if r.GetKprobe(base, nil) != nil || inTree(r, base) != nil || r.Len() != 0 {
		t.Fatal("aggregator not unhashed with its last child")
	}
	if len(freed) != 1 || freed[0] != ap || ap.NumChildren() != 0 {
		t.Fatal("free_aggr_kprobe not called")
	}
}

// An optimized aggregator whose last child goes is queued for
// unoptimization by disarm_kprobe, so it is not disarmed: it stays hashed,
// unused, for the optimizer to reap.
func TestUnregisterLeavesUnusedOptprobe(t *testing.T) {
	r, ps := build(t, true, base, base)
	ap := r.GetKprobe(base, nil)
	ap.Opt.Size = 7
	ap.Flags |= KprobeFlagOptimized
	ops := &UnregisterOps{DisarmKprobe: func(p *Kprobe) error {
		if p.Optimized() {
			p.Queue = QueueUnoptimizing // unoptimize_kprobe(p, false)
		}
		return nil
	}}
	for _, p := range ps {
		if err := r.UnregisterKprobe(p, ops, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r.GetKprobe(base, nil) != ap || !ap.Unused() || ap.Disarmed() {
		t.Fatalf("aggregator: hashed=%v unused=%v disarmed=%v", r.GetKprobe(base, nil) == ap, ap.Unused(), ap.Disarmed())
	}
	// The optimizer reaps it.
	ap.Queue = QueueNone
	if err := r.Delete(ap, nil); err != nil || r.Len() != 0 || inTree(r, base) != nil {
		t.Fatal("reap failed")
	}
}

func TestUnregisterPostHandler(t *testing.T) {
	r := NewRegistry(true)
	a := &Kprobe{Addr: base, HasPostHandler: true}
	b := &Kprobe{Addr: base}
	_ = register(r, a, nil)
	_ = register(r, b, nil)
	ap := r.GetKprobe(base, nil)
	if !ap.HasPostHandler {
		t.Fatal("aggregator lacks aggr_post_handler")
	}
	_ = r.UnregisterKprobe(a, nil, nil)
	if ap.HasPostHandler {
		t.Fatal("aggr_post_handler kept after its last user left")
	}
}

func TestUnregisterDisarmFailure(t *testing.T) {
	r, ps := build(t, true, base)
	boom := errors.New("text_poke failed")
	err := r.UnregisterKprobe(ps[0], &UnregisterOps{DisarmKprobe: func(*Kprobe) error { return boom }}, nil)
	if !errors.Is(err, boom) || ps[0].Disabled() || r.GetKprobe(base, nil) != ps[0] {
		t.Fatalf("disarm failure: err %v, disabled %v", err, ps[0].Disabled())
	}
}

func TestMembershipErrors(t *testing.T) {
	r, ps := build(t, true, base)
	if err := r.Insert(ps[0], nil); !errors.Is(err, ErrBusy) {
		t.Fatal(err)
	}
	if err := r.Insert(&Kprobe{Addr: base}, nil); !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	if err := r.Delete(&Kprobe{Addr: base}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := r.AddNewKprobe(ps[0], &Kprobe{Addr: base}, nil); !errors.Is(err, ErrNotAggr) {
		t.Fatal(err)
	}
	if err := r.Replace(ps[0], &Kprobe{Addr: base + 1}, nil); !errors.Is(err, ErrBusy) {
		t.Fatal(err)
	}
	if err := r.UnregisterKprobe(nil, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	other := NewRegistry(true)
	if err := other.Delete(ps[0], nil); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}
