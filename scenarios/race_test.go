//go:build race

package scenarios

// raceEnabled: under -race the Debian equivalence test takes one case per class.
const raceEnabled = true
