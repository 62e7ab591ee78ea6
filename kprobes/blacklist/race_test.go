//go:build race

package blacklist

func init() { raceEnabled = true }
