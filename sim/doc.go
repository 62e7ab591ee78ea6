// Package sim is kpsim's simulation core: named operation counters grouped
// into phases, the cost table that turns counts into estimated cycles, the
// patch switches, the seeded random source and fault injection.
//
// kpsim keeps two kinds of work apart everywhere. Counters count what the
// modelled kernel would do (a hash-chain node visited, an instruction
// decoded); the simulator itself may cache or shortcut its own work as long
// as no count changes. Nothing in this package measures the simulator.
//
// Operations and phases are registered once, at package initialisation, by
// the package that models the kernel code doing the work (kprobes registers
// "kprobe.hash.visit", x86 registers "x86.decode.insn", ...). A Counters value
// is then a flat matrix indexed by (phase, op): an Add in the hottest loop is
// one multiply-free index and one increment.
package sim
