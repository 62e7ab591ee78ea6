package kprobes

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kpsim/kpsim/rhashtable"
	"github.com/kpsim/kpsim/sim"
)

// The hash table's geometry (kernel/kprobes.c).
const (
	KprobeHashBits  = 6                   // KPROBE_HASH_BITS
	KprobeTableSize = 1 << KprobeHashBits // KPROBE_TABLE_SIZE
)

// GoldenRatio64 is GOLDEN_RATIO_64 (include/linux/hash.h).
const GoldenRatio64 = 0x61C8864680B583EB

// HashPtr models include/linux/hash.h:hash_ptr on x86-64: hash_ptr →
// hash_long → hash_64 → hash_64_generic (x86 has no CONFIG_HAVE_ARCH_HASH),
// i.e. (addr * GOLDEN_RATIO_64 mod 2^64) >> (64 - bits). bits must be in
// 1..32 (the kernel's hash_64 returns a u32).
func HashPtr(addr uint64, bits uint) uint32 {
	return uint32(addr * GoldenRatio64 >> (64 - bits))
}

// Errors returned by the registry. None of them is a panic: they are the
// model's answer to a misuse the kernel would WARN on or silently get wrong.
var (
	// ErrInvalid: the probe is not registered (__get_valid_kprobe failed;
	// the kernel's -EINVAL).
	ErrInvalid = errors.New("kprobes: probe is not registered (-EINVAL)")
	// ErrBusy: the probe is already in a registry (hashed or a child).
	ErrBusy = errors.New("kprobes: probe is already registered")
	// ErrExists: an entry for the address is already hashed; the kernel
	// never hashes a second node for an address (it aggregates instead).
	ErrExists = errors.New("kprobes: an entry for this address is already hashed")
	// ErrNotAggr: the operation needs a hashed aggregator.
	ErrNotAggr = errors.New("kprobes: not a hashed aggregator")
	// ErrNotMonotonic: an AddrIter was queried below its previous query.
	ErrNotMonotonic = errors.New("kprobes: address iterator queried below its previous query")
	// ErrStaleCursor: the registry changed while an iterator was live (the
	// kernel would hold kprobe_mutex across the walk).
	ErrStaleCursor = errors.New("kprobes: registry changed while an iterator was live")
	// ErrNoTree: an iterator was asked of a registry built without the
	// probe tree (kprobe-tree switch off).
	ErrNoTree = errors.New("kprobes: registry has no probe tree (kprobe-tree is off)")
	// ErrLookBack: an AddrIter look-back outside 0..MaxLookBack.
	ErrLookBack = errors.New("kprobes: address iterator look-back outside 0..MaxLookBack")
	// ErrNoMem: an alternative index (rhashtable, maple B-tree) could not
	// allocate for an insert; register_kprobe then fails with -ENOMEM.
	// Upstream's hlist and rb_node never allocate.
	ErrNoMem = errors.New("kprobes: the probe index could not allocate (-ENOMEM)")
)

// hashTable is kprobe_table's storage, chosen once when the registry is
// built: the kernel's hlist buckets (kprobeTable), the simulator's
// accelerated form of them (fastTable: same answers, same counts), or a
// lib/rhashtable.c table (kprobe-rhashtable). Each method counts what its
// kernel counterpart walks.
type hashTable interface {
	// getKprobe answers get_kprobe(addr), counted.
	getKprobe(addr uint64, c *sim.Counters) *Kprobe
	// find is getKprobe without counting (simulator-side).
	find(addr uint64) *Kprobe
	// add hashes p (hlist_add_head_rcu, or rhashtable_insert_fast, which
	// may fail with an allocation fault of f).
	add(p *Kprobe, f *sim.Faults, c *sim.Counters) error
	// replace puts ap in old's place (hlist_replace_rcu).
	replace(old, ap *Kprobe, c *sim.Counters) error
	// del unhashes p (hlist_del_rcu, or rhashtable_remove_fast).
	del(p *Kprobe, f *sim.Faults, c *sim.Counters) error
	// hashBits is the table's hash bits (0 for the rhashtable).
	hashBits() uint
	// chainLen and chain describe bucket b (chain: head first).
	chainLen(b int) int
	chain(b int) []*Kprobe
	// entries returns every hashed entry in address order.
	entries() []*Kprobe
	// check verifies the storage's own consistency.
	check() error
	bytes() []sim.NamedBytes
}

