// Package mutant holds deliberate model bugs that tests switch on to show
// the soak campaign (scenarios/soak) finds and shrinks them. Each is a
// plain bool the model reads at one point: a load and a predicted branch,
// no measurable cost, and no count changes while it is off.
//
// Why a bool in the model and not a wrapper in the harness: the injected
// bug must reach the model's own decisions (get_optimized_kprobe's P7
// window feeds optimize and arm decisions), not only the harness's
// queries, or the test would prove less than a real bug would need.
// Users cannot reach it: the package is internal, no flag or file sets it,
// and only the soak tests call Set.
package mutant

// TreeRangeOffByOne makes every P4/P5 range iterator (kprobes.RangeIter:
// Range, RangeClosed, OptimizedWindow, RecoverWindow, CheckOptimizedRange)
// drop its highest address: an off-by-one in the tree's range bound.
var treeRangeOffByOne bool

// TreeRangeOffByOne reports whether the injected off-by-one is on.
func TreeRangeOffByOne() bool { return treeRangeOffByOne }

// SetTreeRangeOffByOne switches the injected bug and returns a function
// that restores the previous setting. For tests only; not safe while a
// model runs on another goroutine.
func SetTreeRangeOffByOne(on bool) (restore func()) {
	prev := treeRangeOffByOne
	treeRangeOffByOne = on
	return func() { treeRangeOffByOne = prev }
}
