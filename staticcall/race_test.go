//go:build race

package staticcall

func init() { raceEnabled = true }
