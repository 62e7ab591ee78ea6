//go:build race

package bug

func init() { raceEnabled = true }
