// Package race says whether the race detector is on, and is the one place
// that says why tests shrink under it.
//
// CI runs `go test -race` (make test). The detector instruments every
// memory access of the model, and kpsim's runs are nothing but memory
// accesses over large tables: a registration run is about ten times slower
// under it, a real-kernel load (xz decompression, the ELF and kallsyms
// decoders, boot patching) several times slower. So, and only so that
// `make test` stays within CI's bound, tests that sweep or load large
// inputs take a deterministic sample of them when Enabled:
//
//   - whole-table kallsyms tests (kallsyms, kallsyms/ktab) check every
//     97th symbol instead of every one;
//   - the fault sweeps (machine) take fewer injection points per fault;
//   - scenario sweeps and equivalence runs (scenarios, scenarios/soak) run
//     smaller images, fewer switch sets and shorter campaigns;
//   - the reservation tables' equivalence tests (jumplabel, staticcall,
//     bug, kprobes/blacklist) probe fewer addresses of the default image;
//   - real-kernel tests (image/load, cmd/kpsim) load the pinned kernel
//     once instead of once per variant;
//   - rapid property tests that boot machines per check (trace) run 20
//     checks instead of 100 (RapidChecks).
//
// Each such test runs in full without -race (go test ./...); the race run
// is there to find data races between concurrent runs, which the sample
// exercises as well as the whole.
package race