// Registry models the registered-probe state of kernel/kprobes.c:
// kprobe_table[] and, with P4, the address-ordered tree kept in lock-step
// with it. The zero value is not usable; call NewRegistry.
//
// The alternative designs change the storage, never the answers:
// kprobe-hash-bits=B sizes kprobe_table to 2^B buckets, kprobe-rhashtable
// replaces it by a lib/rhashtable.c table, kprobe-btree keeps the P4 tree
// as a maple-like B-tree instead of an rbtree. Both stores are chosen when
// the registry is built (hashTable, AddrTree).
type Registry struct {
	table hashTable // kprobe_table[] (or its replacement)
	tree  AddrTree  // the P4 tree (rbtree, B-tree, or none)
	n     int
	gen   uint64

	// Faults, if set, gives the fault plan the alternative indexes'
	// allocations consult (kprobes.New points it at Kprobes.Faults).
	Faults func() *sim.Faults

	// AllDisarmed models kprobes_all_disarmed (debugfs kprobes/enabled=0).
	AllDisarmed bool
}

// SimOptions are the simulator's own choices for a model instance: how it
// finds its answers, never what they are or what they count.
type SimOptions struct {
	// Walk makes the model walk what the kernel walks (the get_kprobe
	// chains, the slot pages, every decode) instead of answering from the
	// simulator's indexes; the differential tests' reference.
	Walk bool
	// WrapTree, if set, wraps the P4 tree the registry is built with
	// (tests inject a model bug under the range iterators with it).
	WrapTree func(AddrTree) AddrTree
}

// NewRegistry returns an empty registry. withTree turns on the P4 tree
// (sim.KprobeTree); the hash table is always maintained, as upstream.
func NewRegistry(withTree bool) *Registry {
	var ss sim.Switches
	if withTree {
		ss = ss.With(sim.KprobeTree)
	}
	return NewRegistryFor(ss)
}

// NewRegistryFor returns an empty registry as the switches in ss shape it:
// the P4 tree with kprobe-tree (a B-tree with kprobe-btree), kprobe_table
// with 2^B buckets with kprobe-hash-bits=B, an rhashtable in its place with
// kprobe-rhashtable.
func NewRegistryFor(ss sim.Switches) *Registry { return NewRegistryWith(ss, SimOptions{}) }

// NewRegistryWith is NewRegistryFor with the simulator's options.
func NewRegistryWith(ss sim.Switches, o SimOptions) *Registry {
	r := &Registry{}
	bits := ss.HashBits()
	switch {
	case ss.Has(sim.KprobeRhashtable):
		r.table = newRhtTable()
	case o.Walk:
		r.table = newKprobeTable(bits)
	default:
		r.table = newFastTable(bits)
	}
	switch {
	case ss.Has(sim.KprobeTree) && ss.Has(sim.KprobeBtree):
		r.tree = newBTIndex()
	case ss.Has(sim.KprobeTree):
		r.tree = newRBIndex()
	default:
		r.tree = noTree{}
	}
	if o.WrapTree != nil {
		r.tree = o.WrapTree(r.tree)
	}
	return r
}

func (r *Registry) faults() *sim.Faults {
	if r.Faults == nil {
		return nil
	}
	return r.Faults()
}

// HasTree reports whether the P4 tree (rbtree or B-tree) is maintained.
func (r *Registry) HasTree() bool { return r.tree.present() }

