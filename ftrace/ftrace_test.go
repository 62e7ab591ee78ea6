package ftrace

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/image/synth"
	"github.com/kpsim/kpsim/internal/fixture"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
	"pgregory.net/rapid"
)

// defaultImage is the default synthetic image with IBT on (these tests
// exercise the sym+0 -> sym+4 fentry mapping), generated once per package.
var defaultImage = fixture.OnceImage(func() synth.Config {
	cfg := synth.DefaultConfig()
	cfg.IBT = true
	return cfg
})

// newDefault builds a fresh Ftrace over the shared default image (records
// are copied, the image is not modified).
func newDefault(t testing.TB) *Ftrace { return newOn(t, defaultImage(t)) }

// newOn builds a fresh Ftrace over k with sorted kallsyms.
func newOn(t testing.TB, k *image.Kernel) *Ftrace {
	ft, err := New(k, kallsyms.NewSorted(k), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ft
}

// smallImage is a small synthetic image (fast walks for the oracles).
var smallImage = fixture.OnceImage(func() synth.Config {
	cfg := synth.DefaultConfig()
	cfg.Functions, cfg.InitFunctions = 3000, 200
	cfg.JumpEntries, cfg.JumpKeys, cfg.StaticCallSites, cfg.StaticCallKeys = 1000, 300, 200, 40
	cfg.BugEntries, cfg.Blacklist = 500, 50
	cfg.Modules, cfg.ModuleFunctions = 2, 300
	return cfg
})

// TestGroupsFollowAllocator: the vmlinux groups are exactly
// ftrace_allocate_pages' orders for the image's __mcount_loc count, each
// filled to capacity but the last; each module gets its own groups.
func TestGroupsFollowAllocator(t *testing.T) {
	k := defaultImage(t)
	ft := newDefault(t)
	core := GroupOrders(len(k.McountLocs))
	pages := ft.Pages()
	if len(pages) != len(core)+len(k.Modules) {
		t.Fatalf("groups = %d, want %d core + %d modules", len(pages), len(core), len(k.Modules))
	}
	total := 0
	for i, o := range core {
		pg := pages[i]
		if pg.Order != o || pg.Module != "" {
			t.Fatalf("group %d: order %d module %q, want order %d vmlinux", i, pg.Order, pg.Module, o)
		}
		if i < len(core)-1 && len(pg.Records) != pg.Capacity() {
			t.Fatalf("group %d holds %d of %d records: only the last may be partial", i, len(pg.Records), pg.Capacity())
		}
		total += len(pg.Records)
	}
	if total != len(k.McountLocs) {
		t.Fatalf("vmlinux records %d, want %d", total, len(k.McountLocs))
	}
	for i, m := range k.Modules {
		pg := pages[len(core)+i]
		if pg.Module != m.Name || len(pg.Records) != len(m.McountLocs) {
			t.Fatalf("module group %d: %s with %d records, want %s with %d", i, pg.Module, len(pg.Records), m.Name, len(m.McountLocs))
		}
	}
	// The largest group is 2^order pages of 256 records.
	if got, want := pages[0].Capacity(), EntriesPerPage<<core[0]; got != want {
		t.Fatalf("capacity %d, want %d", got, want)
	}
}

func TestGroupOrders(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{1, []int{0}},
		{256, []int{0}},
		{257, []int{1}}, // 2 pages: order 1 holds 512
		{768, []int{1, 0}},
		{1 << 20, []int{10, 10, 10, 10}}, // capped at MAX_ORDER-1
	} {
		got := GroupOrders(tc.n)
		if len(got) != len(tc.want) {
			t.Fatalf("GroupOrders(%d) = %v, want %v", tc.n, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("GroupOrders(%d) = %v, want %v", tc.n, got, tc.want)
			}
		}
	}
}

