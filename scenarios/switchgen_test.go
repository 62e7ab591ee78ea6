package scenarios

import (
	"strings"
	"testing"

	"github.com/kpsim/kpsim/sim"
)

func TestSwitchNotes(t *testing.T) {
	runs := []*RunResult{{Switches: 0}, {Switches: sim.Switches(0).With(sim.IterCanProbe).With(sim.KprobeTree)}, {Switches: sim.Switches(0).With(sim.FtraceSingleLookup)}}
	cases := []struct {
		gen      string
		want     []string // substrings, one note each
		wantNone bool
	}{
		{gen: "7.3", want: []string{"upstream in 7.3 already: ftrace-single-lookup"}},
		{gen: "6.12", want: []string{"on 6.12 these switches model backports", "kprobe-tree", "ftrace-single-lookup"}},
		{gen: "6.1", want: []string{"on 6.1 these switches model backports", "iter-can-probe"}},
	}
	for _, c := range cases {
		got := strings.Join(SwitchNotes(c.gen, runs), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: notes %q lack %q", c.gen, got, w)
			}
		}
	}
	// iter-can-probe applies as written to 6.12: not listed there.
	if got := strings.Join(SwitchNotes("6.12", runs), "\n"); strings.Contains(got, "iter-can-probe") {
		t.Errorf("6.12 notes name iter-can-probe: %q", got)
	}
	if got := SwitchNotes("6.1", []*RunResult{{}}); len(got) != 0 {
		t.Errorf("no switch on: notes %q", got)
	}
}

func TestSwitchNotesDecision(t *testing.T) {
	runs := []*RunResult{{Switches: sim.Switches(0).With(sim.FtraceSingleLookup)}}
	if got := strings.Join(SwitchNotes("6.1", runs), "\n"); !strings.Contains(got, "ftrace-single-lookup changes a decision") {
		t.Errorf("6.1 notes %q do not name the decision ftrace-single-lookup changes", got)
	}
	if got := strings.Join(SwitchNotes("6.12", runs), "\n"); strings.Contains(got, "changes a decision") {
		t.Errorf("6.12 notes %q name a decision", got)
	}
}