// HashBits returns the kprobe_table's hash bits (0 with the rhashtable).
func (r *Registry) HashBits() uint { return r.table.hashBits() }

// Bytes returns the memory of the probe index beyond the probes
// themselves: the bucket heads (kprobe.table.bytes, 8 per bucket), or the
// rhashtable and its bucket table (kprobe.rhashtable.bytes, and its peak
// during a rehash), and the tree: an rb_node (3 words) per entry in struct
// kprobe (kprobe.tree.bytes) or the B-tree's 256-byte nodes
// (kprobe.btree.bytes).
func (r *Registry) Bytes() []sim.NamedBytes {
	return append(r.table.bytes(), r.tree.bytes(r.n)...)
}

// Rhashtable returns the rhashtable index (nil unless kprobe-rhashtable).
// Simulator-side, for reports and tests.
func (r *Registry) Rhashtable() *rhashtable.Table[*Kprobe] {
	if t, ok := r.table.(rhtTable); ok {
		return t.t
	}
	return nil
}

// Len returns the number of hashed entries (plain probes plus aggregators).
func (r *Registry) Len() int { return r.n }

// Generation returns a counter bumped by every mutation of the registry
// (insert, replace, delete, aggregator list change). Iterators remember it
// to detect a change while they are live. Flag changes do not bump it.
func (r *Registry) Generation() uint64 { return r.gen }

// TreeHeight returns the height of the P4 tree in nodes (0 without tree).
// Simulator-side.
func (r *Registry) TreeHeight() int { return r.tree.height() }

// ChainLen returns the length of bucket b's chain. Simulator-side.
func (r *Registry) ChainLen(b int) int { return r.table.chainLen(b) }

// Chain returns bucket b's chain in walk order, head (newest) first.
// Simulator-side; allocates.
func (r *Registry) Chain(b int) []*Kprobe { return r.table.chain(b) }

// Entries returns every hashed entry in address order. Simulator-side;
// allocates; uncounted.
func (r *Registry) Entries() []*Kprobe { return r.table.entries() }

// GetKprobe models kernel/kprobes.c:get_kprobe: walk the chain of
// kprobe_table[hash_ptr(addr, KPROBE_HASH_BITS)] from its head, comparing
// p->addr == addr; return the first match or nil (kprobeTable.getKprobe).
// Counts one kprobe.hash.lookup and one kprobe.hash.visit per node
// compared: a hit at chain position j (1-based from the head) costs j, a
// miss the chain length.
//
// With kprobe-hash-bits=B the bucket is hash_ptr(addr, B) of 2^B; a bucket
// array too big for L1 also counts kprobe.hash.head.l2 or .l3. With
// kprobe-rhashtable the lookup is rhashtable_lookup_fast.
func (r *Registry) GetKprobe(addr uint64, c *sim.Counters) *Kprobe {
	return r.table.getKprobe(addr, c)
}

// find returns the entry hashed at addr without counting (simulator-side).
func (r *Registry) find(addr uint64) *Kprobe { return r.table.find(addr) }

// bucket is one kprobe_table[] hlist. The chain is stored oldest-first, so
// the hlist head (the newest node, hlist_add_head_rcu) is the last element
// and a walk from the head runs from the end of the slices backwards. addrs
// mirrors probes[i].Addr so the walk is a tight scan.
type bucket struct {
	addrs  []uint64
	probes []*Kprobe
}

// kprobeTable is kprobe_table[1 << bits] as the kernel keeps it: an hlist
// per bucket, walked from its head.
type kprobeTable struct {
	buckets []bucket
	bits    uint
}

func newKprobeTable(bits uint) *kprobeTable {
	return &kprobeTable{buckets: make([]bucket, 1<<bits), bits: bits}
}

