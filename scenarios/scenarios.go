// Package scenarios holds kpsim's scenarios: sequences of kernel calls on a
// kernel image (register N probes, look up names, ...) whose counts a run
// reports per phase. Each scenario registers itself here so the CLI can list
// and run it.
package scenarios

import "sort"

// Info describes a scenario.
type Info struct {
	Name string
	Doc  string
}

var registry []Info

// Register adds a scenario to the list `kpsim list` prints. It is called
// from package initialisation by each scenario's file.
func Register(i Info) {
	for _, r := range registry {
		if r.Name == i.Name {
			panic("scenarios: duplicate " + i.Name)
		}
	}
	registry = append(registry, i)
}

// List returns the registered scenarios sorted by name.
func List() []Info {
	out := append([]Info(nil), registry...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
