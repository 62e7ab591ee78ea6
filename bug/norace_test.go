package bug

var raceEnabled bool
