// Package soak is kpsim's long random campaign: one seeded PRNG draws a
// list of steps against a booted kernel (every registration front door,
// aggregation and re-registration, enable and disable, optimizer runs,
// late init, range and monotonic queries of the registry) and the same list
// runs on the upstream (`none`) machine and on machines under sampled
// switch combinations and designs. After every step the harness compares
// what the kernel decided: each result and errno, the flags, state and
// reason of every probe the step touched, the registry's content and every
// iterator answer. Counts differ by design; decisions must not.
//
// What Linux does. Nothing here models a kernel path of its own: every
// step is a call through the model's front doors (register_kprobe,
// register_kprobes, register_kretprobe, kprobe_events writes, the perf
// kprobe PMU, bpf(BPF_LINK_CREATE) for kprobe.multi, the optimizer's
// delayed work, late_initcall). The soak is the differential test of
// "every switch preserves behaviour" under a long, mixed history, the kind
// of history (probes registered before and after late init, aggregators
// that lose their last child while queued for unoptimization, re-used
// struct kprobes) that the scenario runs never produce.
//
// A divergence is shrunk (delta debugging over the step list, then
// simpler arguments) to a minimal reproducer, written under testdata/soak
// in a one-step-a-line text format (see Format) and replayed by `go test`.
package soak
