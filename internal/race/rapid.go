package race

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// RapidChecks makes rapid run n checks instead of its default 100 for the
// rest of t, when Enabled and the user chose no number (-rapid.checks,
// RAPID_CHECKS). It is for property tests that boot whole machines per
// check: they run in one goroutine, so under the detector they are a
// sample like the others above, and they run in full without -race. t must
// not be parallel (rapid's flag is process-wide).
func RapidChecks(t testing.TB, n int) {
	if !Enabled || os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	f := flag.Lookup("rapid.checks")
	if f == nil {
		return
	}
	set := false
	flag.Visit(func(g *flag.Flag) { set = set || g.Name == "rapid.checks" })
	if set {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}
