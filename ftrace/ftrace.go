// Package ftrace models the parts of the kernel's dynamic ftrace
// (kernel/trace/ftrace.c, arch/x86/kernel/ftrace.c; Debian 6.1.192) that
// kprobe registration reaches:
//
//   - the record table built at boot from __mcount_loc by
//     ftrace_process_locs: struct dyn_ftrace records (ip + flags, 16 bytes)
//     in ftrace_page groups whose sizes come from ftrace_allocate_records'
//     page orders, one chain of groups for vmlinux and one appended per
//     module, with init-text records removed by ftrace_free_init_mem /
//     ftrace_free_mem;
//   - the lookups: lookup_rec (walk of the group list, bsearch inside a
//     group), ftrace_location_range, ftrace_location (with its kallsyms
//     fallback that maps sym+0 to the function's __fentry__ site) and
//     ftrace_text_reserved;
//   - the kprobes-on-ftrace arming path: ftrace_set_filter_ip on
//     kprobe_ftrace_ops / kprobe_ipmodify_ops (copy of the whole filter hash,
//     the record walks of ftrace_hash_move_and_update_ops, x86's two-pass
//     ftrace_replace_code over every record), register_ftrace_function /
//     unregister_ftrace_function on first and last use, as
//     kernel/kprobes.c:__arm_kprobe_ftrace and __disarm_kprobe_ftrace call
//     them.
//
// Every step the kernel takes is counted; the simulator computes the counts
// of the O(R) and O(N) walks from maintained sums instead of re-walking (the
// counts are identical: see the brute-force oracles in the tests).
//
// Assumptions: no other ftrace user is active (no function tracer, no
// livepatch, no BPF trampolines) except what a test sets with
// SetForeignIPModify; ftrace is enabled (ftrace_enabled = 1) and never
// disabled by an anomaly; 4 KiB pages; MAX_ORDER = 11 (x86-64 6.1 default).
package ftrace