// getKprobe models kernel/kprobes.c:get_kprobe:
//
//	head = &kprobe_table[hash_ptr(addr, KPROBE_HASH_BITS)];
//	hlist_for_each_entry_rcu(p, head, hlist, lockdep_is_held(&kprobe_mutex))
//		if (p->addr == addr)
//			return p;
//	return NULL;
//
// counting one kprobe.hash.visit per node compared.
func (t *kprobeTable) getKprobe(addr uint64, c *sim.Counters) *Kprobe {
	head := &t.buckets[HashPtr(addr, t.bits)]
	c.Inc(opHashLookup)
	headCost(t.bits, c)
	addrs := head.addrs
	n := len(addrs)
	for i := n - 1; i >= 0; i-- {
		if addrs[i] == addr {
			c.Add(opHashVisit, uint64(n-i))
			return head.probes[i]
		}
	}
	c.Add(opHashVisit, uint64(n))
	return nil
}

func (t *kprobeTable) find(addr uint64) *Kprobe { return t.getKprobe(addr, nil) }

// add models hlist_add_head_rcu(&p->hlist, &kprobe_table[hash_ptr(p->addr,
// KPROBE_HASH_BITS)]).
func (t *kprobeTable) add(p *Kprobe, _ *sim.Faults, c *sim.Counters) error {
	b := &t.buckets[HashPtr(p.Addr, t.bits)]
	b.addrs = append(b.addrs, p.Addr)
	b.probes = append(b.probes, p)
	c.Inc(opHashAdd)
	headCost(t.bits, c)
	return nil
}

// replace models hlist_replace_rcu(&old->hlist, &ap->hlist).
func (t *kprobeTable) replace(old, ap *Kprobe, c *sim.Counters) error {
	b := &t.buckets[HashPtr(old.Addr, t.bits)]
	i := slices.Index(b.probes, old) // simulator-side: the kernel has pprev
	b.probes[i] = ap
	c.Inc(opHashReplace)
	return nil
}

// del models hlist_del_rcu(&p->hlist).
func (t *kprobeTable) del(p *Kprobe, _ *sim.Faults, c *sim.Counters) error {
	b := &t.buckets[HashPtr(p.Addr, t.bits)]
	i := slices.Index(b.probes, p) // simulator-side: the kernel has pprev
	b.probes = slices.Delete(b.probes, i, i+1)
	b.addrs = slices.Delete(b.addrs, i, i+1)
	c.Inc(opHashDel)
	return nil
}

func (t *kprobeTable) hashBits() uint     { return t.bits }
func (t *kprobeTable) chainLen(b int) int { return len(t.buckets[b].addrs) }

func (t *kprobeTable) chain(b int) []*Kprobe {
	ps := slices.Clone(t.buckets[b].probes)
	slices.Reverse(ps)
	return ps
}

func (t *kprobeTable) entries() []*Kprobe {
	out := []*Kprobe{}
	for i := range t.buckets {
		out = append(out, t.buckets[i].probes...)
	}
	return sortByAddr(out)
}

func (t *kprobeTable) check() error {
	for i := range t.buckets {
		b := &t.buckets[i]
		if len(b.addrs) != len(b.probes) {
			return fmt.Errorf("registry: bucket %d has %d addresses for %d probes", i, len(b.addrs), len(b.probes))
		}
		for j, p := range b.probes {
			if b.addrs[j] != p.Addr {
				return fmt.Errorf("registry: bucket %d slot %d mirrors %#x, the probe is at %#x", i, j, b.addrs[j], p.Addr)
			}
			if h := HashPtr(p.Addr, t.bits); int(h) != i {
				return fmt.Errorf("registry: probe %#x in bucket %d, hash_ptr says %d", p.Addr, i, h)
			}
		}
	}
	return nil
}

func (t *kprobeTable) bytes() []sim.NamedBytes {
	return []sim.NamedBytes{{Name: "kprobe.table.bytes", Bytes: int64(len(t.buckets)) * 8}}
}