// tracedFunc returns a vmlinux function with an fentry site at +4 (IBT)
// from the image, and one without.
func funcs(t testing.TB, k *image.Kernel, ft *Ftrace) (traced, untraced image.Symbol) {
	for _, s := range k.Functions() {
		if s.Size < 16 || k.InitText().Contains(s.Addr) {
			continue
		}
		_, ok := ft.Record(s.Addr + 4)
		if ok && traced.Name == "" {
			traced = s
		}
		if !ok && untraced.Name == "" && s.Name != "__fentry__" && s.Name[0] != '_' {
			if _, ok0 := ft.Record(s.Addr); !ok0 {
				untraced = s
			}
		}
	}
	if traced.Name == "" || untraced.Name == "" {
		t.Fatal("image has no traced or no untraced function")
	}
	return
}

func TestLocation(t *testing.T) {
	k := defaultImage(t)
	ft := newDefault(t)
	tr, un := funcs(t, k, ft)
	pages := ft.Pages()
	g0 := pages[0].Records
	g1 := pages[1].Records
	mod := k.Modules[0]
	init := k.InitText()
	var initSite uint64
	for _, a := range k.McountLocs {
		if init.Contains(a) {
			initSite = a
			break
		}
	}
	cases := []struct {
		name string
		ip   uint64
		want uint64
	}{
		{"fentry site (func+4)", tr.Addr + 4, tr.Addr + 4},
		{"func+0 maps to its fentry site (kallsyms fallback)", tr.Addr, tr.Addr + 4},
		{"inside the 5-byte site returns the site, not ip", tr.Addr + 6, tr.Addr + 4},
		{"last byte of the site", tr.Addr + 8, tr.Addr + 4},
		{"after the site, not a symbol start", tr.Addr + 9, 0},
		{"untraced func+0", un.Addr, 0},
		{"first record", g0[0].IP, g0[0].IP},
		{"last record of group 0", g0[len(g0)-1].IP, g0[len(g0)-1].IP},
		{"first record of group 1", g1[0].IP, g1[0].IP},
		{"module record", mod.McountLocs[0], mod.McountLocs[0]},
		{"init-text record before free", initSite, initSite},
		{"no text at all", 0x1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ft.Location(nil, tc.ip); got != tc.want {
				t.Fatalf("Location(%#x) = %#x, want %#x", tc.ip, got, tc.want)
			}
		})
	}
	ft.FreeInitMem()
	if got := ft.Location(nil, initSite); got != 0 {
		t.Fatalf("after ftrace_free_init_mem Location(init site) = %#x, want 0", got)
	}
	if !ft.TextReserved(nil, tr.Addr, tr.Addr+4) || ft.TextReserved(nil, tr.Addr, tr.Addr+3) {
		t.Fatal("ftrace_text_reserved must cover exactly [site, site+4]")
	}
}

// TestLookupRecCounts: a hit in group g visits g+1 groups and at most
// floor(log2(size))+1 bsearch steps; a miss visits every group; the
// func+0 fallback adds one kallsyms lookup and a second range lookup.
func TestLookupRecCounts(t *testing.T) {
	ft := newDefault(t)
	pages := ft.Pages()
	for g, pg := range pages {
		for _, r := range []Record{pg.Records[0], pg.Records[len(pg.Records)/2], pg.Records[len(pg.Records)-1]} {
			c := sim.NewCounters(false)
			if got := ft.LocationRange(c, r.IP, r.IP); got != r.IP {
				t.Fatalf("group %d: LocationRange(%#x) = %#x", g, r.IP, got)
			}
			if n := c.Total(OpGroup); n != uint64(g+1) {
				t.Fatalf("group %d hit visited %d groups", g, n)
			}
			if n, max := c.Total(OpProbe), uint64(bits.Len(uint(len(pg.Records)))); n < 1 || n > max {
				t.Fatalf("group %d (%d records): %d bsearch steps, want 1..%d", g, len(pg.Records), n, max)
			}
		}
	}
	// A miss between two sites of group 0: every group is visited, group
	// 0's bsearch runs to the end.
	r := pages[0].Records
	c := sim.NewCounters(false)
	if ft.LocationRange(c, r[0].IP+McountInsnSize, r[0].IP+McountInsnSize) != 0 {
		t.Skip("records adjacent")
	}
	if got := c.Total(OpGroup); got != uint64(len(pages)) {
		t.Fatalf("miss visited %d groups, want all %d", got, len(pages))
	}
	if got := c.Total(OpProbe); got < uint64(bits.Len(uint(len(r))))-1 {
		t.Fatalf("miss in group 0: %d bsearch steps, want ≈ log2(%d)", got, len(r))
	}
	// Fallback: func+0 of a traced function.
	k := defaultImage(t)
	tr, _ := funcs(t, k, ft)
	c = sim.NewCounters(false)
	ft.Location(c, tr.Addr)
	if got := c.Total(OpLocationCall); got != 2 {
		t.Fatalf("func+0: %d ftrace_location_range calls, want 2", got)
	}
	if c.Total(kallsyms.OpAddrProbe) == 0 {
		t.Fatal("func+0: kallsyms_lookup_size_offset was not counted")
	}
}

