package sim

import (
	"hash/fnv"
	"math/rand/v2"
)

// NewRNG returns a deterministic random source for one named stream of one
// seed. Independent streams ("image.functions", "scenario.placement") let a
// subsystem draw more or fewer numbers without shifting every other
// subsystem's draws, so a change in one generator does not reshuffle all.
func NewRNG(seed uint64, stream string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(stream))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
