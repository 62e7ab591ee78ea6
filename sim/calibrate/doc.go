// Package calibrate measures kpsim's cycle weights on the machine it runs
// on: kpsim calibrate.
//
// kpsim's counts are exact; its estimated cycles are counts times one
// weight per counted op. The weights registered with each op come from Go
// micro-benchmarks of the modelled loops or from documented hardware
// facts. A kernel developer's objection is that the kernel is C: this
// package answers it by compiling small C microbenchmarks with the
// system's C compiler (cc -O2), one per op family (the kprobe_table hash
// chains, the probe rbtree, the compressed kallsyms tables, the kernel's
// fixed-stride tables and their indexes, ftrace hashes, small fixed
// costs), running them, and writing a cost file that kpsim run --costs
// reads.
//
// Each benchmark runs in two regimes. hot: a few items repeated, as
// test_kallsyms_perf loops over its 8 names, so the lines stay in L1/L2.
// cold: a distinct item per call, as registering 20k different functions
// does, over the kernel's working set (20k struct kprobe in slab pages,
// the Debian kernel's whole kallsyms table). Caches are defeated only
// where the kernel's working set would defeat them: a table scan reads
// the whole table on every call in both regimes.
//
// Cycles come from a user-space cycle counter (perf_event_open) when the
// kernel gives one; otherwise from the thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID, so time spent preempted by other jobs is not
// counted) times the nominal frequency of /proc/cpuinfo, cross-checked
// against the TSC rate. Repetitions that were preempted are run again (at
// most 3 times); each weight is the median of 15. The file's header
// records the clock, the CPU model, the compiler, the date and the regime.
// Ops user space cannot reach (text_poke, IPIs, RCU grace periods, SLUB)
// keep their documented values, marked so.
//
// x86.decode.insn is the one weight timed in Go: see godecode.go.
//
// Two profiles measured this way are built in (profiles/hot.costs,
// profiles/cold.costs) and selected by --cost-regime; see Builtin.
package calibrate
