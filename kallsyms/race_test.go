//go:build race

package kallsyms

// raceEnabled: under -race the whole-table tests sample every 97th symbol.
const raceEnabled = true
