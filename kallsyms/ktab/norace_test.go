//go:build !race

package ktab

const raceEnabled = false
