package libbpf

import (
	"os/exec"
	"testing"
)

// TestWeightsProgramBuilds: the C benchmark the user-space weights come
// from still compiles (skips without gcc). Run it by hand to re-measure.
func TestWeightsProgramBuilds(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	out, err := exec.Command(gcc, "-O2", "-Wall", "-Werror", "-fsyntax-only", "testdata/weights.c").CombinedOutput()
	if err != nil {
		t.Fatalf("testdata/weights.c: %v\n%s", err, out)
	}
}
