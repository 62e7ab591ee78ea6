package staticcall

var raceEnabled bool
