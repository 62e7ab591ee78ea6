package machine_test

// raceEnabled is set under -race (race_test.go): the fault sweep then
// takes fewer hits.
var raceEnabled bool
