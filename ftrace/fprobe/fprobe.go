// Package fprobe models kernel/trace/fprobe.c as Linux 6.1.192 ships it:
// the rethook-based fprobe (v5.18–v6.13). An fprobe is one struct
// ftrace_ops of its own (fprobe_init sets FTRACE_OPS_FL_SAVE_REGS and the
// fprobe_handler callback) whose filter hash holds every probed address;
// when it has an exit handler, fprobe_init_rethook preallocates a rethook
// with num × num_possible_cpus() × 2 return nodes (kzalloc each, plus
// entry_data_size bytes), and the return is caught by rethook's trampoline.
//
// The fgraph-based fprobe of v6.14+ (Masami Hiramatsu's "tracing: fprobe:
// function_graph based fprobe") differs in what registration walks: all
// fprobes share one ftrace_ops (fprobe_graph_ops) and one fgraph filter,
// fprobe_init calls ftrace_location on every address and builds a per-probe
// node array inserted into fprobe_ip_table, and exit handlers use the
// shadow stack instead of preallocated rethook nodes. Only the 6.1 form is
// modelled here.
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

	ops         *ftrace.Ops
	rethookSize int
	registered  bool
}

// Ops returns the fprobe's ftrace_ops (nil before registration).
func (fp *Fprobe) Ops() *ftrace.Ops { return fp.ops }

// RethookNodes returns how many return nodes were preallocated.
func (fp *Fprobe) RethookNodes() int { return fp.rethookSize }

// RethookBytes is the memory of the preallocated return nodes.
func (fp *Fprobe) RethookBytes() int64 {
	return int64(fp.rethookSize) * int64(RethookNodeBytes+fp.EntryDataSize)
}

// Registered reports whether register_fprobe_ips succeeded.
func (fp *Fprobe) Registered() bool { return fp.registered }

// Env is the kernel an fprobe registers on.
type Env struct {
	Ftrace *ftrace.Ftrace
	// PossibleCPUs is num_possible_cpus().
	PossibleCPUs int
	// Faults injects FaultRethookAlloc; nil injects nothing.
	Faults *sim.Faults
}

// FaultRethookAlloc makes fprobe_init_rethook's allocations fail (-ENOMEM).
var FaultRethookAlloc = sim.NewFaultPoint("fprobe.rethook.alloc",
	"fprobe_init_rethook: rethook_alloc or a node kzalloc fails: register_fprobe_ips returns -ENOMEM")

// initRethook models fprobe_init_rethook(fp, num).
func (e *Env) initRethook(c *sim.Counters, fp *Fprobe, num int) error {
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
	return nil
}

// RegisterFprobeIPs models kernel/trace/fprobe.c:register_fprobe_ips(fp,
// addrs, num): -EINVAL for no addresses; fprobe_init; ftrace_set_filter_ips
// on the fprobe's own ops (which converts each address to its patch site
// with ftrace_location, -EINVAL if one is not traceable); then
// fprobe_init_rethook and register_ftrace_function; on failure
// fprobe_fail_cleanup (rethook_free, ftrace_free_filter).
func (e *Env) RegisterFprobeIPs(c *sim.Counters, fp *Fprobe, addrs []uint64) error {
	if fp == nil || len(addrs) == 0 {
		return errno.EINVAL
	}
	if fp.registered {
		return errno.EBUSY
	}
	ft := e.Ftrace
	if fp.ops == nil {
		fp.ops = ft.NewOps(fmt.Sprintf("fprobe:%s", fp.Name))
	}
	if err := ft.SetFilterIPs(c, fp.ops, addrs); err != nil {
		// ftrace_set_filter_ips failed: no cleanup in 6.1 (the
		// temporary hash was freed by ftrace_set_hash).
		ft.ReleaseOps(fp.ops)
		fp.ops = nil
		return err
	}
	err := e.initRethook(c, fp, len(addrs))
	if err == nil {
		err = ft.RegisterFunction(c, fp.ops)
	}
	if err != nil {
		fp.rethookSize = 0
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

// UnregisterFprobe models unregister_fprobe: rethook_stop,
// unregister_ftrace_function, rethook_free, ftrace_free_filter.
func (e *Env) UnregisterFprobe(c *sim.Counters, fp *Fprobe) error {
	if fp == nil || !fp.registered {
		return errno.EINVAL
	}
	if err := e.Ftrace.UnregisterFunction(c, fp.ops); err != nil {
		return err
	}
	e.Ftrace.FreeFilter(c, fp.ops)
	e.Ftrace.ReleaseOps(fp.ops)
	fp.ops, fp.registered, fp.rethookSize = nil, false, 0
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
