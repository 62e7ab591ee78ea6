//go:build !race

package kallsyms

const raceEnabled = false