// sortByAddr sorts ps by address and returns it.
func sortByAddr(ps []*Kprobe) []*Kprobe {
	slices.SortFunc(ps, func(a, b *Kprobe) int {
		switch {
		case a.Addr < b.Addr:
			return -1
		case a.Addr > b.Addr:
			return 1
		}
		return 0
	})
	return ps
}

// headCost counts the extra latency of a bucket-head load from a
// kprobe_table bigger than L1 (upstream's 512 bytes never is).
func headCost(bits uint, c *sim.Counters) {
	switch bytes := 8 << bits; {
	case bytes > l2Bytes:
		c.Inc(opHashHeadL3)
	case bytes > l1Bytes:
		c.Inc(opHashHeadL2)
	}
}

// Insert hashes p as the entry for p.Addr: it models
// hlist_add_head_rcu(&p->hlist, &kprobe_table[hash_ptr(p->addr, 6)]) in
// register_kprobe (6.1; __register_kprobe in later kernels) and, with the
// tree, P4's rb insert at the same point. Counted: kprobe.hash.add, and the
// tree descent and rebalance. The kernel only gets here after a get_kprobe
// miss; Insert refuses (ErrExists) rather than hash a second node for an
// address, and refuses a probe that is already registered (ErrBusy).
func (r *Registry) Insert(p *Kprobe, c *sim.Counters) error {
	if p == nil || p.owner != nil || p.parent != nil {
		return ErrBusy
	}
	if r.table.find(p.Addr) != nil {
		return ErrExists
	}
	f := r.faults()
	// A tree that allocates (the B-tree) stores first: a real conversion
	// would preallocate its nodes (mas_preallocate) before touching the
	// hash table.
	if err := r.tree.reserve(p, f, c); err != nil {
		return ErrNoMem
	}
	if err := r.table.add(p, f, c); err != nil {
		r.tree.unreserve(p) // the preallocation is freed (uncounted)
		return ErrNoMem
	}
	r.tree.link(p, c)
	p.owner = r
	r.n++
	r.gen++
	return nil
}

// Replace puts ap in old's place: it models hlist_replace_rcu(&old->hlist,
// &ap->hlist) in init_aggr_kprobe (same chain position) and, with the tree,
// P4's rb_replace_node. old must be hashed here; ap must be unregistered
// and have old's address.
func (r *Registry) Replace(old, ap *Kprobe, c *sim.Counters) error {
	if old == nil || old.owner != r {
		return ErrInvalid
	}
	if ap == nil || ap.owner != nil || ap.parent != nil || ap.Addr != old.Addr {
		return ErrBusy
	}
	if err := r.table.replace(old, ap, c); err != nil {
		return ErrInvalid
	}
	r.tree.replace(old, ap, c)
	old.owner, ap.owner = nil, r
	r.gen++
	return nil
}

// Delete unhashes p: it models hlist_del_rcu(&p->hlist) (unregister, arm
// failure, the optimizer reaping an unused aggregator) and, with the tree,
// P4's rb_erase. It does not touch p's children.
func (r *Registry) Delete(p *Kprobe, c *sim.Counters) error {
	if p == nil || p.owner != r {
		return ErrInvalid
	}
	if err := r.table.del(p, r.faults(), c); err != nil {
		return ErrInvalid
	}
	r.tree.erase(p, c)
	p.owner = nil
	r.n--
	r.gen++
	return nil
}