// bruteLocationRange is the oracle: any record whose [ip, ip+5) overlaps
// [start, end].
func bruteLocationRange(ft *Ftrace, start, end uint64) (hits []uint64) {
	for _, pg := range ft.Pages() {
		for _, r := range pg.Records {
			if end >= r.IP && start < r.IP+McountInsnSize {
				hits = append(hits, r.IP)
			}
		}
	}
	return hits
}

func TestLocationProperty(t *testing.T) {
	k := defaultImage(t)
	ft := newDefault(t)
	ks := kallsyms.NewSorted(k)
	locs := k.McountLocs
	rapid.Check(t, func(rt *rapid.T) {
		base := locs[rapid.IntRange(0, len(locs)-1).Draw(rt, "site")]
		start := base + uint64(rapid.IntRange(-64, 64).Draw(rt, "delta"))
		end := start + uint64(rapid.IntRange(0, 40).Draw(rt, "len"))
		hits := bruteLocationRange(ft, start, end)
		got := ft.LocationRange(nil, start, end)
		if len(hits) == 0 {
			if got != 0 {
				rt.Fatalf("LocationRange(%#x,%#x) = %#x, oracle: none", start, end, got)
			}
		} else if !contains(hits, got) {
			rt.Fatalf("LocationRange(%#x,%#x) = %#x, oracle: %#x", start, end, got, hits)
		}
		// ftrace_location oracle.
		want := uint64(0)
		if h := bruteLocationRange(ft, start, start); len(h) > 0 {
			want = h[0]
		} else if size, off, ok := ks.LookupSizeOffset(nil, start); ok && off == 0 {
			if h := bruteLocationRange(ft, start, start+size-1); len(h) > 0 {
				want = h[0]
				if len(h) > 1 {
					want = ft.LocationRange(nil, start, start+size-1) // several: bsearch picks one
				}
			}
		}
		if got := ft.Location(nil, start); got != want {
			rt.Fatalf("Location(%#x) = %#x, oracle %#x", start, got, want)
		}
	})
}

