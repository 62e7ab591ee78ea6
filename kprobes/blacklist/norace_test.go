package blacklist

var raceEnabled bool
