// Package fprobe models kernel/trace/fprobe.c per kernel generation.
//
// 6.1.192 and 6.12.117 have the rethook-based fprobe (v5.18–v6.13): an
// fprobe is one struct ftrace_ops of its own (fprobe_init sets
// FTRACE_OPS_FL_SAVE_REGS and the fprobe_handler callback) whose filter
// hash holds every probed address; when it has an exit handler,
// fprobe_init_rethook preallocates num × num_possible_cpus() × 2 return
// nodes — 6.1.192 with one kzalloc per node, 6.12.117 with rethook_alloc's
// objpool_init (one vmalloc'd slot per possible CPU holding its share of
// the nodes) — and the return is caught by rethook's trampoline.
//
// 7.3 has the fgraph-based fprobe (Masami Hiramatsu's "tracing: fprobe:
// function_graph based fprobe", v6.14): fprobes share two global ops —
// fprobe_ftrace_ops for entry-only fprobes, fprobe_graph_ops (fgraph) for
// those with an exit handler. The first user registers the shared ops
// (register_ftrace_function / register_ftrace_graph), later users only
// add their addresses (ftrace_set_filter_ips on the shared ops);
// fprobe_init checks ftrace_location per address (-ENOENT) into a per-probe
// node array inserted into the fprobe_ip_table rhltable; no rethook.
package fprobe

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/sim"
)

// Ops of fprobe registration. Weights and their sources: below.
var (
	OpRethookNode = sim.NewOp("fprobe.rethook.node", wRethookNode, rRethookNode,
		"fprobe_init_rethook: one kzalloc(sizeof(struct fprobe_rethook_node) + entry_data_size) and rethook_add_node (freelist push)")
	OpRethookAlloc = sim.NewOp("fprobe.rethook.alloc", wRethookAlloc, rRethookAlloc,
		"rethook_alloc: the struct rethook (kzalloc) and its handler set-up")
	OpLocationSort = sim.NewOp("fprobe.locations.sort.cmp", wSortCmp, rSortCmp,
		"get_ftrace_locations: one comparison of sort(syms, num, sizeof(char *), symbols_cmp, NULL) (its characters are kallsyms.chr_cmp)")
)

// Weights.
const (
	wRethookNode  = 80
	rRethookNode  = "as ftrace.hash.copy (BenchmarkWeightHashCopy, 30.6 ns ≈ 80 cycles): a SLUB freelist pop of a small object, zeroing and one list push"
	wRethookAlloc = 200
	rRethookAlloc = "hardware fact: one kzalloc of a ~100-byte object (≈ 80 cycles as above) plus freelist_init and the rcu/handler set-up, a few cache lines written (~120 cycles)"
	wSortCmp      = 5
	rSortCmp      = "hardware fact: a sort_r comparison's indirect call and two char* loads from an L1-hot array (~5 cycles); characters priced as kallsyms.chr_cmp"
)

// RethookNodeBytes is sizeof(struct fprobe_rethook_node) on x86-64 6.1:
// struct rethook_node (rcu_head 16, freelist_node 16, rethook* 8,
// ret_addr 8, frame 8 = 56) plus entry_ip 8.
const RethookNodeBytes = 64

// Fprobe is one struct fprobe.
type Fprobe struct {
	// Name labels the ops (a link id).
	Name string
	// EntryHandler, ExitHandler: which callbacks are set.
	EntryHandler, ExitHandler bool
	// EntryDataSize is fp->entry_data_size (a kprobe.session link asks
	// for sizeof(u64) in later kernels; 0 in 6.1).
	EntryDataSize int
	// NrMaxActive is fp->nr_maxactive (0: num × CPUs × 2).
	NrMaxActive int

	ops          *ftrace.Ops
	rethookSize  int
	rethookBytes int64
	registered   bool
	// 7.3: the node addresses (fprobe_hlist's array, ftrace_location of
	// each address) and the shared ops kind (0 ftrace, 1 graph).
	locs []uint64
	kind int
}

