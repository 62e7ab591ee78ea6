// Package scenarios holds kpsim's scenarios: sequences of kernel calls on a
// kernel image (register N probes, look up names, ...) whose counts a run
// reports per phase. kpsim run dispatches to them by name.
package scenarios