import (
	"fmt"
	"slices"
	"sort"

	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// Kernel constants (x86-64, 6.1).
const (
	// PageSize is PAGE_SIZE.
	PageSize = 4096
	// EntrySize is ENTRY_SIZE = sizeof(struct dyn_ftrace): ip 8 + flags 8
	// (x86 has no struct dyn_arch_ftrace members).
	EntrySize = 16
	// EntriesPerPage is ENTRIES_PER_PAGE = PAGE_SIZE / ENTRY_SIZE.
	EntriesPerPage = PageSize / EntrySize
	// MaxPageOrder is MAX_ORDER - 1: __get_free_pages fails above it and
	// ftrace_allocate_records retries one order lower.
	MaxPageOrder = 10
	// McountInsnSize is MCOUNT_INSN_SIZE: the 5-byte call __fentry__ / NOP5.
	McountInsnSize = 5
	// FtracePageBytes is sizeof(struct ftrace_page): next, records, index, order.
	FtracePageBytes = 24
)

// Record flag bits (include/linux/ftrace.h, 6.1). The low 23 bits count the
// ftrace_ops that trace the record (ftrace_rec_count).
const (
	FlEnabled  uint64 = 1 << 31 // FTRACE_FL_ENABLED
	FlRegs     uint64 = 1 << 30 // FTRACE_FL_REGS
	FlRegsEn   uint64 = 1 << 29 // FTRACE_FL_REGS_EN
	FlTramp    uint64 = 1 << 28 // FTRACE_FL_TRAMP
	FlTrampEn  uint64 = 1 << 27 // FTRACE_FL_TRAMP_EN
	FlIPModify uint64 = 1 << 26 // FTRACE_FL_IPMODIFY
	FlDisabled uint64 = 1 << 25 // FTRACE_FL_DISABLED
	RefMax     uint64 = 1<<23 - 1
)

// Record is one struct dyn_ftrace.
type Record struct {
	IP    uint64
	Flags uint64
}

// Count returns ftrace_rec_count(rec).
func (r Record) Count() int { return int(r.Flags & RefMax) }

// Page is one struct ftrace_page: a group of records in one
// __get_free_pages(order) block. Records holds pg->index records; the
// block's capacity is (PAGE_SIZE << Order) / ENTRY_SIZE.
type Page struct {
	Records []Record
	Order   int
	Module  string // owning module, "" for vmlinux
}

// Capacity returns how many records the group's block can hold.
func (p *Page) Capacity() int { return (PageSize << p.Order) / EntrySize }

// Counted operations. Weights and their sources: weights.go.
var (
	OpLocationCall = sim.NewOp("ftrace.location.call", wCall, rCall,
		"one ftrace_location_range call (lookup_rec under rcu_read_lock), from ftrace_location, ftrace_text_reserved or a direct caller")
	OpGroup = sim.NewOp("ftrace.lookup_rec.group", wGroup, rGroup,
		"one ftrace_page visited by lookup_rec (or ftrace_free_mem): pg->index and the first/last record's ip compared with [start, end]")
	OpProbe = sim.NewOp("ftrace.lookup_rec.probe", wProbe, rProbe,
		"one bsearch step inside an ftrace_page: ftrace_cmp_recs on one 16-byte struct dyn_ftrace")
	OpRecVisit = sim.NewOp("ftrace.rec.visit", wRecVisit, rRecVisit,
		"one record visited by do_for_each_ftrace_rec / for_ftrace_rec_iter with its flags test (rec walks, ftrace_replace_code passes, the shutdown sanity walk)")
	OpRecMatch = sim.NewOp("ftrace.rec.match", wRecMatch, rRecMatch,
		"one matched record in __ftrace_hash_rec_update: ref count and REGS/TRAMP flag updates plus its ftrace_test_record")
	OpHashLookup = sim.NewOp("ftrace.hash.lookup", wHashLookup, rHashLookup,
		"one ftrace_lookup_ip / __ftrace_lookup_ip on a non-empty hash: hash_long(ip, size_bits) and the bucket head load")
	OpHashNode = sim.NewOp("ftrace.hash.node", wHashNode, rHashNode,
		"one struct ftrace_func_entry compared on a hash chain (entry->ip == ip)")
	OpHashBucket = sim.NewOp("ftrace.hash.bucket", wHashBucket, rHashBucket,
		"one bucket head read while iterating a whole ftrace_hash (alloc_and_copy_ftrace_hash, dup_hash, ftrace_hash_clear)")
	OpHashBucketInit = sim.NewOp("ftrace.hash.bucket.init", wHashBucketInit, rHashBucketInit,
		"one 8-byte bucket zeroed by alloc_ftrace_hash's kcalloc")
	OpHashCopy = sim.NewOp("ftrace.hash.copy", wHashCopy, rHashCopy,
		"one entry copied by alloc_and_copy_ftrace_hash: add_hash_entry = kmalloc(32) + hash_long + hlist_add_head")
	OpHashMove = sim.NewOp("ftrace.hash.move", wHashMove, rHashMove,
		"one entry moved by dup_hash (__ftrace_hash_move): hlist_del_rcu + hash_long + hlist_add_head")
	OpHashAdd = sim.NewOp("ftrace.hash.add", wHashCopy, rHashCopy,
		"one add_hash_entry of a new ip (__ftrace_match_addr)")
	OpHashFree = sim.NewOp("ftrace.hash.free", wHashFree, rHashFree,
		"one entry kfree'd by free_ftrace_hash (the old filter hash, in its RCU callback; or the removed entry)")
	OpReplaceCheck = sim.NewOp("ftrace.replace.check", wReplaceCheck, rReplaceCheck,
		"one ftrace_test_record (ftrace_check_record) in one of x86 ftrace_replace_code's two passes over every record")
	OpReplaceSite = pokes(3, 110).of(sim.NewOp("ftrace.replace.site", wReplaceSite, rReplaceSite,
		"one call site changed by ftrace_replace_code: ftrace_verify_code (pass 1) + text_poke_queue and ftrace_update_record (pass 2)"))
	OpTextPokeBatch = syncs(pokeBatchSyncs).of(sim.NewOp("ftrace.text_poke.batch", wPokeBatch, rPokeBatch,
		"one text_poke_finish that flushes queued sites: text_poke_bp_batch (int3, three sync-core IPI rounds)"))
	OpOpsRegister = sim.NewOp("ftrace.ops.register", wOpsRegister, rOpsRegister,
		"constant work of one ftrace_startup outside the record and hash walks: add_ftrace_ops, the ops trampoline (created once, then re-pointed with text_poke_bp), update_ftrace_function").
		Range(7000, 50000, rOpsRegisterRange)
	OpOpsUnregister = pokes(3, 0).plus(syncs(opsUnregisterSyncs)).of(sim.NewOp("ftrace.ops.unregister", wOpsUnregister, rOpsUnregister,
		"constant work of one ftrace_shutdown outside the record and hash walks: remove_ftrace_ops, update_ftrace_function"))
	OpUpdateTraceFunc = pokes(12, 0).plus(syncs(updateTraceFuncSyncs)).of(sim.NewOp("ftrace.update_trace_func", wUpdateTraceFunc, rUpdateTraceFunc,
		"FTRACE_UPDATE_TRACE_FUNC in ftrace_modify_all_code: two ftrace_update_ftrace_func calls (4 text_poke_bp) and an smp_call_function sync"))
)

// FaultHashAlloc makes the hash allocation in ftrace_set_hash fail
// (alloc_and_copy_ftrace_hash returns NULL): ftrace_set_filter_ip -ENOMEM.
var FaultHashAlloc = sim.NewFaultPoint("ftrace.hash.alloc",
	"ftrace_set_hash's alloc_and_copy_ftrace_hash fails: ftrace_set_filter_ip returns -ENOMEM")

// Ftrace is the modelled dynamic-ftrace state of one kernel.
type Ftrace struct {
	k     *image.Kernel
	ksyms kallsyms.Resolver
	f     *sim.Faults
	ibt   bool

	pages []*Page // ftrace_pages_start .. ftrace_pages, list order

	// Simulator index over the record list, rebuilt when it changes.
	ver    uint64
	flat   []recRef // global record order of do_for_each_ftrace_rec
	pos    map[uint64]int32
	nonDis int // records without FTRACE_FL_DISABLED

	initFreed bool

	kprobeOps, ipmodifyOps *Ops
	dynOps                 []*Ops // other users' ftrace_ops (fprobes), NewOps order

	// g: the generation's ftrace.c facts (gen.go), chosen in New from
	// the image.
	g *genFacts

	// NoReplay makes every available_filter_functions read run the model
	// (tests of the replay shortcut).
	NoReplay    bool
	availReplay [2]kallsyms.Replay
	foreign     map[uint64]bool // records owned by another IPMODIFY ops

	recMemo *sim.Memo[uint64, *Record] // single-address lookup_rec answers (nil: walk every time)

	// CPUs is num_online_cpus(): every text_poke_sync round of a code
	// update IPIs them (alternative.SyncCPUs). New sets DefaultCPUs; the
	// machine sets the configured count.
	CPUs int
}

// DefaultCPUs is the online CPU count New assumes, kprobes.DefaultConfig's.
const DefaultCPUs = 8

type recRef struct {
	pg  int32
	idx int32
}

// New models ftrace_init → ftrace_process_locs(NULL, __start_mcount_loc,
// __stop_mcount_loc) for vmlinux, the weak-function check that follows it
// (ftrace_check_work_func → test_for_valid_rec), and, for each module of k
// in load order, ftrace_module_init + ftrace_module_enable (not for an
// UNFORMED module, whose records stay FTRACE_FL_DISABLED) and — when the
// module's init text is already gone (Init == nil) — ftrace_free_mem over
// its init range. vmlinux init-text records stay until FreeInitMem.
// ksyms answers ftrace_location's kallsyms fallback and the boot checks;
// f may be nil.
func New(k *image.Kernel, ksyms kallsyms.Resolver, f *sim.Faults) (*Ftrace, error) {
	if ksyms == nil {
		return nil, fmt.Errorf("ftrace: a kallsyms resolver is required")
	}
	ft := &Ftrace{k: k, ksyms: ksyms, f: f, ibt: k.Config.IBT, foreign: map[uint64]bool{}, g: factsFor(k.Config.Gen), CPUs: DefaultCPUs}
	ft.recMemo = newRecMemo() // WalkRecords drops it
	ft.kprobeOps = &Ops{Name: "kprobe_ftrace_ops", ft: ft}
	ft.ipmodifyOps = &Ops{Name: "kprobe_ipmodify_ops", IPModify: true, ft: ft}
	for i := 1; i < len(k.McountLocs); i++ {
		if k.McountLocs[i] < k.McountLocs[i-1] {
			// CONFIG_BUILDTIME_MCOUNT_SORT: vmlinux's table is sorted at
			// build time and not re-sorted at boot.
			return nil, fmt.Errorf("ftrace: vmlinux __mcount_loc is not sorted at index %d (%#x after %#x)", i, k.McountLocs[i], k.McountLocs[i-1])
		}
	}
	ft.processLocs("", k.McountLocs)
	// ftrace_check_work_func: mark weak-function leftovers disabled.
	for _, pg := range ft.pages {
		for i := range pg.Records {
			ft.testForValidRec(&pg.Records[i])
		}
	}
	for _, m := range k.Modules {
		ft.moduleInit(m)
		if m.State != image.ModuleUnformed {
			ft.moduleEnable(m)
		}
		if m.Init == nil {
			ft.freeModuleRecords(m, func(ip uint64) bool { return m.Text == nil || !m.Text.Contains(ip) })
		}
	}
	ft.reindex()
	return ft, nil
}

// maxMcountOffset is FTRACE_MCOUNT_MAX_OFFSET = ENDBR_INSN_SIZE (4 with
// CONFIG_X86_KERNEL_IBT, else 0).
func (ft *Ftrace) maxMcountOffset() uint64 {
	if ft.ibt {
		return 4
	}
	return 0
}

// testForValidRec models kernel/trace/ftrace.c:test_for_valid_rec: a
// record whose ip is not within FTRACE_MCOUNT_MAX_OFFSET of a kallsyms
// symbol start (an unused weak function's leftover) is FTRACE_FL_DISABLED.
// Boot work; not counted.
func (ft *Ftrace) testForValidRec(r *Record) bool {
	_, off, ok := ft.ksyms.LookupSizeOffset(nil, r.IP)
	if !ok || off > ft.maxMcountOffset() {
		r.Flags |= FlDisabled
		return false
	}
	return true
}

// allocateRecords models kernel/trace/ftrace.c:ftrace_allocate_records:
// the order is fls(DIV_ROUND_UP(count, ENTRIES_PER_PAGE)) - 1, capped where
// __get_free_pages would fail (above MAX_ORDER-1); returns the order and
// how many of count the block takes.
func allocateRecords(count int) (order, cnt int) {
	pages := (count + EntriesPerPage - 1) / EntriesPerPage
	order = fls(pages) - 1
	if order > MaxPageOrder {
		order = MaxPageOrder
	}
	cnt = (PageSize << order) / EntrySize
	return order, min(cnt, count)
}

func fls(x int) int {
	n := 0
	for x > 0 {
		n++
		x >>= 1
	}
	return n
}

// GroupOrders models kernel/trace/ftrace.c:ftrace_allocate_pages: the page
// orders of the groups allocated for count records, in list order.
func GroupOrders(count int) []int {
	var out []int
	for count > 0 {
		o, c := allocateRecords(count)
		out = append(out, o)
		count -= c
	}
	return out
}

// processLocs models kernel/trace/ftrace.c:ftrace_process_locs: allocate
// groups for all count locations (ftrace_allocate_pages), fill each group to
// its capacity in ip order skipping NULL entries, append the groups to the
// list (modules get their own groups), free groups left unused by skipped
// entries. 6.12.117 and 7.3 also skip a vmlinux entry outside core and init
// text (genFacts.skipNonText); 6.1.192 keeps it (test_for_valid_rec then
// disables it). Module tables are sorted here (sort(), ftrace_cmp_ips); vmlinux's
// is sorted at build time.
func (ft *Ftrace) processLocs(mod string, locs []uint64) {
	if len(locs) == 0 {
		return
	}
	if mod != "" && ft.f.Fail(FaultPagesAlloc) {
		return // -ENOMEM: no groups allocated, nothing linked
	}
	if mod != "" {
		locs = append([]uint64(nil), locs...)
		sort.Slice(locs, func(i, j int) bool { return locs[i] < locs[j] })
	}
	var groups []*Page
	left := len(locs)
	for _, o := range GroupOrders(len(locs)) {
		pg := &Page{Order: o, Module: mod}
		// Simulator-side: each group's records sized up front (at most
		// its capacity, at most the entries left), not grown one by one.
		n := min(pg.Capacity(), left)
		left -= n
		pg.Records = make([]Record, 0, n)
		groups = append(groups, pg)
	}
	g := 0
	var flags uint64
	if mod != "" {
		flags = FlDisabled // ftrace_update_code: module records start disabled
	}
	for _, ip := range locs {
		if ip == 0 {
			continue
		}
		if mod == "" && ft.g.skipNonText && !ft.kernelText(ip) {
			continue // 6.12+: not core or init text (a zeroed weak function's entry)
		}
		if len(groups[g].Records) == groups[g].Capacity() {
			g++
		}
		groups[g].Records = append(groups[g].Records, Record{IP: ip, Flags: flags})
	}
	ft.pages = append(ft.pages, groups[:g+1]...) // pg_unuse freed
}

// kernelText is is_kernel_text(addr) || is_kernel_inittext(addr): the
// image's core or init text. ftrace_process_locs tests it for vmlinux
// entries when the generation skips non-text ones (6.12.117, 7.3).
func (ft *Ftrace) kernelText(ip uint64) bool {
	if r := ft.k.CoreText(); r != nil && r.Contains(ip) {
		return true
	}
	r := ft.k.InitText()
	return r != nil && r.Contains(ip)
}

// moduleInit models kernel/trace/ftrace.c:ftrace_module_init.
func (ft *Ftrace) moduleInit(m *image.Module) { ft.processLocs(m.Name, m.McountLocs) }

// moduleEnable models the record part of
// kernel/trace/ftrace.c:ftrace_module_enable: clear FTRACE_FL_DISABLED on
// the module's valid records (test_for_valid_rec). With no ftrace_ops
// active nothing is patched.
func (ft *Ftrace) moduleEnable(m *image.Module) {
	for _, pg := range ft.pages {
		if pg.Module != m.Name {
			continue
		}
		for i := range pg.Records {
			r := &pg.Records[i]
			r.Flags &^= FlDisabled
			ft.testForValidRec(r)
		}
	}
}

// freeModuleRecords removes the module's records that gone reports.
func (ft *Ftrace) freeModuleRecords(m *image.Module, gone func(ip uint64) bool) {
	for _, pg := range ft.pages {
		if pg.Module != m.Name {
			continue
		}
		kept := pg.Records[:0]
		for _, r := range pg.Records {
			if !gone(r.IP) {
				kept = append(kept, r)
			}
		}
		pg.Records = kept
	}
	ft.dropEmpty()
}

// dropEmpty unlinks groups whose index reached 0, as ftrace_free_mem does.
func (ft *Ftrace) dropEmpty() {
	kept := ft.pages[:0]
	for _, pg := range ft.pages {
		if len(pg.Records) > 0 {
			kept = append(kept, pg)
		}
	}
	ft.pages = kept
}

// LoadModule models kernel/trace/ftrace.c:ftrace_module_init followed by
// ftrace_module_enable for a module loaded at run time: its records get
// their own groups at the end of the list. Record setup is load work and
// not counted.
func (ft *Ftrace) LoadModule(m *image.Module) {
	ft.moduleInit(m)
	ft.moduleEnable(m)
	ft.reindex()
}

// FreeModuleInit models kernel/trace/ftrace.c:ftrace_free_mem(mod,
// init_layout.base, init_layout.base + size) from do_init_module: the
// module's records inside its init text are removed, emptied groups are
// unlinked. m.Init must still describe the init text being freed.
func (ft *Ftrace) FreeModuleInit(m *image.Module) {
	if m.Init == nil {
		return
	}
	init := m.Init
	ft.freeModuleRecords(m, init.Contains)
	ft.reindex()
}

// FreeInitMem models kernel/trace/ftrace.c:ftrace_free_init_mem →
// ftrace_free_mem(NULL, __init_begin, __init_end): every vmlinux record in
// init text is removed (memmove inside its group), groups left empty are
// unlinked and freed. Called once as the kernel enters
// SYSTEM_FREEING_INITMEM. Not counted (boot work).
func (ft *Ftrace) FreeInitMem() {
	if ft.initFreed {
		return
	}
	ft.initFreed = true
	r := ft.k.InitText()
	if r == nil {
		return
	}
	for _, pg := range ft.pages {
		if pg.Module != "" {
			continue
		}
		kept := pg.Records[:0]
		for _, rec := range pg.Records {
			if !r.Contains(rec.IP) {
				kept = append(kept, rec)
			}
		}
		pg.Records = kept
	}
	ft.dropEmpty()
	ft.reindex()
}

// InitFreed reports whether FreeInitMem ran.
func (ft *Ftrace) InitFreed() bool { return ft.initFreed }

// reindex rebuilds the simulator's flat record index after the list
// changed. The ip -> position map is built on first use (posOf): most runs
// never ask it (no probe on ftrace), and building it was most of a boot's
// ftrace work.
func (ft *Ftrace) reindex() {
	ft.ver++
	n := 0
	for _, pg := range ft.pages {
		n += len(pg.Records)
	}
	ft.flat = slices.Grow(ft.flat[:0], n)
	ft.pos = nil
	ft.nonDis = 0
	for gi, pg := range ft.pages {
		for i, r := range pg.Records {
			ft.flat = append(ft.flat, recRef{int32(gi), int32(i)})
			if r.Flags&FlDisabled == 0 {
				ft.nonDis++
			}
		}
	}
}

// posOf returns the flat position of the first record for ip (simulator
// lookup, uncounted), building the map after a reindex.
func (ft *Ftrace) posOf(ip uint64) (int32, bool) {
	if ft.pos == nil {
		ft.pos = make(map[uint64]int32, len(ft.flat))
		for p := range ft.flat {
			r := ft.rec(p)
			if _, dup := ft.pos[r.IP]; !dup {
				ft.pos[r.IP] = int32(p)
			}
		}
	}
	p, ok := ft.pos[ip]
	return p, ok
}

// rec returns the record at global position p.
func (ft *Ftrace) rec(p int) *Record {
	r := ft.flat[p]
	return &ft.pages[r.pg].Records[r.idx]
}

// Pages returns the group list (ftrace_pages_start order). Callers must not
// modify it.
func (ft *Ftrace) Pages() []*Page { return ft.pages }

// NumRecords returns R, the records in all groups.
func (ft *Ftrace) NumRecords() int { return len(ft.flat) }

// Bytes returns the memory the record table takes: every group's
// 2^order pages plus its struct ftrace_page.
func (ft *Ftrace) Bytes() int64 {
	var n int64
	for _, pg := range ft.pages {
		n += int64(PageSize<<pg.Order) + FtracePageBytes
	}
	return n
}

// SetBytes records the record table's and both kprobe ops' filter hashes'
// footprint on c: "ftrace.records.bytes" and "ftrace.hash.bytes".
func (ft *Ftrace) SetBytes(c *sim.Counters) {
	c.SetBytes("ftrace.records.bytes", ft.Bytes())
	c.SetBytes("ftrace.hash.bytes", ft.kprobeOps.hash.bytes()+ft.ipmodifyOps.hash.bytes())
}

// Record returns the record for ip (simulator lookup, uncounted).
func (ft *Ftrace) Record(ip uint64) (Record, bool) {
	p, ok := ft.posOf(ip)
	if !ok {
		return Record{}, false
	}
	return *ft.rec(int(p)), true
}

// cmpRecs models kernel/trace/ftrace.c:ftrace_cmp_recs for key [start, end].
func cmpRecs(start, end uint64, rec *Record) int {
	if end < rec.IP {
		return -1
	}
	if start >= rec.IP+McountInsnSize {
		return 1
	}
	return 0
}

// bsearchRecs models lib/bsearch.c:__inline_bsearch over one group with
// ftrace_cmp_recs; it returns the record and the comparisons made (each
// one OpProbe, which lookupRec adds once per call).
func bsearchRecs(recs []Record, start, end uint64) (*Record, uint64) {
	base, num := 0, len(recs)
	var probes uint64
	for num > 0 {
		pivot := base + num>>1
		probes++
		switch r := cmpRecs(start, end, &recs[pivot]); {
		case r == 0:
			return &recs[pivot], probes
		case r > 0:
			base = pivot + 1
			num--
		}
		num >>= 1
	}
	return nil, probes
}

// lookupRec models kernel/trace/ftrace.c:lookup_rec: walk the groups,
// skip those that are empty or whose [records[0].ip, records[index-1].ip +
// MCOUNT_INSN_SIZE) misses [start, end], bsearch the others until one
// holds an overlapping record.
func (ft *Ftrace) lookupRec(c sim.Adder, start, end uint64) *Record {
	// The counts are kept locally and added once: this runs for every
	// instruction a registration walks.
	var groups, probes uint64
	var rec *Record
	for _, pg := range ft.pages {
		groups++
		n := len(pg.Records)
		if n == 0 || end < pg.Records[0].IP || start >= pg.Records[n-1].IP+McountInsnSize {
			continue
		}
		r, k := bsearchRecs(pg.Records, start, end)
		probes += k
		if r != nil {
			rec = r
			break
		}
	}
	c.Add(OpGroup, groups)
	c.Add(OpProbe, probes)
	return rec
}

// LocationRange models kernel/trace/ftrace.c:ftrace_location_range: the
// ip of a record whose 5-byte site overlaps [start, end] (end inclusive),
// or 0.
func (ft *Ftrace) LocationRange(c *sim.Counters, start, end uint64) uint64 {
	c.Inc(OpLocationCall)
	if r := ft.findRec(c, start, end); r != nil {
		return r.IP
	}
	return 0
}

// Location models kernel/trace/ftrace.c:ftrace_location: ip itself when a
// record's site covers ip (note: any byte of the 5-byte site, returning
// the record's ip), else — if kallsyms_lookup_size_offset(ip) finds a
// symbol and ip is its start (offset 0) — the record inside [ip, ip+size-1]
// (so func+0 maps to the __fentry__ site at func+4 with IBT), else 0.
func (ft *Ftrace) Location(c *sim.Counters, ip uint64) uint64 {
	loc := ft.LocationRange(c, ip, ip)
	if loc != 0 {
		return loc
	}
	size, off, ok := ft.ksyms.LookupSizeOffset(c, ip)
	if !ok {
		return 0
	}
	if off == 0 {
		loc = ft.LocationRange(c, ip, ip+size-1)
	}
	return loc
}

// TextReserved models kernel/trace/ftrace.c:ftrace_text_reserved: whether
// [start, end] (end inclusive) overlaps an ftrace call site.
func (ft *Ftrace) TextReserved(c *sim.Counters, start, end uint64) bool {
	return ft.LocationRange(c, start, end) != 0
}
