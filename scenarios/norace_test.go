package scenarios

// raceEnabled: the race detector slows the simulator ~10x; the biggest
// sweeps shrink under it (CI runs go test -race).
var raceEnabled bool
