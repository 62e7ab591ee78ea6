package fprobe

import (
	"github.com/kpsim/kpsim/errno"
	"github.com/kpsim/kpsim/ftrace"
	"github.com/kpsim/kpsim/image"
	"github.com/kpsim/kpsim/sim"
)

// genFacts are the kernel/trace/fprobe.c forms of the modelled
// generations, chosen once per Env from its ftrace's generation (the
// image's).
type genFacts struct {
	gen image.Generation
	// register, unregister: register_fprobe_ips and unregister_fprobe
	// (for kprobe.multi links 7.3 calls unregister_fprobe_async).
	register   func(e *Env, c *sim.Counters, fp *Fprobe, addrs []uint64) error
	unregister func(e *Env, c *sim.Counters, fp *Fprobe) error
	// initRethook is fprobe_init_rethook (6.1.192, 6.12.117; nil in 7.3,
	// which has no rethook).
	initRethook func(e *Env, c *sim.Counters, fp *Fprobe, num int) error
	// reregister is register_fprobe_ips' errno for an fprobe that is
	// already registered: -EBUSY from __register_ftrace_function's
	// WARN_ON(FTRACE_OPS_FL_ENABLED) (6.1.192, 6.12.117), -EEXIST from
	// fprobe_registered (7.3).
	reregister error
}

// genTable is filled in init: its model functions read it back (facts).
var genTable map[image.Generation]*genFacts

func init() {
	genTable = map[image.Generation]*genFacts{
		image.Gen61: {gen: image.Gen61, register: registerFprobeIPs, unregister: unregisterFprobe,
			initRethook: initRethook, reregister: errno.EBUSY},
		image.Gen612: {gen: image.Gen612, register: registerFprobeIPs, unregister: unregisterFprobe,
			initRethook: initRethook612, reregister: errno.EBUSY},
		image.Gen73: {gen: image.Gen73, register: registerFprobeIPs73, unregister: unregisterFprobeAsync73,
			reregister: errno.EEXIST},
	}
}

// facts returns the Env's generation facts, chosen on first use from its
// ftrace (ftrace.Ftrace.Generation: the image's).
func (e *Env) facts() *genFacts {
	if e.g == nil {
		g := image.Gen61
		if e.Ftrace != nil {
			g = e.Ftrace.Generation()
		}
		e.g = genTable[g.Effective()]
	}
	return e.g
}

// Generation is the fprobe.c generation this Env follows.
func (e *Env) Generation() image.Generation { return e.facts().gen }

// shared is 7.3's global fprobe state: fprobe_ftrace_ops (entry-only
// fprobes) and fprobe_graph_ops (fprobes with an exit handler), whether
// each is registered, nr_ftrace_fprobes / nr_fgraph_fprobes (nodes), and
// how many nodes of each kind sit on each address of fprobe_ip_table.
type shared struct {
	ops        [2]*ftrace.Ops
	registered [2]bool
	nodes      [2]int
	onIP       [2]map[uint64]int
}