// Ops returns the fprobe's ftrace_ops (nil before registration).
func (fp *Fprobe) Ops() *ftrace.Ops { return fp.ops }

// RethookNodes returns how many return nodes were preallocated.
func (fp *Fprobe) RethookNodes() int { return fp.rethookSize }

// RethookBytes is the memory of the preallocated return nodes (6.12.117:
// the objpool slots that hold them).
func (fp *Fprobe) RethookBytes() int64 { return fp.rethookBytes }

// Nodes returns the fprobe_ip_table nodes of a registered 7.3 fprobe
// (one per address; 0 in 6.1 and 6.12).
func (fp *Fprobe) Nodes() int { return len(fp.locs) }

// Registered reports whether register_fprobe_ips succeeded.
func (fp *Fprobe) Registered() bool { return fp.registered }

// Env is the kernel an fprobe registers on.
type Env struct {
	Ftrace *ftrace.Ftrace
	// PossibleCPUs is num_possible_cpus().
	PossibleCPUs int
	// Faults injects FaultRethookAlloc; nil injects nothing.
	Faults *sim.Faults

	g   *genFacts // the generation's fprobe.c (gen.go), from Ftrace
	sh  shared    // 7.3's shared ops and fprobe_ip_table
	why string    // LastRefusal
}

// LastRefusal is the reason of the last registration's refusal when it
// exists only in some generations (naming the generation and the kernel
// function); "" otherwise.
func (e *Env) LastRefusal() string { return e.why }

// FaultRethookAlloc makes fprobe_init_rethook's allocations fail (-ENOMEM).
var FaultRethookAlloc = sim.NewFaultPoint("fprobe.rethook.alloc",
	"fprobe_init_rethook: rethook_alloc or a node kzalloc fails: register_fprobe_ips returns -ENOMEM")

// initRethook models kernel/trace/fprobe.c:fprobe_init_rethook(fp, num)
// (6.1.192): rethook_alloc, then one kzalloc + rethook_add_node per node.
func initRethook(e *Env, c *sim.Counters, fp *Fprobe, num int) error {
	if num <= 0 {
		return errno.EINVAL
	}
	if !fp.ExitHandler {
		return nil
	}
	size := fp.NrMaxActive
	if size == 0 {
		size = num * e.PossibleCPUs * 2
	}
	if size <= 0 {
		return errno.EINVAL
	}
	if e.Faults.Fail(FaultRethookAlloc) {
		return errno.ENOMEM
	}
	c.Inc(OpRethookAlloc)
	c.Add(OpRethookNode, uint64(size))
	fp.rethookSize = size
	fp.rethookBytes = int64(size) * int64(RethookNodeBytes+fp.EntryDataSize)
	return nil
}

// RegisterFprobeIPs is register_fprobe_ips(fp, addrs, num) of the Env's
// generation (registerFprobeIPs: 6.1.192 and 6.12.117;
// registerFprobeIPs73: 7.3).
func (e *Env) RegisterFprobeIPs(c *sim.Counters, fp *Fprobe, addrs []uint64) error {
	e.why = ""
	return e.facts().register(e, c, fp, addrs)
}

