//go:build race

package main

// raceEnabled: the race detector makes the real-kernel loads slow.
const raceEnabled = true
