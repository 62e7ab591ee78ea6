package ftrace

import (
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/kpsim/kpsim/sim"
)

// setMany is ftrace_set_filter_ips on the literal hash: copy into a
// 1024-bucket temporary hash, add every ip not yet there (counting the
// chain nodes __ftrace_lookup_ip compares), dup_hash.
func (h *literalHash) setMany(ips []uint64) (nodes uint64) {
	tmp := h.copyDefault()
	for _, ip := range ips {
		j := hashKey(ip, HashDefaultBits)
		ch := tmp.chain(j)
		found := false
		for i, e := range ch {
			if e == ip {
				nodes += uint64(i + 1)
				found = true
				break
			}
		}
		if found {
			continue
		}
		nodes += uint64(len(ch))
		tmp.buckets[j] = append(tmp.buckets[j], ip)
		tmp.count++
	}
	*h = tmp.dup()
	return nodes
}

// TestSetFilterIPsOracle: after ftrace_set_filter_ips batches (with
// repeats and ips already present), the filter hash's chains and walks
// match the literal kernel hash, and the counted chain nodes are the
// literal temporary hash's.
func TestSetFilterIPsOracle(t *testing.T) {
	ft := newOn(t, smallImage(t))
	var ips []uint64
	for _, pg := range ft.Pages() {
		for _, r := range pg.Records {
			if r.Flags&FlDisabled == 0 {
				ips = append(ips, r.IP)
			}
		}
	}
	nodeOp := OpHashNode
	check := func(rt interface{ Fatalf(string, ...any) }, h *filterHash, lit *literalHash) {
		if h.count != lit.count || h.bits != lit.bits {
			rt.Fatalf("count/bits %d/%d, literal %d/%d", h.count, h.bits, lit.count, lit.bits)
		}
		for j := range lit.buckets {
			for i, ip := range lit.chain(j) {
				if got := h.chainPos(ip); got != i+1 {
					rt.Fatalf("ip %#x at chain %d position %d, literal %d", ip, j, got, i+1)
				}
			}
		}
		if got, want := ft.recUpdateWalk(h), ft.bruteRecUpdate(h); got != want {
			rt.Fatalf("rec-update walk %+v, literal %+v", got, want)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		o := ft.NewOps("test")
		defer func() { ft.FreeFilter(nil, o); ft.ReleaseOps(o) }()
		var lit literalHash
		for b := rapid.IntRange(1, 3).Draw(rt, "batches"); b > 0; b-- {
			n := rapid.IntRange(1, 400).Draw(rt, "n")
			batch := make([]uint64, n)
			for i := range batch {
				batch[i] = ips[rapid.IntRange(0, len(ips)-1).Draw(rt, "ip")]
			}
			c := sim.NewCounters(false)
			if err := ft.SetFilterIPs(c, o, batch); err != nil {
				rt.Fatalf("SetFilterIPs: %v", err)
			}
			want := lit.setMany(batch)
			if got := c.Total(nodeOp); got != want {
				rt.Fatalf("chain nodes %d, literal %d", got, want)
			}
			check(rt, &o.hash, &lit)
		}
	})
	// One large batch past 2^11 entries (dup_hash above 10 bits).
	o := ft.NewOps("large")
	var lit literalHash
	perm := rand.New(rand.NewPCG(3, 3)).Perm(len(ips))
	var batch []uint64
	for _, i := range perm[:min(2500, len(perm))] {
		batch = append(batch, ips[i])
	}
	c := sim.NewCounters(false)
	if err := ft.SetFilterIPs(c, o, batch); err != nil {
		t.Fatal(err)
	}
	if want := lit.setMany(batch); c.Total(nodeOp) != want {
		t.Fatalf("chain nodes %d, literal %d", c.Total(nodeOp), want)
	}
	if o.hash.bits <= HashDefaultBits {
		t.Fatalf("large batch reached only %d bits", o.hash.bits)
	}
	check(t, &o.hash, &lit)
	// Registered: every record of the set is patched in one update.
	c.Reset()
	if err := ft.RegisterFunction(c, o); err != nil {
		t.Fatal(err)
	}
	if got := c.Total(OpReplaceSite); got != uint64(len(batch)) {
		t.Errorf("%d sites patched, want %d", got, len(batch))
	}
	// text_poke_queue flushes every TP_VEC_MAX (256) sites, and
	// text_poke_finish the rest.
	if got, want := c.Total(OpTextPokeBatch), uint64((len(batch)+TextPokeArrayMax-1)/TextPokeArrayMax); got != want || want < 2 {
		t.Errorf("%d text_poke batches for %d sites, want %d", got, len(batch), want)
	}
	// A non-traceable address fails the whole call with -EINVAL.
	o2 := ft.NewOps("bad")
	if err := ft.SetFilterIPs(nil, o2, []uint64{ips[0], 1}); err != EINVAL {
		t.Errorf("untraceable ip: %v, want -EINVAL", err)
	}
	if o2.hash.count != 0 {
		t.Errorf("failed call left %d entries", o2.hash.count)
	}
}
