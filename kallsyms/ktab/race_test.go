//go:build race

package ktab

const raceEnabled = true
