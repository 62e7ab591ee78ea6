package ftrace

import (
	"testing"

	"github.com/kpsim/kpsim/sim"
)

// TestHashAddBits: hash_add sizes its hash fls(min(count, 32)): at most 64
// buckets whatever the count, every entry on the chain of its hash_long.
func TestHashAddBits(t *testing.T) {
	for _, tc := range []struct{ n, bits int }{{1, 1}, {2, 2}, {31, 5}, {32, 6}, {33, 6}, {5000, 6}} {
		ips := make([]uint64, tc.n)
		for i := range ips {
			ips[i] = 0xffffffff81000000 + uint64(i)*0x40
		}
		bits, chains := hashAddChains(ips)
		if bits != tc.bits || len(chains) != 1<<tc.bits {
			t.Errorf("n=%d: %d bits, %d chains; want %d bits", tc.n, bits, len(chains), tc.bits)
		}
		total := 0
		for j, ch := range chains {
			total += len(ch)
			for _, ip := range ch {
				if hashKey(ip, bits) != j {
					t.Fatalf("n=%d: %#x on chain %d, hashes to %d", tc.n, ip, j, hashKey(ip, bits))
				}
			}
		}
		if total != tc.n {
			t.Errorf("n=%d: %d entries in the chains", tc.n, total)
		}
	}
}

// TestUpdateDirectAddWalk: the record walk of ftrace_hash_rec_enable
// against a literal oracle (every record up to the last match looked up on
// its 64-bucket chain), and one text poke batch per 256 sites.
func TestUpdateDirectAddWalk(t *testing.T) {
	ft := newOn(t, smallImage(t))
	for _, k := range []int{1, 40, 300} {
		var ips []uint64
		for p := 0; p < len(ft.flat) && len(ips) < k; p += 3 {
			if r := ft.rec(p); r.Flags&FlDisabled == 0 {
				ips = append(ips, r.IP)
			}
		}
		bits, chains := hashAddChains(ips)
		var nodes, lookups uint64
		left := map[uint64]bool{}
		for _, ip := range ips {
			left[ip] = true
		}
		for p := 0; p < len(ft.flat) && len(left) > 0; p++ {
			r := ft.rec(p)
			if r.Flags&FlDisabled != 0 {
				continue
			}
			lookups++
			ch := chains[hashKey(r.IP, bits)]
			i := 0
			for i < len(ch) && ch[i] != r.IP {
				i++
			}
			if i < len(ch) {
				delete(left, r.IP)
				nodes += uint64(i + 1)
			} else {
				nodes += uint64(len(ch))
			}
		}
		c := sim.NewCounters(false)
		st, err := ft.UpdateDirectAdd(c, ips, sim.PhaseOther)
		if err != nil {
			t.Fatal(err)
		}
		// The oracle's walk, plus the per-site ftrace_find_rec_direct.
		var direct uint64
		for _, ip := range ips {
			for i, x := range chains[hashKey(ip, bits)] {
				if x == ip {
					direct += uint64(i + 1)
				}
			}
		}
		if got := c.Total(OpHashNode); got != nodes+direct {
			t.Errorf("K=%d: %d hash nodes, oracle %d", k, got, nodes+direct)
		}
		if got := c.Total(OpHashLookup); got != uint64(k)+lookups+uint64(k) {
			t.Errorf("K=%d: %d lookups, oracle %d", k, got, uint64(2*k)+lookups)
		}
		if st.Sites != k || st.Batches != (k+TextPokeArrayMax-1)/TextPokeArrayMax {
			t.Errorf("K=%d: %+v", k, st)
		}
	}
	if _, err := ft.UpdateDirectAdd(sim.NewCounters(false), nil, sim.PhaseOther); err != EINVAL {
		t.Errorf("empty hash: %v, want EINVAL", err)
	}
}