// InitAggrKprobe models kernel/kprobes.c:init_aggr_kprobe(ap, p): ap (a
// freshly allocated aggregator, as from alloc_aggr_kprobe) takes p's opcode
// (copy_kprobe), address and flags minus OPTIMIZED, becomes an aggregator
// (pre_handler = aggr_pre_handler), carries aggr_post_handler if p has a
// post handler and is not gone, gets p as its only child, and replaces p in
// the table and tree (Replace). ap.Opt and ap.Queue are left as the caller
// prepared them.
func (r *Registry) InitAggrKprobe(ap, p *Kprobe, c *sim.Counters) error {
	if p == nil || p.owner != r || p.aggr {
		return ErrInvalid
	}
	if ap == nil || ap.owner != nil || ap.parent != nil || ap.aggr {
		return ErrBusy
	}
	ap.Opcode = p.Opcode
	ap.Addr = p.Addr
	ap.Flags = p.Flags &^ KprobeFlagOptimized
	ap.aggr = true
	ap.HasPostHandler = p.HasPostHandler && !p.Gone()
	ap.children = append(ap.children[:0], p)
	if err := r.Replace(p, ap, c); err != nil {
		ap.aggr, ap.children = false, nil
		return err
	}
	p.parent = ap
	return nil
}

// AddNewKprobe models copy_kprobe(ap, p) followed by
// kernel/kprobes.c:add_new_kprobe(ap, p) in register_aggr_kprobe: p takes
// ap's opcode, is added at the head of ap->list (list_add_rcu), and ap gets
// aggr_post_handler if p has a post handler. The unoptimize_kprobe(ap, true)
// that add_new_kprobe does first for a post-handler probe is the caller's
// (it is optimizer work, not registry work).
func (r *Registry) AddNewKprobe(ap, p *Kprobe, c *sim.Counters) error {
	if ap == nil || ap.owner != r || !ap.aggr {
		return ErrNotAggr
	}
	if p == nil || p.owner != nil || p.parent != nil || p == ap {
		return ErrBusy
	}
	p.Opcode = ap.Opcode
	ap.children = slices.Insert(ap.children, 0, p)
	p.parent = ap
	if p.HasPostHandler {
		ap.HasPostHandler = true
	}
	r.gen++
	return nil
}

// GetValidKprobe models kernel/kprobes.c:__get_valid_kprobe: get_kprobe(
// p->addr); the entry itself if it is p; else ap if p is on ap->list (a
// counted walk, kprobe.aggr.visit per child compared); else nil.
func (r *Registry) GetValidKprobe(p *Kprobe, c *sim.Counters) *Kprobe {
	ap := r.GetKprobe(p.Addr, c)
	if ap == nil {
		return nil
	}
	if ap == p {
		return ap
	}
	for i, q := range ap.children {
		if q == p {
			c.Add(opAggrVisit, uint64(i+1))
			return ap
		}
	}
	c.Add(opAggrVisit, uint64(len(ap.children)))
	return nil
}

// aggrKprobeDisabled models kernel/kprobes.c:aggr_kprobe_disabled: true
// unless some child is enabled (counted walk, stops at the first enabled).
func aggrKprobeDisabled(ap *Kprobe, c *sim.Counters) bool {
	for i, q := range ap.children {
		if !q.Disabled() {
			c.Add(opAggrVisit, uint64(i+1))
			return false
		}
	}
	c.Add(opAggrVisit, uint64(len(ap.children)))
	return true
}

// UnregisterOps are the pipeline steps unregistration calls that are not
// registry work. A nil *UnregisterOps or a nil field skips the step (the
// registry then models flags and membership only).
type UnregisterOps struct {
	// DisarmKprobe models disarm_kprobe(p, true) (remove the int3 or queue
	// the unoptimization, re-optimize a blocked neighbour). An error makes
	// __disable_kprobe undo the DISABLED flag and fail.
	DisarmKprobe func(p *Kprobe) error
	// OptimizeKprobe models optimize_kprobe(ap) after a child left.
	OptimizeKprobe func(ap *Kprobe)
	// ArchRemoveKprobe models arch_remove_kprobe(p) for an independent
	// probe (frees the insn slot).
	ArchRemoveKprobe func(p *Kprobe)
	// FreeAggrKprobe models free_aggr_kprobe(ap) after its last child left.
	FreeAggrKprobe func(ap *Kprobe)
}