func contains(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// literalHash is the oracle for the filter hash's chain orders: the
// kernel's alloc_and_copy_ftrace_hash + add + dup_hash, with real chains.
// Each chain is stored tail first (its last element is the head), so
// hlist_add_head is an append.
type literalHash struct {
	bits    int
	buckets [][]uint64
	count   int
}

// iterate visits every entry as the kernel's bucket loop does: buckets
// ascending, each chain from head to tail.
func (h *literalHash) iterate(f func(ip uint64)) {
	for _, ch := range h.buckets {
		for i := len(ch) - 1; i >= 0; i-- {
			f(ch[i])
		}
	}
}

// chain returns bucket j from head to tail.
func (h *literalHash) chain(j int) []uint64 {
	ch := h.buckets[j]
	out := make([]uint64, len(ch))
	for i := range ch {
		out[len(ch)-1-i] = ch[i]
	}
	return out
}

// copyDefault copies h into a temporary hash of the default size.
func (h *literalHash) copyDefault() *literalHash {
	tmp := &literalHash{bits: HashDefaultBits, buckets: make([][]uint64, 1<<HashDefaultBits)}
	h.iterate(func(e uint64) {
		j := hashKey(e, HashDefaultBits)
		tmp.buckets[j] = append(tmp.buckets[j], e)
		tmp.count++
	})
	return tmp
}

// dup is dup_hash of h: a copy sized for h's count.
func (h *literalHash) dup() literalHash {
	b := dupHashBits(h.count)
	nh := literalHash{bits: b, buckets: make([][]uint64, 1<<b), count: h.count}
	h.iterate(func(e uint64) {
		k := hashKey(e, b)
		nh.buckets[k] = append(nh.buckets[k], e)
	})
	return nh
}

func (h *literalHash) set(ip uint64, remove bool) {
	tmp := h.copyDefault()
	j := hashKey(ip, HashDefaultBits)
	if remove {
		for i, e := range tmp.buckets[j] {
			if e == ip {
				tmp.buckets[j] = append(tmp.buckets[j][:i:i], tmp.buckets[j][i+1:]...)
				tmp.count--
				break
			}
		}
	} else {
		tmp.buckets[j] = append(tmp.buckets[j], ip)
		tmp.count++
	}
	if tmp.count == 0 {
		*h = literalHash{}
		return
	}
	*h = tmp.dup()
}

// TestFilterHashOracle: chain positions and lengths, and the walk sums,
// match the literal kernel hash and the literal walks over a random
// add/remove sequence (sizes crossing 2^11 so dup_hash goes above 10 bits).
func TestFilterHashOracle(t *testing.T) {
	ft := newOn(t, smallImage(t))
	var ips []uint64
	for _, pg := range ft.Pages() {
		for _, r := range pg.Records {
			ips = append(ips, r.IP)
		}
	}
	check := func(rt interface {
		Fatalf(string, ...any)
	}, h *filterHash, lit *literalHash) {
		if h.count != lit.count || h.bits != lit.bits {
			rt.Fatalf("count/bits %d/%d, literal %d/%d", h.count, h.bits, lit.count, lit.bits)
		}
		for j := range lit.buckets {
			ch := lit.chain(j)
			if got := h.chainLen(j); got != len(ch) {
				rt.Fatalf("chain %d length %d, literal %d", j, got, len(ch))
			}
			for i, ip := range ch {
				if got := h.chainPos(ip); got != i+1 {
					rt.Fatalf("ip %#x at chain %d position %d, literal %d", ip, j, got, i+1)
				}
			}
		}
		if got, want := ft.recUpdateWalk(h), ft.bruteRecUpdate(h); got != want {
			rt.Fatalf("rec-update walk %+v, literal %+v", got, want)
		}
		if got, want := ft.fullWalk(h), ft.bruteWalk(h, len(ft.flat)); got != want {
			rt.Fatalf("full walk %+v, literal %+v", got, want)
		}
	}
	run := func(h *filterHash, lit *literalHash, in map[uint64]bool, ip uint64) {
		remove := in[ip]
		ft.change(h, ip, !remove)
		lit.set(ip, remove)
		in[ip] = !remove
	}
	// Small hashes (size_bits <= 10), random add/remove sequences.
	rapid.Check(t, func(rt *rapid.T) {
		var h filterHash
		var lit literalHash
		in := map[uint64]bool{}
		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		for s := 0; s < steps; s++ {
			run(&h, &lit, in, ips[rapid.IntRange(0, len(ips)-1).Draw(rt, "ip")])
		}
		check(rt, &h, &lit)
	})
	// One large hash: past 2048 entries dup_hash goes to 11 bits, above
	// the temporary hash's 10; then back below with removals.
	var h filterHash
	var lit literalHash
	in := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(9, 9))
	perm := rng.Perm(len(ips))
	for _, i := range perm[:min(2300, len(perm))] {
		run(&h, &lit, in, ips[i])
	}
	if h.bits <= HashDefaultBits {
		t.Fatalf("large case reached only %d bits", h.bits)
	}
	check(t, &h, &lit)
	for _, i := range perm[:400] {
		run(&h, &lit, in, ips[i])
	}
	check(t, &h, &lit)
}

