package ftrace

import (
	"errors"

	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/kallsyms"
	"github.com/kpsim/kpsim/sim"
)

// ESRCH is ftrace_lookup_symbols' "not every name was found".
const ESRCH = errno.ESRCH

// Ops of ftrace_lookup_symbols and the tracefs function lists.
var (
	OpSymsBsearch = sim.NewOp("ftrace.syms.bsearch", wSymsBsearch, rSymsBsearch,
		"one step of kallsyms_callback's bsearch over the caller's sorted names: pivot pointer load + symbols_cmp call (its characters are kallsyms.chr_cmp)")
	OpSymsCallback = sim.NewOp("ftrace.syms.callback", wSymsCallback, rSymsCallback,
		"one kallsyms_callback invocation's fixed work: the bsearch set-up and, on a name match, the addrs[idx] test")
	OpTShow = sim.NewOp("ftrace.t_show", wTShow, rTShow,
		"t_show / print_rec for one record of available_filter_functions(_addrs): t_func_next's record step, seq_puts of the name (and \"%lx \" of the address for _addrs), the newline; the kallsyms_lookup it makes is counted in kallsyms ops")
)

// ErrNoWalker is returned when the kallsyms model cannot walk its table.
var ErrNoWalker = errors.New("ftrace: the kallsyms resolver cannot walk the symbol table (kallsyms_on_each_symbol)")

// LookupMode selects the cnt == 1 fast path of ftrace_lookup_symbols.
type LookupMode uint8

const (
	// LookupWalk is upstream: always the linear walk.
	LookupWalk LookupMode = iota
	// LookupSingle is the merged fast path (switch ftrace-single-lookup):
	// kallsyms_lookup_name, then only check ftrace_location; the symbol
	// address is stored.
	LookupSingle
	// LookupSingleV1 is the RFC v1 fast path (ftrace-single-lookup-v1):
	// it stores ftrace_location(addr), the patch site.
	LookupSingleV1
)

// LookupModeOf picks the mode the switches select (v1 wins if both are on;
// sim.Switches.Validate refuses that combination).
func LookupModeOf(sw sim.Switches) LookupMode {
	switch {
	case sw.Has(sim.FtraceSingleLookupV1):
		return LookupSingleV1
	case sw.Has(sim.FtraceSingleLookup):
		return LookupSingle
	}
	return LookupWalk
}

// LookupSymbols models kernel/trace/ftrace.c:ftrace_lookup_symbols(
// sorted_syms, cnt, addrs) of the image's generation: addrs is zeroed, then
// kallsyms_on_each_symbol runs kallsyms_callback on every vmlinux symbol in
// address order: a bsearch of its name in sorted (which must be sorted by
// strcmp, as bpf_kprobe_multi_link_attach's sort_r leaves it); a name that
// is not requested, or whose slot is already filled (the first copy in
// address order wins), or whose address is not traceable (ftrace_location
// == 0) is skipped; otherwise the symbol address — not the patch site — is
// stored and the walk stops once every slot is filled. 6.1.192 stops
// after vmlinux; 6.12.117 and 7.3 walk the module symbols next
// (module_kallsyms_on_each_symbol(NULL, ...)) when a name is still
// missing. Not all found → -ESRCH.
//
// mode adds the cnt == 1 fast path in front (Andrey Grodzovsky's
// "ftrace: Optimize ftrace_lookup_symbols for single symbol", RFC v1 and
// the form the review asked for): a = kallsyms_lookup_name(name); if a
// and ftrace_location(a) → addrs[0] = a (v1: ftrace_location(a)), return 0.
// Otherwise — a miss, or a lowest-address copy that is not traceable —
// the full walk follows. 7.3 has the merged form upstream: its walk mode
// is LookupSingle (ftrace_lookup_symbols, 7.3).
func (ft *Ftrace) LookupSymbols(c *sim.Counters, sorted []string, addrs []uint64, mode LookupMode) error {
	w, ok := ft.ksyms.(kallsyms.Walker)
	if !ok {
		return ErrNoWalker
	}
	if mode == LookupWalk && ft.g.lookupSingle {
		mode = LookupSingle // 7.3: the cnt == 1 fast path is upstream
	}
	cnt := len(sorted)
	if cnt == 1 && mode != LookupWalk {
		if a, ok := ft.ksyms.LookupName(c, sorted[0]); ok && a != 0 {
			if loc := ft.Location(c, a); loc != 0 {
				if mode == LookupSingleV1 {
					addrs[0] = loc
				} else {
					addrs[0] = a
				}
				return nil
			}
		}
	}
	clear(addrs[:cnt])
	found := 0
	callback := func(name []byte, addr uint64) int {
		c.Inc(OpSymsCallback)
		idx := bsearchSyms(c, sorted, name)
		if idx < 0 || addrs[idx] != 0 {
			return 0
		}
		if ft.Location(c, addr) == 0 {
			return 0
		}
		addrs[idx] = addr
		found++
		if found == cnt {
			return 1
		}
		return 0
	}
	// cnt == 0 walks everything (found == cnt is only tested after a
	// match) and succeeds; bpf_kprobe_multi_link_attach never passes it.
	if w.OnEachSymbol(c, callback) != 0 {
		return nil
	}
	if ft.g.lookupModules { // 6.12+: module_kallsyms_on_each_symbol(NULL, ...)
		var nb []byte
		w.ModuleOnEachSymbol(c, func(name string, _ *image.Module, addr uint64) int {
			nb = append(nb[:0], name...)
			return callback(nb, addr)
		})
	}
	if found == cnt {
		return nil
	}
	return ESRCH
}

// bsearchSyms is lib/bsearch.c:__inline_bsearch with symbols_cmp (strcmp)
// over sorted: the index of name or -1, every step and character counted.
func bsearchSyms(c *sim.Counters, sorted []string, name []byte) int {
	base, num := 0, len(sorted)
	var chars uint64
	defer func() { c.Add(kallsyms.OpChrCmp, chars) }()
	for num > 0 {
		pivot := base + num>>1
		c.Inc(OpSymsBsearch)
		r, k := strcmpBytes(name, sorted[pivot])
		chars += uint64(k)
		if r == 0 {
			return pivot
		}
		if r > 0 {
			base = pivot + 1
			num--
		}
		num >>= 1
	}
	return -1
}

// strcmpBytes is strcmp(a, b) and the characters it examined (the common
// prefix plus the deciding one, the NUL on equality).
func strcmpBytes(a []byte, b string) (int, int) {
	k := 0
	for k < len(a) && k < len(b) && a[k] == b[k] {
		k++
	}
	switch {
	case k < len(a) && k < len(b):
		if a[k] < b[k] {
			return -1, k + 1
		}
		return 1, k + 1
	case k < len(a):
		return 1, k + 1
	case k < len(b):
		return -1, k + 1
	}
	return 0, k + 1
}
