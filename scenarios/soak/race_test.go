//go:build race

package soak

// raceEnabled: the race detector slows the model ~10x; tests shrink their campaigns.
const raceEnabled = true