// disableKprobe models kernel/kprobes.c:__disable_kprobe.
func (r *Registry) disableKprobe(p *Kprobe, ops *UnregisterOps, c *sim.Counters) (*Kprobe, error) {
	orig := r.GetValidKprobe(p, c)
	if orig == nil {
		return nil, ErrInvalid
	}
	if !p.Disabled() {
		if p != orig {
			p.Flags |= KprobeFlagDisabled
		}
		if p == orig || aggrKprobeDisabled(orig, c) {
			if !r.AllDisarmed && !orig.Disabled() && ops != nil && ops.DisarmKprobe != nil {
				if err := ops.DisarmKprobe(orig); err != nil {
					p.Flags &^= KprobeFlagDisabled
					return nil, err
				}
			}
			orig.Flags |= KprobeFlagDisabled
		}
	}
	return orig, nil
}

// UnregisterKprobe models kernel/kprobes.c:unregister_kprobe(p), i.e.
// __unregister_kprobe_top then (after synchronize_rcu, not modelled here)
// __unregister_kprobe_bottom:
//
//   - __disable_kprobe: __get_valid_kprobe (1 get_kprobe + list walk);
//     ErrInvalid if p is not registered. A child is flagged DISABLED; if p
//     is the entry, or every child of its aggregator is now disabled, the
//     entry is disarmed (ops.DisarmKprobe unless all disarmed or already
//     disabled) and flagged DISABLED.
//   - p is the entry: it is unhashed (Delete), then ops.ArchRemoveKprobe.
//   - p is a child and the only one, and the aggregator is disarmed
//     (kprobe_disarmed: disabled and on no optimizer list): the aggregator
//     is unhashed, p leaves its list, ops.FreeAggrKprobe.
//   - otherwise p leaves ap->list (the aggregator stays hashed: it still has
//     children, or it is queued for unoptimization and is now unused, left
//     for the optimizer to reap with Delete); ap loses aggr_post_handler if
//     p had the last post handler (unless ap is on ftrace); and if ap is
//     enabled and not all disarmed, ops.OptimizeKprobe(ap).
func (r *Registry) UnregisterKprobe(p *Kprobe, ops *UnregisterOps, c *sim.Counters) error {
	if p == nil {
		return ErrInvalid
	}
	ap, err := r.disableKprobe(p, ops, c)
	if err != nil {
		return err
	}
	if ap == p {
		if err := r.Delete(ap, c); err != nil {
			return err
		}
		if ops != nil && ops.ArchRemoveKprobe != nil {
			ops.ArchRemoveKprobe(p)
		}
		return nil
	}
	if len(ap.children) == 1 && ap.Disarmed() {
		if err := r.Delete(ap, c); err != nil {
			return err
		}
		// __unregister_kprobe_bottom: p is the last child.
		ap.children = ap.children[:0]
		p.parent = nil
		if ops != nil && ops.FreeAggrKprobe != nil {
			ops.FreeAggrKprobe(ap)
		}
		return nil
	}
	if p.HasPostHandler && !p.Gone() {
		other := false
		var visits uint64
		for _, q := range ap.children {
			visits++
			if q != p && q.HasPostHandler {
				other = true
				break
			}
		}
		c.Add(opAggrVisit, visits)
		if !other && !ap.Ftrace() {
			ap.HasPostHandler = false
		}
	}
	r.removeChild(ap, p)
	if !ap.Disabled() && !r.AllDisarmed && ops != nil && ops.OptimizeKprobe != nil {
		ops.OptimizeKprobe(ap)
	}
	return nil
}

// removeChild models list_del_rcu(&p->list): p leaves ap's list (O(1) in
// the kernel; the simulator searches its slice). The table is unchanged.
func (r *Registry) removeChild(ap, p *Kprobe) {
	if i := slices.Index(ap.children, p); i >= 0 {
		ap.children = slices.Delete(ap.children, i, i+1)
		p.parent = nil
		r.gen++
	}
}
