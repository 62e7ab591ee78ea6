package image

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Generation is the kernel generation an image belongs to: the release
// whose C kpsim models for it. Behaviour that differs between generations
// is chosen once from it (per-generation fact tables, never version tests
// inside model functions); see docs/generations.md.
type Generation uint8

const (
	// GenUnknown is a kernel whose release is not one kpsim models; a
	// loader refuses it unless the user names a generation.
	GenUnknown Generation = iota
	// Gen61 is 6.1 (Debian bookworm, 6.1.192): the generation kpsim was
	// first checked against.
	Gen61
	// Gen612 is 6.12 LTS (Debian trixie, 6.12.117).
	Gen612
	// Gen73 is 7.3 (Debian experimental 7.3~rc7): the base the three
	// series were written on.
	Gen73
)

// Generations lists the modelled generations, oldest first.
var Generations = []Generation{Gen61, Gen612, Gen73}

func (g Generation) String() string {
	switch g {
	case Gen61:
		return "6.1"
	case Gen612:
		return "6.12"
	case Gen73:
		return "7.3"
	}
	return "unknown"
}

// Major and minor of each generation.
func (g Generation) majorMinor() (int, int) {
	switch g {
	case Gen61:
		return 6, 1
	case Gen612:
		return 6, 12
	case Gen73:
		return 7, 3
	}
	return 0, 0
}

// AtLeast reports whether g is generation o or a later one. Meant for
// loaders and fact tables choosing a layout, not for model functions.
func (g Generation) AtLeast(o Generation) bool { return g >= o }

var releaseRE = regexp.MustCompile(`^(\d+)\.(\d+)(?:[.~+-]|$)`)

// ParseGeneration maps a release or generation string ("6.1",
// "6.12.117+deb13-amd64", "7.3-amd64", "7.3~rc7") to its generation. A
// release of another major.minor is an error naming it.
func ParseGeneration(s string) (Generation, error) {
	m := releaseRE.FindStringSubmatch(s)
	if m == nil {
		return GenUnknown, fmt.Errorf("%q is not a kernel release (want MAJOR.MINOR[...], one of 6.1, 6.12, 7.3)", s)
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	for _, g := range Generations {
		if a, b := g.majorMinor(); a == maj && b == mnr {
			return g, nil
		}
	}
	return GenUnknown, fmt.Errorf("kernel %d.%d is not a modelled generation (kpsim models 6.1, 6.12 and 7.3; --kernel-version names one to use)", maj, mnr)
}

// ConfigFact is one build fact kpsim decided behaviour on, with where it
// came from: "config in the image" (CONFIG_IKCONFIG), "config file
// beside the image", "--kconfig", "vote" (inferred from the text),
// "symbols", "generation default", ...
type ConfigFact struct {
	Option string `json:"option"` // CONFIG_X86_KERNEL_IBT, ...
	Value  string `json:"value"`  // y, n, 16, ...
	From   string `json:"from"`
}

// MarshalText writes the generation as its release ("6.12").
func (g Generation) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText reads a generation written by MarshalText.
func (g *Generation) UnmarshalText(b []byte) error {
	if string(b) == "unknown" {
		*g = GenUnknown
		return nil
	}
	v, err := ParseGeneration(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// Effective is the generation a model should follow: GenUnknown (an image
// from before generations were recorded: the synthetic generator's
// 6.1-shaped default) reads as Gen61.
func (g Generation) Effective() Generation {
	if g == GenUnknown {
		return Gen61
	}
	return g
}

// ReleaseLine names a kernel for a report: "kernel REL, generation G", or
// "generation G" when the release is unknown (a synthetic image). gen is
// a Generation's string.
func ReleaseLine(release, gen string) string {
	if release == "" {
		return "generation " + gen
	}
	return "kernel " + release + ", generation " + gen
}

// FactsOn lists the facts that are on, as OPTION=VALUE without the
// CONFIG_ prefix, space-separated: the one-line form of Config.Facts.
func FactsOn(facts []ConfigFact) string {
	var on []string
	for _, f := range facts {
		if f.Value != "n" {
			on = append(on, strings.TrimPrefix(f.Option, "CONFIG_")+"="+f.Value)
		}
	}
	return strings.Join(on, " ")
}