// tracedSites returns n fentry sites of distinct vmlinux functions.
func tracedSites(ft *Ftrace, n int) []uint64 {
	var out []uint64
	for _, pg := range ft.Pages() {
		if pg.Module != "" {
			continue
		}
		for _, r := range pg.Records {
			if len(out) == n {
				return out
			}
			out = append(out, r.IP)
		}
	}
	return out
}

// TestArmDisarm: each arm copies the whole filter hash, walks the records
// to the last filtered one twice and every record twice in
// ftrace_replace_code, and pokes one site; the first arm registers the
// ops. Counts are asserted against the image's own shape.
func TestArmDisarm(t *testing.T) {
	for _, ipmodify := range []bool{false, true} {
		ft := newDefault(t)
		R := uint64(ft.NumRecords())
		sites := tracedSites(ft, 300)
		o := ft.KprobeOps(ipmodify)
		for i, ip := range sites {
			c := sim.NewCounters(false)
			if err := ft.ArmKprobeFtrace(c, ip, ipmodify); err != nil {
				t.Fatalf("arm %d: %v", i, err)
			}
			if got := c.Total(OpHashCopy); got != uint64(i) {
				t.Fatalf("arm %d copied %d entries, want %d", i, got, i)
			}
			if got := c.Total(OpReplaceCheck); got != 2*R {
				t.Fatalf("arm %d: %d ftrace_check_record calls, want 2R = %d", i, got, 2*R)
			}
			if c.Total(OpReplaceSite) != 1 || c.Total(OpTextPokeBatch) != 1 {
				t.Fatalf("arm %d: sites %d batches %d, want 1/1", i, c.Total(OpReplaceSite), c.Total(OpTextPokeBatch))
			}
			if (c.Total(OpOpsRegister) == 1) != (i == 0) {
				t.Fatalf("arm %d: register_ftrace_function count %d", i, c.Total(OpOpsRegister))
			}
			// Records are in address order: the walks stop at this ip.
			p, _ := ft.posOf(ip)
			pos := uint64(p) + 1
			visits := 2*pos - 1 // disable pass (old hash: stops one earlier) + enable pass
			if i == 0 {
				visits = pos // register's enable pass only
			}
			if ipmodify {
				visits += R
				if i == 0 {
					visits = pos + R
				}
			}
			if got := c.Total(OpRecVisit); got != visits {
				t.Fatalf("arm %d (ipmodify %v): %d records visited, want %d", i, ipmodify, got, visits)
			}
			if r, _ := ft.Record(ip); r.Count() != 1 || r.Flags&FlEnabled == 0 || (ipmodify && r.Flags&FlIPModify == 0) {
				t.Fatalf("arm %d: record flags %#x", i, r.Flags)
			}
		}
		if got := o.Filter(); len(got) != len(sites) || !o.Enabled() || o.Users() != len(sites) {
			t.Fatalf("after arming: filter %d, enabled %v, users %d", len(got), o.Enabled(), o.Users())
		}
		for i := len(sites) - 1; i >= 0; i-- {
			c := sim.NewCounters(false)
			if err := ft.DisarmKprobeFtrace(c, sites[i], ipmodify); err != nil {
				t.Fatalf("disarm %d: %v", i, err)
			}
			if (c.Total(OpOpsUnregister) == 1) != (i == 0) {
				t.Fatalf("disarm %d: unregister count %d", i, c.Total(OpOpsUnregister))
			}
			if r, _ := ft.Record(sites[i]); r.Flags != 0 {
				t.Fatalf("disarm %d: record flags %#x, want 0", i, r.Flags)
			}
		}
		if len(o.Filter()) != 0 || o.Enabled() || o.Users() != 0 || o.HashBits() != 0 {
			t.Fatal("after disarming all: ops not back to EMPTY_HASH / unregistered")
		}
	}
}