// registerFprobeIPs models kernel/trace/fprobe.c:register_fprobe_ips(fp,
// addrs, num) (6.1.192, 6.12.117): -EINVAL for no addresses; fprobe_init;
// ftrace_set_filter_ips on the fprobe's own ops (which converts each
// address to its patch site with ftrace_location, -EINVAL if one is not
// traceable); then fprobe_init_rethook and register_ftrace_function; on
// failure fprobe_fail_cleanup (rethook_free, ftrace_free_filter). An
// fprobe registered already: -EBUSY (register_ftrace_function's
// WARN_ON(FTRACE_OPS_FL_ENABLED)).
func registerFprobeIPs(e *Env, c *sim.Counters, fp *Fprobe, addrs []uint64) error {
	if fp == nil || len(addrs) == 0 {
		return errno.EINVAL
	}
	if fp.registered {
		e.why = fmt.Sprintf("register_fprobe_ips (%s): register_ftrace_function on an FTRACE_OPS_FL_ENABLED ops (7.3: -EEXIST)", e.facts().gen)
		return e.facts().reregister
	}
	ft := e.Ftrace
	if fp.ops == nil {
		fp.ops = ft.NewOps(fmt.Sprintf("fprobe:%s", fp.Name))
	}
	if err := ft.SetFilterIPs(c, fp.ops, addrs); err != nil {
		// ftrace_set_filter_ips failed: no cleanup (the temporary hash
		// was freed by ftrace_set_hash).
		ft.ReleaseOps(fp.ops)
		fp.ops = nil
		return err
	}
	err := e.facts().initRethook(e, c, fp, len(addrs))
	if err == nil {
		err = ft.RegisterFunction(c, fp.ops)
	}
	if err != nil {
		fp.rethookSize, fp.rethookBytes = 0, 0
		ft.FreeFilter(c, fp.ops)
		ft.ReleaseOps(fp.ops)
		fp.ops = nil
		return err
	}
	fp.registered = true
	return nil
}

// RegisterFprobeSyms models register_fprobe_syms(fp, syms, num):
// get_ftrace_locations sorts syms in place (sort() with symbols_cmp),
// calls ftrace_lookup_symbols and turns any failure into -ENOENT; then
// register_fprobe_ips.
func (e *Env) RegisterFprobeSyms(c *sim.Counters, fp *Fprobe, syms []string, mode ftrace.LookupMode) error {
	if fp == nil || len(syms) == 0 {
		return errno.EINVAL
	}
	SortSyms(c, syms, OpLocationSort, nil)
	addrs := make([]uint64, len(syms))
	if err := e.Ftrace.LookupSymbols(c, syms, addrs, mode); err != nil {
		return errno.ENOENT
	}
	return e.RegisterFprobeIPs(c, fp, addrs)
}

// UnregisterFprobe is unregister_fprobe of the Env's generation
// (6.1.192, 6.12.117: unregisterFprobe; 7.3: unregister_fprobe_async, what
// bpf_kprobe_multi_link_release calls, unregisterFprobeAsync73).
func (e *Env) UnregisterFprobe(c *sim.Counters, fp *Fprobe) error {
	return e.facts().unregister(e, c, fp)
}

// unregisterFprobe models kernel/trace/fprobe.c:unregister_fprobe
// (6.1.192, 6.12.117): rethook_stop, unregister_ftrace_function,
// rethook_free, ftrace_free_filter.
func unregisterFprobe(e *Env, c *sim.Counters, fp *Fprobe) error {
	if fp == nil || !fp.registered {
		return errno.EINVAL
	}
	if err := e.Ftrace.UnregisterFunction(c, fp.ops); err != nil {
		return err
	}
	e.Ftrace.FreeFilter(c, fp.ops)
	e.Ftrace.ReleaseOps(fp.ops)
	fp.ops, fp.registered, fp.rethookSize, fp.rethookBytes = nil, false, 0, 0
	return nil
}

// SortSyms sorts names with lib/sort.c's heapsort (sort_r) and strcmp,
// counting each comparison as op and its characters as kallsyms.chr_cmp;
// swap, when non-nil, is called for every swap (cookies follow).
func SortSyms(c *sim.Counters, names []string, op sim.Op, swap func(a, b int)) {
	var cmps, chars uint64
	kernelSortStrings(names, func(a, b string) int {
		cmps++
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		chars += uint64(k + 1)
		return cmp.Compare(a, b)
	}, swap)
	c.Add(op, cmps)
	c.Add(chrCmpOp, chars)
}

// Sorted reports whether names are in strcmp order (a test helper for
// callers that must hand ftrace_lookup_symbols a sorted array).
func Sorted(names []string) bool { return slices.IsSorted(names) }
