//go:build race

package load

// raceEnabled: loading the real kernel three times is slow under -race.
const raceEnabled = true
