package calibrate

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/kpsim/kpsim/sim"
)

// The built-in profiles: kpsim calibrate --regime both on the reference
// machine (see the files' headers), committed as data.
//
//go:embed profiles/*.costs
var profiles embed.FS

// builtinProfiles parses each embedded profile once: they are constants of
// the build, not a cache of inputs.
var builtinProfiles = map[string]func() (*sim.CostTable, error){
	"hot":  sync.OnceValues(func() (*sim.CostTable, error) { return parseBuiltin("hot") }),
	"cold": sync.OnceValues(func() (*sim.CostTable, error) { return parseBuiltin("cold") }),
}

// Builtin returns the built-in cost profile of a regime ("hot" or "cold")
// over the registered defaults; "documented" returns the defaults. Lines
// for ops this build does not register are skipped, so the profile serves
// any set of linked packages; ops the profile lacks keep their documented
// weight. The table is shared: callers must not change it (Clone first).
func Builtin(regime string) (*sim.CostTable, error) {
	if regime == "documented" {
		return sim.DefaultCosts(), nil
	}
	parsed, ok := builtinProfiles[regime]
	if !ok {
		return nil, fmt.Errorf("cost regime %q: want hot, cold or documented", regime)
	}
	return parsed()
}

func parseBuiltin(regime string) (*sim.CostTable, error) {
	name := "profiles/" + regime + ".costs"
	b, err := profiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	// Blank out lines naming ops this build lacks, keeping line numbers,
	// and lines of documented ops: the file holds a copy of the weight
	// registered when it was calibrated (user space cannot time that
	// work), and the weight registered now, with its source, is the one
	// that stands.
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			op, ok := sim.LookupOp(f[0])
			if !ok {
				lines[i] = ""
			} else if k, _ := Classify(op.Info()); k == Documented {
				lines[i] = ""
			}
		}
	}
	t, err := sim.ParseCostsOver(sim.DefaultCosts(), "built-in "+regime+" profile", bytes.NewReader([]byte(strings.Join(lines, "\n"))))
	if err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", name, err)
	}
	FillFromBenches(t)
	return t, nil
}
