//go:build race

package jumplabel

func init() { raceEnabled = true }