func TestArmErrors(t *testing.T) {
	k := defaultImage(t)
	ft := newDefault(t)
	tr, un := funcs(t, k, ft)
	sites := tracedSites(ft, 3)
	cases := []struct {
		name string
		run  func() error
		want Errno
	}{
		{"untraced function: ftrace_location 0", func() error { return ft.ArmKprobeFtrace(nil, un.Addr, false) }, EINVAL},
		{"not in the filter", func() error {
			if err := ft.ArmKprobeFtrace(nil, sites[0], false); err != nil {
				return err
			}
			if err := ft.ArmKprobeFtrace(nil, sites[1], false); err != nil {
				return err
			}
			return ft.DisarmKprobeFtrace(nil, sites[2], false)
		}, ENOENT},
		{"foreign IPMODIFY owner, first user (register rolls back)", func() error {
			ft.SetForeignIPModify(tr.Addr + 4)
			return ft.ArmKprobeFtrace(nil, tr.Addr+4, true)
		}, EBUSY},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if o := ft.KprobeOps(true); len(o.Filter()) != 0 || o.Enabled() {
		t.Fatalf("failed register left filter %v enabled %v", o.Filter(), o.Enabled())
	}
	// Conflict while the ops is already registered: ftrace_set_filter_ip -EBUSY.
	if err := ft.ArmKprobeFtrace(nil, sites[2], true); err != nil {
		t.Fatal(err)
	}
	if err := ft.ArmKprobeFtrace(nil, tr.Addr+4, true); !errors.Is(err, EBUSY) {
		t.Fatalf("got %v, want -EBUSY", err)
	}
	if got := ft.KprobeOps(true).Filter(); len(got) != 1 {
		t.Fatalf("filter after -EBUSY: %v", got)
	}
	// -ENOMEM from the hash allocation.
	f := &sim.Faults{}
	f.Set(FaultHashAlloc, 0)
	ft.f = f
	if err := ft.ArmKprobeFtrace(nil, sites[2], false); !errors.Is(err, ENOMEM) {
		t.Fatalf("got %v, want -ENOMEM", err)
	}
}

// TestModuleLoadAndInitFree: a module loaded at run time appends its own
// group; freeing its init text removes its init records.
func TestModuleLoadAndInitFree(t *testing.T) {
	k := smallImage(t)
	base := &image.Kernel{Config: k.Config, Regions: k.Regions, Symbols: k.Symbols, McountLocs: k.McountLocs}
	ft, err := New(base, kallsyms.NewSorted(k), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := k.Modules[0]
	before := len(ft.Pages())
	ft.LoadModule(m)
	if len(ft.Pages()) != before+len(GroupOrders(len(m.McountLocs))) {
		t.Fatalf("module load added %d groups", len(ft.Pages())-before)
	}
	var initSite uint64
	for _, a := range m.McountLocs {
		if m.Init != nil && m.Init.Contains(a) {
			initSite = a
		}
	}
	if initSite == 0 {
		t.Skip("module has no traced init function")
	}
	if ft.Location(nil, initSite) != initSite {
		t.Fatal("module init record missing before free")
	}
	ft.FreeModuleInit(m)
	if ft.LocationRange(nil, initSite, initSite) != 0 {
		t.Fatal("module init record present after ftrace_free_mem")
	}
}

func TestBytes(t *testing.T) {
	ft := newDefault(t)
	c := sim.NewCounters(false)
	ft.SetBytes(c)
	var want int64
	for _, pg := range ft.Pages() {
		want += int64(PageSize<<pg.Order) + FtracePageBytes
	}
	if ft.Bytes() != want || want < int64(ft.NumRecords())*EntrySize {
		t.Fatalf("bytes %d, want %d", ft.Bytes(), want)
	}
}
